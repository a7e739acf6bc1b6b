"""JSON over HTTP to one env server, with a timeout on every call, retries and typed errors.

Retry rule (`RetryPolicy`): a call is tried at most ``1 + retries`` times,
sleeping ``backoff_s * 2**k`` before retry ``k + 1``.  Retried: a failed or
broken connection, and an HTTP 5xx answer.  A read timeout is retried only
for calls marked ``idempotent`` (a ``/step`` that timed out may have been
applied, so repeating it could step the env twice).  Never retried: 4xx and
``{"error": ...}`` bodies (`EnvRequestError`), and a 5xx status the caller lists
in ``unretried`` (``/create``'s 503, the env cap: `EnvClient.create` waits for room its own way).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import requests

from . import errors

CONNECT_TIMEOUT_CAP_S = 5.0


@dataclass(frozen=True)
class RetryPolicy:
    """Timeout of one HTTP call (seconds), retries after a retryable failure, and the backoff base."""

    timeout_s: float = 30.0
    retries: int = 2
    backoff_s: float = 0.2

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.retries < 0 or self.backoff_s < 0:
            raise ValueError(f"invalid retry policy {self}: timeout_s > 0, retries >= 0 and backoff_s >= 0 required")


def _error_message(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict) and body.get("error"):
        return str(body["error"])
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])
    return str(body)[:300]


class JsonHttp:
    """JSON calls to ``base_url`` (one requests session, so one connection kept alive)."""

    def __init__(self, base_url: str, policy: RetryPolicy) -> None:
        self.base_url = base_url.rstrip("/")
        self.policy = policy
        self.session = requests.Session()

    def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        idempotent: bool = False,
        timeout_s: float | None = None,
        retries: int | None = None,
        unretried: tuple[int, ...] = (),
    ) -> Any:
        """The decoded JSON answer of ``method path``; raises an `EnvClientError` subclass on failure.
        A 5xx status in ``unretried`` raises `EnvServerError` at once (the caller has its own rule for it)."""
        url = self.base_url + path
        timeout = timeout_s or self.policy.timeout_s
        attempts = 1 + (self.policy.retries if retries is None else retries)
        last: errors.EnvClientError | None = None
        tried = 0
        while tried < attempts:
            if tried:
                time.sleep(self.policy.backoff_s * 2 ** (tried - 1))
            tried += 1
            try:
                response = self.session.request(
                    method, url, json=json, params=params, timeout=(min(timeout, CONNECT_TIMEOUT_CAP_S), timeout)
                )
            except requests.exceptions.ReadTimeout:
                last = errors.EnvTimeoutError(f"{method} {url}: no answer within {timeout:g}s", url)
                if not idempotent:
                    break
                continue
            except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
                last = errors.EnvConnectionError(f"{method} {url}: connection failed ({type(exc).__name__})", url)
                continue
            except requests.RequestException as exc:  # anything else requests can raise: not worth repeating
                raise errors.EnvProtocolError(f"{method} {url}: {type(exc).__name__}: {exc}", url) from exc
            if response.status_code >= 500:
                last = errors.EnvServerError(
                    f"{method} {url}: HTTP {response.status_code}: {_error_message(response)}",
                    url,
                    response.status_code,
                )
                if response.status_code in unretried:
                    break
                continue
            if response.status_code >= 400:
                raise errors.EnvRequestError(
                    f"{method} {url}: HTTP {response.status_code}: {_error_message(response)}",
                    url,
                    response.status_code,
                )
            try:
                body = response.json()
            except ValueError as exc:
                raise errors.EnvProtocolError(
                    f"{method} {url}: answer is not JSON: {response.text[:200]!r}", url
                ) from exc
            if isinstance(body, dict) and body.get("error"):
                raise errors.EnvRequestError(f"{method} {url}: {body['error']}", url, response.status_code)
            return body
        assert last is not None
        if tried > 1:
            last.args = (f"{last.args[0]} (after {tried} attempts)",)
        raise last

    def close(self) -> None:
        self.session.close()
