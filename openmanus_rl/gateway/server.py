"""`Gateway`: the process's OpenAI-compatible HTTP server (FastAPI + uvicorn on 127.0.0.1, a free port,
in a background thread) and its sessions.

Routes, each also under ``/sessions/<id>`` (the base URL an episode gets is
``http://127.0.0.1:<port>/sessions/<id>/v1``):

* ``GET /v1/models``: the one model, the policy being trained;
* ``POST /v1/chat/completions``: one reply (`Session`), never streamed.

Every call names its session: on ``/v1/...`` by its API key (``Authorization: Bearer <key>``), on
``/sessions/<id>/v1/...`` by the path, with the session's key.  Errors are OpenAI error objects:
unknown key 401 ``invalid_api_key``; unknown session 404 ``session_not_found``; a session whose
episode ended 404 ``session_closed``; a second call while one is out 409 ``session_busy``; a body
over ``max_body_bytes`` 413 ``body_too_large``; a body that is not JSON or not a valid request 400;
an unknown route 404, a wrong method 405.  Bad input is never answered 500.

Responses carry the header ``x-gateway-sampling``: ``run`` when the request asked for nothing other
than the run's sampling, else ``run; ignored=<fields>`` (e.g. ``run; ignored=temperature,seed``):
the run's temperature, top_p and top_k (greedy in validation) and the gateway's per-call seed
always apply, whatever the request says; the body's ``gateway`` field lists what was applied.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from verl.utils.http_server import BackgroundServer, add_error_handlers, read_json_body
from verl.utils.openai_api import ApiError, parse_chat_request

from .dispatch import Cancelled, Dispatcher
from .session import Session

MAX_BODY_BYTES = 8 * 1024 * 1024


class Gateway:
    """The server and its session registry; `shared` gives the process's one instance."""

    _shared: "Gateway | None" = None
    _users = 0
    _shared_lock = threading.Lock()

    def __init__(self, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.max_body_bytes = max_body_bytes
        self._by_id: dict[str, Session] = {}
        self._by_key: dict[str, Session] = {}
        self._dispatchers: dict[int, tuple[Any, Dispatcher]] = {}
        self._lock = threading.Lock()
        self._http = BackgroundServer(self._app(), "gateway-http")
        self.port = self._http.port

    @property
    def url(self) -> str:
        return self._http.url

    # ------------------------------------------------------------------ the shared instance
    @classmethod
    def shared(cls) -> "Gateway":
        """The process's gateway, started by the first caller; each caller calls `release` once."""
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            cls._users += 1
            return cls._shared

    def release(self) -> None:
        """One user of the shared gateway is done; the last one closes it."""
        with Gateway._shared_lock:
            Gateway._users -= 1
            if Gateway._users > 0:
                return
            Gateway._shared = None
        self.close()

    def close(self) -> None:
        """Stop the server and every dispatcher."""
        self._http.close()
        for _, dispatcher in self._dispatchers.values():
            dispatcher.close()

    # ------------------------------------------------------------------ sessions
    def dispatcher(self, generator: Any) -> Dispatcher:
        """The one `Dispatcher` of ``generator`` (made on first use)."""
        with self._lock:
            if id(generator) not in self._dispatchers:
                self._dispatchers[id(generator)] = (generator, Dispatcher(generator))
            return self._dispatchers[id(generator)][1]

    def new_id(self) -> tuple[str, str]:
        """A fresh session id and API key."""
        return secrets.token_hex(8), f"gw-{secrets.token_urlsafe(24)}"

    def add(self, session: Session) -> str:
        """Register ``session``; returns its base URL."""
        with self._lock:
            self._by_id[session.id] = session
            self._by_key[session.key] = session
        return f"{self.url}/sessions/{session.id}/v1"

    def remove(self, session: Session) -> None:
        """Close ``session`` and forget it (its id and key are then unknown)."""
        session.close()
        with self._lock:
            self._by_id.pop(session.id, None)
            self._by_key.pop(session.key, None)

    def _session(self, request: Request, session_id: str | None) -> Session:
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        key = key.strip() if scheme.lower() == "bearer" else ""
        with self._lock:
            session = self._by_key.get(key) if session_id is None else self._by_id.get(session_id)
        if session is None and session_id is not None:
            raise ApiError(
                404, f"no session {session_id!r}: each episode's base URL names its session", "session_not_found"
            )
        if session is None or not secrets.compare_digest(session.key.encode(), key.encode()):
            raise ApiError(
                401, "unknown API key: send your episode's key as 'Authorization: Bearer <key>'", "invalid_api_key"
            )
        if session.closed:
            raise ApiError(404, f"session {session.id} is closed: its episode ended", "session_closed")
        return session

    # ------------------------------------------------------------------ the app
    def _app(self) -> FastAPI:
        app = FastAPI(title="openmanus-rl gateway", docs_url=None, redoc_url=None, openapi_url=None)
        add_error_handlers(app)

        async def models(request: Request) -> dict[str, Any]:
            session = self._session(request, request.path_params.get("session_id"))
            return {
                "object": "list",
                "data": [{"id": session.policy.model, "object": "model", "created": 0, "owned_by": "openmanus-rl"}],
            }

        async def chat(request: Request) -> JSONResponse:
            session = self._session(request, request.path_params.get("session_id"))
            pending = session.begin(parse_chat_request(await read_json_body(request, self.max_body_bytes)))
            try:
                ids, log_probs, reason = await asyncio.wrap_future(pending.future)
            except Cancelled as exc:
                session.abort()
                raise ApiError(404, f"session {session.id} is closed: {exc}", "session_closed") from None
            except Exception as exc:
                session.abort()
                raise ApiError(
                    500, f"the engine failed: {type(exc).__name__}: {exc}", "engine_error", type="server_error"
                ) from None
            except asyncio.CancelledError:  # the client went away: the session takes calls again
                session.abort()
                raise
            reply = session.finish(pending, ids, log_probs, reason)
            ignored = reply.gateway["ignored"]
            header = "run" + (f"; ignored={','.join(ignored)}" if ignored else "")
            return JSONResponse(reply.body(), headers={"x-gateway-sampling": header})

        for prefix in ("", "/sessions/{session_id}"):
            app.add_api_route(f"{prefix}/v1/models", models, methods=["GET"])
            app.add_api_route(f"{prefix}/v1/chat/completions", chat, methods=["POST"])
        return app
