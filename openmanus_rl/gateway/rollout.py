"""`GatewayRollout`: agent programs play the episodes, against the gateway, as the trainer's rollout.

``run_llm_loop(tasks)``: every row is played ``n`` times (one group, one ``uid``), each episode by
``config.program`` (`episodes`; a plain or an ``async def`` function) against a session of its own on the process's
`Gateway` (base URL ``.../sessions/<id>/v1`` and an API key), at most ``concurrency`` at once, each for at
most ``episode_timeout_s``.  Episode ``copy`` of task ``t`` at step ``s`` seeds its ``k``-th call with
`call_seed` of ``"seed:s:t:k"`` (``t``: the row's ``extra_info["index"]``, else its position).
With ``do_sample`` False every call is greedy.  When every episode has ended (or timed out), its
session is closed and forgotten, anything still in the engine is cancelled, and the samples are
packed (`output`).  With ``output_dir``, each episode's record goes to
``<output_dir>/rollouts/step_<step>.jsonl``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from functools import partial
from typing import Any

from openmanus_rl.records import step_path, write_jsonl
from verl.protocol import DataProto

from .config import GatewayConfig, load_program
from .episodes import Outcome, ProgramCall, plain, program_outcome, registry_score, run_episodes
from .output import Episode, build_batch, episode_record, rollout_metrics
from .render import ChatRenderer
from .server import Gateway
from .session import Policy, Session


def task_key(task: Mapping[str, Any], row: int) -> Any:
    """A task's id: its ``extra_info["index"]``, else the row's position."""
    extra = task.get("extra_info")
    index = extra.get("index") if isinstance(extra, Mapping) else None
    return row if index is None else index


class GatewayRollout:
    """Rolls out tasks with ``config.program`` through the shared `Gateway`; ``generator`` is the engine
    (see `Dispatcher`).  Call `close` when done (the last user of the gateway stops it)."""

    def __init__(
        self,
        tokenizer: Any,
        generator: Any,
        config: GatewayConfig,
        reward_score_fn: str | None = None,
        model: str = "policy",
    ) -> None:
        config.validate()
        self.config, self.reward_score_fn, self.model = config, reward_score_fn, model
        self.program = load_program(config.program)
        self.renderer = ChatRenderer(tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.renderer.chat.eot_id
        self.gateway = Gateway.shared()
        self.dispatcher = self.gateway.dispatcher(generator)
        self._routes = itertools.count()
        self._closed = False

    def run_llm_loop(
        self, tasks: DataProto, do_sample: bool = True, global_step: int = 0, output_dir: str | None = None
    ) -> DataProto:
        start = time.perf_counter()
        cfg, nt = self.config, tasks.non_tensor_batch
        policy = Policy(self.renderer, self.dispatcher, cfg, do_sample, self.model)
        episodes = []
        for row in range(len(tasks)):
            task = {key: plain(values[row]) for key, values in nt.items()}
            key = task_key(task, row)
            uid = str(nt["uid"][row]) if "uid" in nt else f"step{global_step}-row{row}-task{key}"
            for copy in range(cfg.n):
                session_id, api_key = self.gateway.new_id()
                session = Session(
                    session_id, api_key, policy, f"{cfg.seed}:{global_step}:{key}:{copy}", next(self._routes)
                )
                episodes.append(Episode(row, copy, uid, key, task, session, self.gateway.add(session)))
        calls = [ProgramCall(self.program) for _ in episodes]

        def on_timeout(i: int) -> None:
            episodes[i].session.close()
            calls[i].cancel()

        try:
            outcomes = run_episodes(
                [partial(self._play, e, c) for e, c in zip(episodes, calls)],
                cfg.concurrency,
                cfg.episode_timeout_s,
                on_timeout=on_timeout,
            )
        finally:
            for e in episodes:
                self.gateway.remove(e.session)
            self.dispatcher.cancel_all()
        out = build_batch(episodes, outcomes, nt, self.pad_id, self.renderer.chat.eot_id)
        out.meta_info["metrics"] = {
            **rollout_metrics(episodes, outcomes, out),
            "timing_s/rollout_total": time.perf_counter() - start,
        }
        if output_dir is not None:
            write_jsonl(
                [episode_record(e, o, self.renderer, global_step) for e, o in zip(episodes, outcomes)],
                step_path(output_dir, global_step),
            )
        return out

    def _play(self, e: Episode, call: ProgramCall) -> Outcome:
        value = call(e.task, e.base_url, e.session.key)
        return program_outcome(value, lambda: registry_score(self.reward_score_fn, e.task, e.session.final_text))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.gateway.release()

    def __enter__(self) -> "GatewayRollout":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
