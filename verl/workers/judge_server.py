"""`JudgeServer`: an LLM judge the run serves itself: a vLLM engine behind an OpenAI-compatible chat endpoint.

It runs as a Ray actor on its own resources (`verl.trainer.ppo.judge.ServedJudge` starts, watches and
restarts it) or in-process. Routes (request checks and error objects as the gateway's:
`verl.utils.openai_api`, `verl.utils.http_server`):

* ``GET /health``: ``{"status": "ok", "model": NAME}``;
* ``GET /v1/models``: the one model;
* ``POST /v1/chat/completions``: one reply, never streamed. Messages are rendered with the model's
  chat template; ``temperature``, ``top_p``, ``max_tokens`` / ``max_completion_tokens``, ``stop`` and
  ``seed`` apply; ``logprobs: true`` with ``top_logprobs`` k (0-20) reports each generated token's
  log-prob and the k most likely tokens, as OpenAI does. Log-probs are those of the sampling
  distribution: at temperature 1 (with top_p 1), the model's own.

Requests that arrive while the engine is busy wait and are generated together in its next call.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
import uuid
from concurrent.futures import Future
from typing import Any

from fastapi import FastAPI, Request

from verl.utils.http_server import BackgroundServer, add_error_handlers, read_json_body
from verl.utils.openai_api import ApiError, ChatRequest, parse_chat_request
from verl.utils.quiet_logs import set_torch_threads
from verl.workers.rollout.base import GenerationOutput, SamplingParams

MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_TOP_LOGPROBS = 20
DEFAULT_MAX_TOKENS = 256


class JudgeServer:
    """The engine (``engine``: `verl.workers.config.RolloutConfig` keys over their defaults) and its HTTP server."""

    def __init__(
        self,
        model_path: str,
        engine: dict[str, Any] | None = None,
        device: str = "cpu",
        num_threads: int = 1,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str | None = None,
    ) -> None:
        from transformers import AutoTokenizer

        from verl.utils.typed_config import from_dict
        from verl.workers.config import RolloutConfig
        from verl.workers.rollout.vllm_rollout import VLLMRollout

        self.model_name = model_name or model_path
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.rollout_cfg = from_dict(
            RolloutConfig, {"name": "vllm", **(engine or {})}, "reward_model.judge.serve.engine"
        )
        self.num_threads = num_threads
        self.engine = VLLMRollout(model_path, self.rollout_cfg, device, 0, num_threads)
        self._queue: queue.Queue = queue.Queue()
        self._worker = threading.Thread(target=self._generate_loop, name="judge-engine", daemon=True)
        self._worker.start()
        self._http = BackgroundServer(self._app(), "judge-http", host, port)

    def url(self) -> str:
        """The OpenAI base URL (``.../v1``)."""
        return f"{self._http.url}/v1"

    def close(self) -> None:
        self._http.close()
        self._queue.put(None)
        self._worker.join()
        self.engine.shutdown()

    # ------------------------------------------------------------------ the engine thread
    def _generate_loop(self) -> None:
        """Take every waiting request and generate them in one engine call, until `close`. OpenMP keeps its thread
        count per thread, and the CPU engine checks that this thread's is the one it was built with."""
        set_torch_threads(self.num_threads)
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)
                    break
                batch.append(item)
            try:
                outs = self.engine.generate([ids for ids, _, _ in batch], [params for _, params, _ in batch])
            except Exception as exc:  # noqa: BLE001 - every waiting caller gets the engine's error
                for _, _, future in batch:
                    future.set_exception(exc)
                continue
            for (_, _, future), out in zip(batch, outs):
                future.set_result(out)

    # ------------------------------------------------------------------ requests
    def _prompt_ids(self, request: ChatRequest) -> list[int]:
        messages = [
            {"role": "system" if m.role == "developer" else m.role, "content": m.text} for m in request.messages
        ]
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if len(ids) >= self.rollout_cfg.max_model_len:
            raise ApiError(
                400,
                f"the prompt is {len(ids)} tokens; this judge holds {self.rollout_cfg.max_model_len} (max_model_len)",
                "context_length_exceeded",
                "messages",
            )
        return ids

    def _sampling(self, request: ChatRequest, prompt_tokens: int) -> SamplingParams:
        extra = request.model_extra or {}
        top = extra.get("top_logprobs") or 0
        if not isinstance(top, int) or isinstance(top, bool) or not 0 <= top <= MAX_TOP_LOGPROBS:
            raise ApiError(
                400,
                f"top_logprobs must be an integer in [0, {MAX_TOP_LOGPROBS}], got {top!r}",
                "invalid_value",
                "top_logprobs",
            )
        if top and extra.get("logprobs") is not True:
            raise ApiError(400, "top_logprobs needs logprobs: true", "invalid_value", "logprobs")
        seed = extra.get("seed")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise ApiError(400, f"seed must be an integer, got {seed!r}", "invalid_value", "seed")
        room = self.rollout_cfg.max_model_len - prompt_tokens
        return SamplingParams(
            temperature=1.0 if request.temperature is None else request.temperature,
            top_p=1.0 if request.top_p is None else request.top_p,
            top_k=-1,  # the chat API has no top-k
            max_tokens=min(request.requested_max_tokens or DEFAULT_MAX_TOKENS, room),
            stop=request.stops,
            seed=seed,
            top_logprobs=top,
        )

    def _logprobs(self, out: GenerationOutput, top: int) -> dict[str, Any]:
        def entry(token: int, logprob: float) -> dict[str, Any]:
            text = self.tokenizer.decode([token])
            return {"token": text, "logprob": logprob, "bytes": list(text.encode())}

        content = []
        for token, logprob, candidates in zip(out.token_ids, out.log_probs, out.top_log_probs):
            ranked = sorted(candidates.items(), key=lambda kv: -kv[1])[:top]
            content.append({**entry(token, logprob), "top_logprobs": [entry(t, lp) for t, lp in ranked]})
        return {"content": content}

    def _app(self) -> FastAPI:
        app = FastAPI(title="openmanus-rl judge", docs_url=None, redoc_url=None, openapi_url=None)
        add_error_handlers(app)

        @app.get("/health")
        async def health() -> dict[str, str]:
            return {"status": "ok", "model": self.model_name}

        @app.get("/v1/models")
        async def models() -> dict[str, Any]:
            return {
                "object": "list",
                "data": [{"id": self.model_name, "object": "model", "created": 0, "owned_by": "openmanus-rl"}],
            }

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> dict[str, Any]:
            parsed = parse_chat_request(await read_json_body(request, MAX_BODY_BYTES))
            ids = self._prompt_ids(parsed)
            params = self._sampling(parsed, len(ids))
            future: Future = Future()
            self._queue.put((ids, params, future))
            try:
                out: GenerationOutput = await asyncio.wrap_future(future)
            except Exception as exc:
                raise ApiError(
                    500, f"the engine failed: {type(exc).__name__}: {exc}", "engine_error", type="server_error"
                ) from None
            text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            wants = (parsed.model_extra or {}).get("logprobs") is True
            top = (parsed.model_extra or {}).get("top_logprobs") or 0
            return {
                "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.model_name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": out.finish_reason,
                        "logprobs": self._logprobs(out, top) if wants else None,
                    }
                ],
                "usage": {
                    "prompt_tokens": len(ids),
                    "completion_tokens": len(out.token_ids),
                    "total_tokens": len(ids) + len(out.token_ids),
                },
            }

        return app
