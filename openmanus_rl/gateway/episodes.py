"""Agent programs and how their episodes run.

A program is ``program(task, base_url, api_key)``: ``task`` is the dataset row as plain Python
(``extra_info``, ``prompt``, ``data_source``, ``reward_model`` and any other column), ``base_url``
and ``api_key`` its episode's endpoint (``openai.OpenAI(base_url=..., api_key=...)``, or
``openai.AsyncOpenAI`` in an ``async def`` program).  It plays the episode however it likes and
returns (an ``async def`` program: its coroutine returns)

* a number: the episode's reward;
* ``{"reward": number, "info": {...}}``: the reward and facts to keep with the trajectory;
* None: the reward module ``algorithm.reward_score_fn`` names, or else the one registered for the
  row's ``data_source`` (`verl.utils.reward_score`), scores the content of the episode's last
  reply, as ``compute_score(data_source, final_text, reward_model["ground_truth"], extra_info)``.

`run_episodes` runs up to ``concurrency`` episodes at once, each on a daemon thread of its own, and
waits at most ``timeout_s`` for each: an episode that raises (or returns anything else) or is still
running then is failed, its error recorded.  A program's coroutine runs on an event loop of its
episode's thread (`ProgramCall`), under the same limits; at its deadline it is cancelled.  A
timed-out synchronous program's thread is left behind (Python cannot stop it) after
``on_timeout`` has closed its endpoint.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import threading
import time
from collections import deque
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from verl.utils.reward_score import get_reward_score_fn


@dataclass
class Outcome:
    """How an episode ended: its reward and who gave it (``"program"`` or a reward module), or its error."""

    reward: float = 0.0
    scored_by: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    timed_out: bool = False

    @property
    def failed(self) -> bool:
        return bool(self.error)


def plain(value: Any) -> Any:
    """A dataset value (numpy arrays and scalars from parquet) as plain Python."""
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def program_outcome(value: Any, score: Callable[[], tuple[str, float]]) -> Outcome:
    """The `Outcome` of a program's return value; ``score()`` gives ``(module name, reward)`` for None."""
    if value is None:
        name, reward = score()
        return Outcome(reward, name)
    if isinstance(value, Mapping):
        if "reward" not in value or not isinstance(value.get("info", {}), Mapping):
            raise TypeError(
                f"a program's dict must hold 'reward' and may hold an 'info' dict, got keys {sorted(value)}"
            )
        return Outcome(_number(value["reward"], "the returned reward"), "program", dict(value.get("info", {})))
    return Outcome(_number(value, "the returned reward"), "program")


class ProgramCall:
    """One episode's call of its program.  A synchronous program runs on the calling thread; an ``async
    def`` program's coroutine runs there on an event loop of its own, and `cancel` (from any thread)
    cancels it, whether it is running or not started yet."""

    def __init__(self, program: Callable[..., Any]) -> None:
        self.program = program
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._cancelled = False

    def __call__(self, *args: Any) -> Any:
        value = self.program(*args)
        if not inspect.isawaitable(value):
            return value
        return asyncio.run(self._await(value))

    async def _await(self, awaitable: Any) -> Any:
        with self._lock:
            if self._cancelled:
                if inspect.iscoroutine(awaitable):
                    awaitable.close()
                raise asyncio.CancelledError  # the deadline passed before it started: never run it
            self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
        return await awaitable

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._loop is not None and not self._loop.is_closed():
                try:
                    self._loop.call_soon_threadsafe(self._task.cancel)
                except RuntimeError:  # the program ended and its loop closed just now: nothing left to cancel
                    pass


def registry_score(reward_score_fn: str | None, task: Mapping[str, Any], final_text: str) -> tuple[str, float]:
    """Score ``final_text`` with the module ``reward_score_fn`` names, else the row's ``data_source``'s."""
    source = str(task.get("data_source"))
    name, fn = get_reward_score_fn(reward_score_fn, source)
    reward_model = task.get("reward_model") if isinstance(task.get("reward_model"), Mapping) else {}
    extra_info = task.get("extra_info") if isinstance(task.get("extra_info"), Mapping) else {}
    result = fn(source, final_text, reward_model.get("ground_truth"), dict(extra_info))
    score = result.get("score") if isinstance(result, Mapping) else result
    return name, _number(score, f"reward module {name!r}'s score")


def _start(job: Callable[[], Outcome]) -> Future:
    future: Future = Future()

    def target() -> None:
        try:
            future.set_result(job())
        except BaseException as exc:  # noqa: BLE001 - the episode's failure, recorded as its error
            future.set_exception(exc)

    threading.Thread(target=target, name="gateway-episode", daemon=True).start()
    return future


def run_episodes(
    jobs: list[Callable[[], Outcome]], concurrency: int, timeout_s: float, on_timeout: Callable[[int], None]
) -> list[Outcome]:
    """Each job's `Outcome`, in order (see the module docstring)."""
    outcomes: list[Outcome] = [Outcome() for _ in jobs]
    waiting = deque(range(len(jobs)))
    running: dict[Future, tuple[int, float]] = {}
    while waiting or running:
        while waiting and len(running) < concurrency:
            i = waiting.popleft()
            running[_start(jobs[i])] = (i, time.monotonic() + timeout_s)
        next_deadline = min(deadline for _, deadline in running.values())
        wait(running, timeout=max(0.0, next_deadline - time.monotonic()), return_when=FIRST_COMPLETED)
        now = time.monotonic()
        for future, (i, deadline) in list(running.items()):
            if future.done():
                exc = future.exception()
                outcomes[i] = future.result() if exc is None else Outcome(error=f"{type(exc).__name__}: {exc}")
            elif now >= deadline:
                on_timeout(i)
                outcomes[i] = Outcome(error=f"the episode timed out after {timeout_s:g} s", timed_out=True)
            else:
                continue
            del running[future]
    return outcomes
