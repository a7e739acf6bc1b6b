"""`EnvClient`: one env on one AgentGym server, for either protocol family.

Life cycle: ``create()`` (``POST /create``), then episodes of ``reset(task)``
and ``step(action)``, then ``close()`` (``POST /close``).  Works unchanged
against our servers and upstream AgentGym servers: upstream WebShop has no
``/close``, so a 404/405 there is ignored (as is the 410 of an env our server
already closed for idleness), and family-B ``{"error": ...}`` answers become
`EnvRequestError` like our 4xx answers do.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from .errors import EnvCapacityError, EnvClientError, EnvProtocolError, EnvRequestError, EnvServerError
from .http import JsonHttp, RetryPolicy
from .specs import EnvSpec

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 5.0
CAPACITY_PAUSE_MAX_S = 2.0  # the longest pause between two /create calls to a server at its env cap


@dataclass(frozen=True)
class StepResult:
    observation: str
    reward: float
    done: bool
    info: Any = None


def _observation(answer: Any, keys: tuple[str, ...], url: str) -> str | None:
    """The observation text in a reset/step/observation answer; None when it has none."""
    if isinstance(answer, str):
        return answer
    if isinstance(answer, list) and answer and isinstance(answer[0], str):
        return answer[0]  # WebShop's reset answers [observation, null]
    if isinstance(answer, dict):
        parts = [str(answer[k]) for k in keys if answer.get(k) is not None]
        return "\n\n".join(parts) if parts else None
    if answer is None:
        return None
    raise EnvProtocolError(f"{url}: cannot read an observation from {str(answer)[:200]!r}", url)


def first_observation(spec: EnvSpec, answer: Any, url: str = "") -> str | None:
    """The first observation in a ``/reset`` answer, as the agent is shown it: the spec's ``reset_observation_keys``
    (else its ``observation_keys``) joined by blank lines; None when the answer has none."""
    return _observation(answer, spec.reset_observation_keys or spec.observation_keys, url)


class EnvClient:
    """One env on the server at ``server_url`` (``http://host:port``)."""

    def __init__(self, spec: EnvSpec, server_url: str, policy: RetryPolicy) -> None:
        self.spec = spec
        self.server_url = server_url
        self.http = JsonHttp(server_url + spec.prefix, policy)
        self.env_id: int | None = None

    def __repr__(self) -> str:
        return f"EnvClient({self.spec.name}, {self.server_url}, {self.spec.id_field}={self.env_id})"

    def _body(self, **extra: Any) -> dict[str, Any]:
        if self.env_id is None:
            raise EnvClientError(f"{self!r}: create() was not called (or the env was closed)")
        return {self.spec.id_field: self.env_id, **extra}

    def create(self, capacity_wait_s: float | None = None) -> int:
        """``POST /create``; keeps and returns the new env's id.

        A server at its env cap (HTTP 503, ``--max-envs``) is asked again, after pauses that double from the
        retry backoff up to ``CAPACITY_PAUSE_MAX_S``, for up to ``capacity_wait_s`` seconds (default
        `reset_timeout_s`): an episode waits for a free env instead of failing; past that, `EnvCapacityError`.
        Any other failure gets the usual retries.
        """
        try:
            answer = self.http.call("POST", "/create", unretried=(503,))
        except EnvServerError as exc:
            if exc.status != 503:
                raise
            answer = self._create_when_free(self.reset_timeout_s if capacity_wait_s is None else capacity_wait_s)
        env_id = answer.get("id") if isinstance(answer, dict) else answer
        if not isinstance(env_id, int) or isinstance(env_id, bool):
            raise EnvProtocolError(
                f"{self.server_url}: /create answered {str(answer)[:200]!r}, expected an env id", self.server_url
            )
        self.env_id = env_id
        return env_id

    def _create_when_free(self, wait_s: float) -> Any:
        deadline = time.monotonic() + wait_s
        pause = max(self.http.policy.backoff_s, 0.05)
        while True:
            if time.monotonic() + pause > deadline:
                raise EnvCapacityError(
                    f"POST {self.http.base_url}/create: the server stayed at its env cap (HTTP 503) for {wait_s:g}s",
                    self.server_url,
                    503,
                )
            time.sleep(pause)
            pause = min(2 * pause, CAPACITY_PAUSE_MAX_S)
            try:
                return self.http.call("POST", "/create", unretried=(503,))
            except EnvServerError as exc:
                if exc.status != 503:
                    raise

    @property
    def reset_timeout_s(self) -> float:
        """How long ``/reset`` may take: the request timeout, or the env's ``reset_timeout_s`` when larger
        (`agentgym.spec.EnvSpec`: resets that queue on the server, like ALFWorld's game loading)."""
        return max(self.http.policy.timeout_s, self.spec.reset_timeout_s or 0.0)

    def reset(self, task_id: int) -> str:
        """Reset to task ``task_id`` (sent as the spec's ``reset_field``); returns the first observation, waiting
        up to `reset_timeout_s`."""
        body = self._body(**{self.spec.reset_field: task_id}, **dict(self.spec.reset_extra))
        answer = self.http.call("POST", "/reset", json=body, timeout_s=self.reset_timeout_s)
        observation = first_observation(self.spec, answer, self.server_url)
        return observation if observation is not None else self.observe()

    def step(self, action: str) -> StepResult:
        """``POST /step``; the answer's observation, reward (the spec's ``reward_key``) and done flag."""
        answer = self.http.call("POST", "/step", json=self._body(action=action))
        if not isinstance(answer, dict):
            raise EnvProtocolError(
                f"{self.server_url}: /step answered {str(answer)[:200]!r}, expected an object", self.server_url
            )
        observation = _observation(answer, self.spec.observation_keys, self.server_url)
        reward = answer.get(self.spec.reward_key, answer.get("reward"))
        try:
            reward = float(reward or 0.0)
        except (TypeError, ValueError):
            raise EnvProtocolError(
                f"{self.server_url}: /step reward {reward!r} is not a number", self.server_url
            ) from None
        return StepResult(observation or "", reward, bool(answer.get("done", False)), answer.get("info"))

    def observe(self) -> str:
        """``GET /observation``: the current observation."""
        answer = self.http.call("GET", "/observation", params=self._body(), idempotent=True)
        observation = _observation(answer, self.spec.observation_keys, self.server_url)
        if observation is None:
            raise EnvProtocolError(f"{self.server_url}: /observation answered no observation", self.server_url)
        return observation

    def close(self, notify: bool = True) -> None:
        """``POST /close`` once, best effort (never raises), unless ``notify`` is False; then drop the connection."""
        if self.env_id is not None and notify:
            try:
                self.http.call("POST", "/close", json=self._body(), timeout_s=CLOSE_TIMEOUT_S, retries=0)
            except EnvRequestError as exc:
                if exc.status not in (404, 405, 410):  # upstream servers without /close answer 404/405; 410: expired
                    log.warning("closing %r refused: %s", self, exc)
            except EnvClientError as exc:
                log.warning("closing %r failed: %s", self, exc)
        self.env_id = None
        self.http.close()
