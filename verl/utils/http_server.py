"""A FastAPI app served in a background thread of this process, with OpenAI-style errors.

Shared by the agent gateway (`openmanus_rl.gateway.server`) and the served LLM judge
(`verl.workers.judge_server`): `BackgroundServer` binds a free port (or a given one), runs uvicorn on
a daemon thread and returns once it accepts connections; `add_error_handlers` answers every error as
an OpenAI error object (`verl.utils.openai_api.ApiError`: 404 and 405 for unknown routes and methods,
500 ``internal_error`` for anything unexpected); `read_json_body` reads a body under a size limit.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from verl.utils.openai_api import ApiError

START_TIMEOUT_S = 30.0


def error_response(exc: ApiError) -> JSONResponse:
    return JSONResponse(exc.payload(), status_code=exc.status)


def add_error_handlers(app: FastAPI) -> None:
    """Every error of ``app`` answered as an OpenAI error object (see the module docstring)."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        return error_response(ApiError(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}", code))

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception) -> JSONResponse:
        return error_response(ApiError(500, f"{type(exc).__name__}: {exc}", "internal_error", type="server_error"))


async def read_json_body(request: Request, max_bytes: int) -> Any:
    """The request's JSON body; `ApiError` 413 ``body_too_large`` past ``max_bytes``, 400 ``invalid_json``."""
    declared = request.headers.get("content-length", "")
    too_large = ApiError(413, f"the body is larger than {max_bytes} bytes", "body_too_large")
    if declared.isdigit() and int(declared) > max_bytes:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise too_large
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}", "invalid_json") from None


class BackgroundServer:
    """``app`` served by uvicorn on ``host:port`` (port 0: a free one) in a daemon thread named ``name``."""

    def __init__(self, app: FastAPI, name: str, host: str = "127.0.0.1", port: int = 0) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        self.host, self.port = host, sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, name=name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start on {host}:{self.port}")
            time.sleep(0.01)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join()
