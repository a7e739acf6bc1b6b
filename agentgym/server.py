"""Server base shared by every AgentGym environment server.

Contract
--------
* ``EnvRegistry`` holds the live envs of one server process.  Ids count up
  from 0 under a lock and are never reused, so two ``/create`` calls never
  share an env.  Past ``max_envs`` live envs, ``create`` raises
  ``EnvCapacityError`` (HTTP 503).  ``use(id)`` yields the env while holding
  that env's own lock, so concurrent calls on one env run one at a time while
  calls on different envs run in parallel.
* ``create_app`` builds the FastAPI app with the routes every env shares:
  ``GET /`` (health, answers ``"ok"``), ``POST /create``, ``POST /close`` and
  ``GET /list_envs``, and closes every open env when the server shuts down.  Their shapes follow the env's
  protocol family:
  family A names the id ``env_idx`` and ``/create`` answers a bare int;
  family B names it ``id`` and ``/create`` answers ``{"id": n}``.
  ``/close`` answers ``true``.  The env module adds its own routes.
* Errors answer JSON ``{"error": "<message>"}``: unknown id 404, an episode that is
  finished or not started 409, a request body over ``max_body_bytes`` (1 MiB by
  default) 413 before any route runs, a body or query that fails validation 422, the env cap 503,
  anything unexpected 500 (logged with its traceback, which never reaches the
  client).
"""

from __future__ import annotations

import enum
import itertools
import json
import logging
import threading
from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Callable, Generic, Iterator, TypeVar

from fastapi import Body, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("agentgym.server")

E = TypeVar("E")


class EnvError(Exception):
    """An error answered to the client with ``status_code`` and its message."""

    status_code = 400


class UnknownEnvError(EnvError):
    status_code = 404


class EpisodeStateError(EnvError):
    """The episode is finished (or not started) and cannot take this call."""

    status_code = 409


class InvalidRequestError(EnvError):
    status_code = 422


class EnvCapacityError(EnvError):
    status_code = 503


class Family(enum.Enum):
    """Protocol family: the name of the id field and the ``/create`` answer."""

    A = "env_idx"
    B = "id"

    @property
    def id_field(self) -> str:
        return self.value

    def create_response(self, env_id: int) -> Any:
        return env_id if self is Family.A else {"id": env_id}


class _Slot(Generic[E]):
    __slots__ = ("env", "lock")

    def __init__(self, env: E) -> None:
        self.env = env
        self.lock = threading.Lock()


class EnvRegistry(Generic[E]):
    """Thread-safe map of env id -> env, with a cap on live envs.

    ``factory`` builds a new env; if the env has a ``close()`` method it is
    called when the env is closed.
    """

    def __init__(self, factory: Callable[[], E], max_envs: int, id_name: str = "env") -> None:
        if max_envs < 1:
            raise ValueError("max_envs must be at least 1")
        self._factory = factory
        self.max_envs = max_envs
        self._id_name = id_name
        self._slots: dict[int, _Slot[E]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count()

    def create(self) -> int:
        with self._lock:
            if len(self._slots) >= self.max_envs:
                raise EnvCapacityError(
                    f"env cap reached: {len(self._slots)} of {self.max_envs} envs are open; "
                    "close some with POST /close or start the server with a larger --max-envs"
                )
            env_id = next(self._ids)
            # Reserve the id before building so the cap holds under concurrency.
            self._slots[env_id] = slot = _Slot(None)  # type: ignore[arg-type]
            slot.lock.acquire()
        try:
            slot.env = self._factory()
        except BaseException:
            with self._lock:
                del self._slots[env_id]
            raise
        finally:
            slot.lock.release()
        log.debug("env created", extra={"env_id": env_id, "live": len(self._slots)})
        return env_id

    def _slot(self, env_id: int) -> _Slot[E]:
        with self._lock:
            slot = self._slots.get(env_id)
        if slot is None:
            raise UnknownEnvError(f"unknown {self._id_name} {env_id}: create one with POST /create")
        return slot

    @contextmanager
    def use(self, env_id: int) -> Iterator[E]:
        """Yield env ``env_id`` holding its lock; ``UnknownEnvError`` if absent."""
        slot = self._slot(env_id)
        with slot.lock:
            with self._lock:
                if self._slots.get(env_id) is not slot:  # closed while we waited
                    raise UnknownEnvError(f"unknown {self._id_name} {env_id}: it was closed")
            yield slot.env

    def close(self, env_id: int) -> None:
        with self._lock:
            slot = self._slots.pop(env_id, None)
        if slot is None:
            raise UnknownEnvError(f"unknown {self._id_name} {env_id}: create one with POST /create")
        with slot.lock:  # let an in-flight call on this env finish first
            closer = getattr(slot.env, "close", None)
            if callable(closer):
                closer()
            slot.env = None  # type: ignore[assignment]
        log.debug("env closed", extra={"env_id": env_id, "live": len(self._slots)})

    def ids(self) -> list[int]:
        with self._lock:
            return sorted(self._slots)

    def close_all(self) -> None:
        """Close every open env (the server is shutting down: envs with processes of their own end them)."""
        for env_id in self.ids():
            try:
                self.close(env_id)
            except UnknownEnvError:
                pass  # closed meanwhile

    def __len__(self) -> int:
        with self._lock:
            return len(self._slots)


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
        return _error(exc.status_code, str(exc))

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
            return await _reject(send, f"request body of {int(declared)} bytes exceeds the limit of {self.max_bytes} bytes")
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
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def create_app(title: str, registry: EnvRegistry[Any], family: Family, max_body_bytes: int = 1 << 20) -> FastAPI:
    """The FastAPI app with health, create, close and list_envs routes; bodies over ``max_body_bytes`` get 413."""
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        registry.close_all()

    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)
    install_error_handlers(app)
    app.state.registry = registry
    id_field = family.id_field

    @app.get("/")
    def health() -> str:
        return "ok"

    @app.post("/create")
    def create() -> Any:
        return family.create_response(registry.create())

    @app.post("/close")
    def close(body: dict[str, Any] = Body(...)) -> bool:
        env_id = body.get(id_field)
        if not isinstance(env_id, int) or isinstance(env_id, bool):
            raise InvalidRequestError(f"invalid request: body must be {{\"{id_field}\": <int>}}")
        registry.close(env_id)
        return True

    @app.get("/list_envs")
    def list_envs() -> list[int]:
        return registry.ids()

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
