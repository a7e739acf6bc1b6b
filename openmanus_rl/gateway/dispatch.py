"""`Dispatcher`: the one thread that talks to the generator; every other thread hands it requests.

``generate(prompt_ids, seed, route, meta)`` queues a request and returns a future of
``(response_ids, log_probs, finish_reason)`` as the engine returned them.  With a streaming
generator (``submit_generation`` / ``poll_generation`` / ``cancel_generation``, like the rollout
worker) the thread submits whatever is queued (one submit per distinct ``meta``: sampling
settings are per submit) and polls, resolving each future as its request finishes; the engine
batches what is running.  With only ``generate_sequences`` it takes everything queued and
generates it in one call per distinct ``meta``.  A generator error fails the futures it concerns;
`cancel_all` aborts what is in flight (their futures fail with `Cancelled`).
"""

from __future__ import annotations

import itertools
import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from openmanus_rl.agent.output import objects
from verl.protocol import DataProto

STREAMING = ("submit_generation", "poll_generation", "cancel_generation")
POLL_WAIT_S = 0.05  # longest engine wait per poll (a finished request ends it sooner)

Result = tuple[list[int], list[float], str]


class Cancelled(RuntimeError):
    """The request was aborted (`Dispatcher.cancel_all`)."""


@dataclass
class _Request:
    prompt_ids: list[int]
    seed: int
    route: int
    meta: dict[str, Any]
    future: Future = field(default_factory=Future)

    @property
    def group(self) -> str:
        return repr(sorted(self.meta.items()))


@dataclass
class _Control:
    kind: str  # "cancel" | "stop"
    done: threading.Event = field(default_factory=threading.Event)


class Dispatcher:
    def __init__(self, generator: Any) -> None:
        self.generator = generator
        self.streams = all(callable(getattr(generator, m, None)) for m in STREAMING)
        self._queue: queue.Queue = queue.Queue()
        self._ids = itertools.count()
        self._thread = threading.Thread(target=self._loop, name="gateway-engine", daemon=True)
        self._thread.start()

    def generate(self, prompt_ids: list[int], seed: int, route: int, meta: dict[str, Any]) -> Future:
        request = _Request(list(prompt_ids), seed, route, dict(meta))
        self._queue.put(request)
        return request.future

    def cancel_all(self) -> None:
        """Abort every queued and unfinished request; returns once they are failed."""
        self._control("cancel")

    def close(self) -> None:
        """Abort what is unfinished and stop the thread."""
        if self._thread.is_alive():
            self._control("stop")
            self._thread.join()

    def _control(self, kind: str) -> None:
        control = _Control(kind)
        self._queue.put(control)
        control.done.wait()

    # ------------------------------------------------------------------ the thread
    def _take(self, block: bool) -> list[Any]:
        items = []
        try:
            items.append(self._queue.get(block=block))
            while True:
                items.append(self._queue.get_nowait())
        except queue.Empty:
            pass
        return items

    def _loop(self) -> None:
        in_flight: dict[str, _Request] = {}
        while True:
            items = self._take(block=not in_flight)
            requests = [item for item in items if isinstance(item, _Request)]
            controls = [item for item in items if isinstance(item, _Control)]
            if controls:
                self._abort(requests, in_flight)
                for control in controls:
                    control.done.set()
                if any(c.kind == "stop" for c in controls):
                    return
                continue
            groups: dict[str, list[_Request]] = {}
            for request in requests:
                groups.setdefault(request.group, []).append(request)
            for group in groups.values():
                if self.streams:
                    self._submit(group, in_flight)
                else:
                    self._generate(group)
            if in_flight:
                self._poll(in_flight)

    def _batch(self, group: list[_Request]) -> DataProto:
        return DataProto.from_dict(
            non_tensors={
                "prompt_ids": objects([r.prompt_ids for r in group]),
                "seed": objects([r.seed for r in group]),
            },
            meta_info=dict(group[0].meta),
        )

    def _generate(self, group: list[_Request]) -> None:
        try:
            nt = self.generator.generate_sequences(self._batch(group)).non_tensor_batch
            rows = list(zip(nt["response_ids"], nt["response_log_probs"], nt["finish_reason"], strict=True))
            if len(rows) != len(group):
                raise RuntimeError(f"generator answered {len(rows)} rows for {len(group)} prompts")
        except Exception as exc:  # noqa: BLE001 - the engine's failure is each caller's
            for request in group:
                request.future.set_exception(exc)
            return
        for request, row in zip(group, rows):
            request.future.set_result(_result(*row))

    def _submit(self, group: list[_Request], in_flight: dict[str, _Request]) -> None:
        batch = self._batch(group)
        ids = [f"gw{next(self._ids)}" for _ in group]
        batch.non_tensor_batch["request_id"] = objects(ids)
        batch.non_tensor_batch["route"] = objects([r.route for r in group])
        try:
            self.generator.submit_generation(batch)
        except Exception as exc:  # noqa: BLE001
            for request in group:
                request.future.set_exception(exc)
            return
        in_flight.update(zip(ids, group))

    def _poll(self, in_flight: dict[str, _Request]) -> None:
        try:
            nt = self.generator.poll_generation(POLL_WAIT_S).non_tensor_batch
            rows = (
                list(
                    zip(
                        nt["request_id"], nt["response_ids"], nt["response_log_probs"], nt["finish_reason"], strict=True
                    )
                )
                if "request_id" in nt
                else []
            )
        except Exception as exc:  # noqa: BLE001 - a failed poll loses every unfinished request
            for request in in_flight.values():
                request.future.set_exception(exc)
            in_flight.clear()
            return
        for request_id, ids, log_probs, reason in rows:
            request = in_flight.pop(str(request_id), None)
            if request is not None:
                request.future.set_result(_result(ids, log_probs, reason))

    def _abort(self, queued: list[_Request], in_flight: dict[str, _Request]) -> None:
        if in_flight:
            try:
                self.generator.cancel_generation()
            except Exception:  # noqa: BLE001 - the requests are failed either way
                pass
        for request in [*queued, *in_flight.values()]:
            request.future.set_exception(Cancelled("the rollout ended before this call was answered"))
        in_flight.clear()


def _result(ids: Any, log_probs: Any, reason: Any) -> Result:
    return [int(x) for x in ids], [float(x) for x in log_probs], str(reason)
