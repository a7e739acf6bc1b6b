"""The HTTP app shared by every AgentGym environment server: its shared routes, error answers, body limit and logs.

Contract
--------
* ``create_app`` builds the FastAPI app with the routes every env shares over
  the server's open envs (`agentgym.open_envs.EnvRegistry`: ids, cap, idle
  expiry, eviction): ``GET /`` (liveness, answers ``"ok"``, as upstream),
  ``GET /health`` (the JSON of `EnvRegistry.health`: ``open``, ``max_envs``,
  ``reaped``, ``idle_timeout_s``, ``in_flight`` and ``oldest_request_s``, the age
  of the oldest env call still running), ``POST /create``, ``POST /close`` and
  ``GET /list_envs``; it runs the idle sweep and closes every open env when the
  server shuts down (`agentgym.open_envs.registries_lifespan`).  ``GET /`` and
  ``GET /health`` run on the event loop, so they answer even while every worker
  thread is stuck in an env call: a supervisor tells such a server by
  ``oldest_request_s``.  Their shapes follow the env's protocol family, as its
  ``spec.toml`` declares it (`agentgym.spec.EnvSpec.family`):
  family A names the id ``env_idx`` and ``/create`` answers a bare int;
  family B names it ``id`` and ``/create`` answers ``{"id": n}``.
  ``/close`` answers ``true``.  The env module adds its own routes.
* Test-only fault injection: a server started with ``AGENTGYM_FAULT_INJECTION=1``
  in its environment also serves ``POST /debug/hang``, after which every env call
  (create, close and each route on an env) blocks forever while ``GET /`` and
  ``GET /health`` still answer (a stuck JVM, a deadlocked planner).  Without the
  variable the route does not exist.
* Errors answer JSON ``{"error": "<message>"}``: an `agentgym.open_envs.EnvError`
  with its status (unknown id 404, an episode that is finished or not started 409,
  an env reaped for idleness 410, the env cap 503), a request body over
  ``max_body_bytes`` (1 MiB by default) 413 before any route runs, a body or query
  that fails validation 422, anything unexpected 500 (logged with its traceback,
  which never reaches the client).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable, Literal

from fastapi import Body, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .open_envs import EnvError, EnvRegistry, InvalidRequestError, registries_lifespan

log = logging.getLogger("agentgym.server")

FAULT_INJECTION_ENV = "AGENTGYM_FAULT_INJECTION"  # "1": serve the test-only POST /debug/hang


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": message})


def _describe_validation(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            parts.append(f"body is not valid JSON ({err.get('ctx', {}).get('error', 'decode error')})")
            continue
        loc = [str(x) for x in err.get("loc", ())]
        where = ".".join(loc[1:] if loc[:1] == ["body"] else loc) or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(parts)


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error as ``{"error": message}`` with the right status."""

    @app.exception_handler(EnvError)
    async def _env_error(request: Request, exc: EnvError) -> JSONResponse:
        log.info("request refused", extra={"path": request.url.path, "status": exc.status_code, "error": str(exc)})
        return JSONResponse(
            status_code=exc.status_code, content={"error": str(exc), **exc.details}, headers=exc.headers
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        message = _describe_validation(exc)
        log.info("request refused", extra={"path": request.url.path, "status": 422, "error": message})
        return _error(422, message)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # FastAPI could not read the body (e.g. not UTF-8)
            return _error(422, f"invalid request: body is not valid JSON ({exc.detail})")
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error", extra={"path": request.url.path})
        return _error(500, f"internal server error ({type(exc).__name__}); see the server log")


class BodySizeLimit:
    """ASGI middleware: a request body over ``max_bytes`` is answered 413 ``{"error": ...}`` and no route runs.

    A declared ``Content-Length`` is checked before anything is read; a body sent
    without one (chunked) is counted as it arrives and refused as soon as it
    passes the limit, so at most ``max_bytes`` of it is ever held.
    """

    def __init__(self, app: Any, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_body_bytes must be >= 1, got {max_bytes}")
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await _reject(
                send, f"request body of {int(declared)} bytes exceeds the limit of {self.max_bytes} bytes"
            )
        held, size = [], 0
        while True:
            message = await receive()
            held.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                return await _reject(send, f"request body exceeds the limit of {self.max_bytes} bytes")
            if not message.get("more_body", False):
                break

        async def replay() -> dict:
            return held.pop(0) if held else await receive()

        await self.app(scope, replay, send)


async def _reject(send: Callable, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def create_app(
    title: str, registry: EnvRegistry[Any], family: Literal["A", "B"], max_body_bytes: int = 1 << 20
) -> FastAPI:
    """The FastAPI app with the shared routes (see the module docstring) and the idle sweep of ``registry``, in
    the shapes of protocol ``family`` (the env's `agentgym.spec.EnvSpec.family`); bodies over ``max_body_bytes``
    get 413.  ``POST /debug/hang`` only with ``AGENTGYM_FAULT_INJECTION=1``."""
    if family not in ("A", "B"):
        raise ValueError(f"family must be 'A' or 'B', got {family!r}")
    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None, lifespan=registries_lifespan(registry))
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)
    install_error_handlers(app)
    app.state.registry = registry
    id_field = "env_idx" if family == "A" else "id"

    @app.get("/")
    async def alive() -> str:
        return "ok"

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return registry.health()

    @app.post("/create")
    def create() -> Any:
        env_id = registry.create()
        return env_id if family == "A" else {"id": env_id}

    @app.post("/close")
    def close(body: dict[str, Any] = Body(...)) -> bool:
        env_id = body.get(id_field)
        if not isinstance(env_id, int) or isinstance(env_id, bool):
            raise InvalidRequestError(f'invalid request: body must be {{"{id_field}": <int>}}')
        registry.close(env_id)
        return True

    @app.get("/list_envs")
    def list_envs() -> list[int]:
        return registry.ids()

    if os.environ.get(FAULT_INJECTION_ENV) == "1":

        @app.post("/debug/hang")
        async def hang() -> bool:
            log.warning("fault injected: every env call hangs from now on")
            registry.inject_hang()
            return True

    return app


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and extras."""

    _std = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "color_message"}

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in self._std})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str = "info") -> None:
    """Send JSON-line logs of the root logger (and uvicorn's) to stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLogFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
