"""A tiny family-B AgentGym server ("counter") for client and layout tests, run as its own process.

    python tests/openmanus_rl/toy_server.py --port P [--prefix /maze] [--reset-field game] [--no-close]

Env: task k asks to reach the value k from 0.  ``POST {prefix}/create`` ->
``{"id": n}``; ``/reset`` ``{"id", <reset-field>: k}`` -> ``{"observation":
"Task k: value 0.", "reward": 0, "done": false}``; ``/step`` ``{"id",
"action": "add N"}`` -> ``{"observation": "value V", "reward", "done"}`` with
done once V >= k and reward 1.0 when V == k; any other action answers
"Nothing happens.".  Upstream family-B error style: an unknown id or a step on
a finished episode answers HTTP 200 ``{"error": ...}``.  ``--no-close`` drops
``/close`` (like upstream servers that lack it).  ``GET {prefix}/debug/resets``
lists ``[id, task]`` of every reset, for assertions.
"""

from __future__ import annotations

import argparse
import itertools
import re
import threading
from typing import Any

import uvicorn
from fastapi import APIRouter, Body, FastAPI


def build_app(prefix: str, reset_field: str, with_close: bool) -> FastAPI:
    envs: dict[int, dict[str, Any]] = {}
    resets: list[list[int]] = []
    ids = itertools.count()
    lock = threading.Lock()
    router = APIRouter(prefix=prefix)

    @router.get("/")
    def health() -> str:
        return "ok"

    @router.post("/create")
    def create() -> dict[str, int]:
        with lock:
            env_id = next(ids)
            envs[env_id] = {"task": None, "value": 0, "done": False}
        return {"id": env_id}

    @router.post("/reset")
    def reset(body: dict[str, Any] = Body(...)) -> dict[str, Any]:
        env = envs.get(body.get("id"))
        if env is None:
            return {"error": f"unknown id {body.get('id')}"}
        task = int(body[reset_field])
        env.update(task=task, value=0, done=False)
        with lock:
            resets.append([body["id"], task])
        return {"observation": f"Task {task}: value 0.", "reward": 0.0, "done": False}

    @router.post("/step")
    def step(body: dict[str, Any] = Body(...)) -> dict[str, Any]:
        env = envs.get(body.get("id"))
        if env is None:
            return {"error": f"unknown id {body.get('id')}"}
        if env["done"] or env["task"] is None:
            return {"error": "the episode is finished; reset first"}
        match = re.fullmatch(r"add (\d+)", str(body.get("action", "")).strip())
        if not match:
            return {"observation": "Nothing happens.", "reward": 0.0, "done": False}
        env["value"] += int(match.group(1))
        env["done"] = env["value"] >= env["task"]
        reward = 1.0 if env["value"] == env["task"] else 0.0
        return {"observation": f"value {env['value']}", "reward": reward, "done": env["done"]}

    @router.get("/observation")
    def observation(id: int) -> dict[str, Any]:
        env = envs.get(id)
        return {"error": f"unknown id {id}"} if env is None else {"observation": f"value {env['value']}"}

    if with_close:

        @router.post("/close")
        def close(body: dict[str, Any] = Body(...)) -> Any:
            if envs.pop(body.get("id"), None) is None:
                return {"error": f"unknown id {body.get('id')}"}
            return True

    @router.get("/list_envs")
    def list_envs() -> list[int]:
        return sorted(envs)

    @router.get("/debug/resets")
    def debug_resets() -> list[list[int]]:
        return resets

    app = FastAPI()
    app.include_router(router)
    if prefix:
        app.add_api_route("/", health)
    return app


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--prefix", default="")
    parser.add_argument("--reset-field", default="data_idx")
    parser.add_argument("--no-close", action="store_true")
    args = parser.parse_args()
    uvicorn.run(
        build_app(args.prefix, args.reset_field, not args.no_close),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
    )
