"""Typed errors of the env clients.

The hierarchy says what the caller may do next:

* `EnvRequestError`: the server understood the call and refused it (an HTTP
  4xx, or an HTTP 200 whose body is ``{"error": ...}`` as family-B servers
  answer).  Retrying the same call cannot help; the env may still be usable.
* `EnvUnavailableError` and its subclasses: the server could not be reached,
  did not answer in time, or failed (5xx) even after the retries.  The env is
  gone or suspect: discard it and create another, possibly on another server.
* `EnvProtocolError`: the answer does not have the shape the protocol promises.
* `EnvCapacityError`: the server is healthy but holds as many envs as it may (its
  ``/create`` answered 503 for as long as the client waited); another server may have room.

Every error carries the ``url`` it concerns; `EnvRequestError` and
`EnvServerError` also carry the HTTP ``status``.
"""

from __future__ import annotations


class EnvClientError(Exception):
    """Base of every env-client error."""

    def __init__(self, message: str, url: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


class EnvRequestError(EnvClientError):
    """The server refused the request (4xx or an ``{"error": ...}`` body)."""


class EnvProtocolError(EnvClientError):
    """The server answered something the protocol does not allow."""


class EnvCapacityError(EnvClientError):
    """The server stayed at its env cap (``/create`` answered 503) for as long as the client waited."""


class EnvUnavailableError(EnvClientError):
    """The server could not serve the request (after retries); the env should be discarded."""


class EnvConnectionError(EnvUnavailableError):
    """No connection could be made, or it broke mid-request."""


class EnvTimeoutError(EnvUnavailableError):
    """The server did not answer within the timeout."""


class EnvServerError(EnvUnavailableError):
    """The server answered 5xx."""


class NoEnvServerError(EnvUnavailableError):
    """No server of the pool could create an env."""
