"""The open envs of one AgentGym server: `EnvRegistry`, and the errors an env call answers with.

Contract
--------
* ``EnvRegistry`` holds the live envs of one server process.  Ids count up
  from 0 under a lock and are never reused, so two ``/create`` calls never
  share an env.  Past ``max_envs`` live envs, ``create`` raises
  ``EnvCapacityError`` (HTTP 503).  ``use(id)`` yields the env while holding
  that env's own lock, so concurrent calls on one env run one at a time while
  calls on different envs run in parallel.
* Idle envs expire: with ``idle_timeout_s`` > 0 (the servers' ``--idle-timeout-s``,
  default 600 s; 0 = never), an env that has had no request for that long is
  closed and its resources freed (a SciWorld JVM, an ALFWorld engine), so clients
  that die without ``/close`` cannot fill the cap for good.  Reaping happens in
  three places: a sweep thread every ``min(idle_timeout_s / 2, 30)`` seconds
  while the server runs (`registries_lifespan`), a ``/create`` at the cap (it
  reaps before refusing), and a request naming an env that is past its timeout
  (reaped, then refused).  A request naming a reaped env answers 410
  ``{"error": "<id field> 3 expired after 600 s idle and was closed; create a new
  env with POST /create"}`` (the most recent 65,536 reaped ids are remembered;
  older ones answer the 404 of an unknown id).
* A full server makes room: at the cap, a ``/create`` evicts the env idle longest once it
  has been idle ``evict_idle_s`` (the servers' ``--evict-idle-s``, default 120 s; 0 =
  never), logged, and a later request naming it answers 410 saying so. A 503 that remains
  carries a ``Retry-After`` header and the cap's state in its body (`EnvRegistry._cap_state`).
  Evicted envs count in ``reaped``.
* Errors: every `EnvError` carries the HTTP status the server answers it with
  (`agentgym.server`): unknown id 404, an episode that is finished or not started
  409, an env reaped for idleness 410, a request that fails validation 422, the
  env cap 503.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections import OrderedDict
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, AsyncContextManager, AsyncIterator, Callable, Generic, Iterator, TypeVar

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger(__name__)

E = TypeVar("E")

DEFAULT_IDLE_TIMEOUT_S = 600.0
DEFAULT_EVICT_IDLE_S = 120.0  # longer than a live episode's env waits while its model writes a turn on a CPU
UNKNOWN_RETRY_AFTER_S = 5  # a full server whose envs are all in use cannot say when one frees
MAX_SWEEP_PERIOD_S = 30.0
EXPIRED_IDS_KEPT = 65536  # reaped ids that still answer 410 (older ones: the 404 of an unknown id)


class EnvError(Exception):
    """An error answered to the client with ``status_code``: the body ``{"error": message, **details}``, with
    ``headers``."""

    status_code = 400

    def __init__(self, message: str, details: dict[str, Any] | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.details = details or {}
        self.headers = headers or {}


class UnknownEnvError(EnvError):
    status_code = 404


class EpisodeStateError(EnvError):
    """The episode is finished (or not started) and cannot take this call."""

    status_code = 409


class EnvExpiredError(EnvError):
    """The env had no request for the server's idle timeout, or was evicted to make room at the cap, and was closed."""

    status_code = 410


class InvalidRequestError(EnvError):
    status_code = 422


class EnvCapacityError(EnvError):
    status_code = 503


class _Slot(Generic[E]):
    """One open env: the env, its lock, when its last call ended and how many calls hold or wait for it."""

    __slots__ = ("env", "lock", "last_used", "users")

    def __init__(self, env: E) -> None:
        self.env = env
        self.lock = threading.Lock()
        self.last_used = time.monotonic()
        self.users = 0


class EnvRegistry(Generic[E]):
    """Thread-safe map of env id -> env, with a cap on live envs and an idle timeout.

    ``factory`` builds a new env; if the env has a ``close()`` method it is
    called when the env is closed (by ``/close``, by reaping, at shutdown).
    ``idle_timeout_s`` > 0: an env with no call for that long expires (see the
    module docstring); 0: envs live until closed.  Every env call (`create`,
    `use`, `close`) counts as in flight while it runs, for `health`.
    """

    def __init__(
        self,
        factory: Callable[[], E],
        max_envs: int,
        id_name: str = "env",
        idle_timeout_s: float = 0.0,
        evict_idle_s: float = 0.0,
    ) -> None:
        if max_envs < 1:
            raise ValueError("max_envs must be at least 1")
        if idle_timeout_s < 0:
            raise ValueError(f"idle_timeout_s must be >= 0 (0: never), got {idle_timeout_s}")
        if evict_idle_s < 0:
            raise ValueError(f"evict_idle_s must be >= 0 (0: never), got {evict_idle_s}")
        self._factory = factory
        self.max_envs = max_envs
        self.idle_timeout_s = idle_timeout_s
        self.evict_idle_s = evict_idle_s
        self._id_name = id_name
        self._slots: dict[int, _Slot[E]] = {}
        self._expired: OrderedDict[int, str] = OrderedDict()  # reaped id -> the 410's message
        self.reaped = 0
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._calls: dict[int, float] = {}  # in-flight env calls: token -> start (monotonic)
        self._tokens = itertools.count()
        self._hung = threading.Event()

    # ------------------------------------------------------------------ env calls
    def create(self) -> int:
        """A new env's id. At the cap, expired envs are reaped first, then the env idle longest is evicted if it
        has been idle ``evict_idle_s`` (> 0) or more; else `EnvCapacityError`, with the cap's state
        (`_cap_state`) in its body and a ``Retry-After`` header."""
        with self._in_flight():
            with self._lock:
                expired = self._pop_expired() if len(self._slots) >= self.max_envs else []
                if len(self._slots) >= self.max_envs:
                    evicted = self._pop_idlest()
                    if evicted is None:
                        state = self._cap_state()
                        raise EnvCapacityError(
                            f"env cap reached: {len(self._slots)} of {self.max_envs} envs are open; "
                            "close some with POST /close or start the server with a larger --max-envs",
                            state,
                            {"Retry-After": str(state["retry_after_s"])},
                        )
                    expired.append(evicted)
                env_id = next(self._ids)
                # Reserve the id before building so the cap holds under concurrency.
                self._slots[env_id] = slot = _Slot(None)  # type: ignore[arg-type]
                slot.users = 1  # cannot expire while it is being built
                slot.lock.acquire()
            self._close_reaped(expired)  # free their resources before building another env
            try:
                slot.env = self._factory()
            except BaseException:
                with self._lock:
                    del self._slots[env_id]
                raise
            finally:
                with self._lock:
                    slot.users, slot.last_used = 0, time.monotonic()
                slot.lock.release()
        log.debug("env created", extra={"env_id": env_id, "live": len(self)})
        return env_id

    @contextmanager
    def use(self, env_id: int) -> Iterator[E]:
        """Yield env ``env_id`` holding its lock; `UnknownEnvError` if absent, `EnvExpiredError` if reaped."""
        with self._in_flight():
            slot = self._claim(env_id)
            try:
                with slot.lock:
                    with self._lock:
                        if self._slots.get(env_id) is not slot:  # closed while we waited
                            raise UnknownEnvError(f"unknown {self._id_name} {env_id}: it was closed")
                    yield slot.env
            finally:
                with self._lock:
                    slot.users -= 1
                    slot.last_used = time.monotonic()

    def close(self, env_id: int) -> None:
        """Close env ``env_id`` once any call on it has finished; `UnknownEnvError` / `EnvExpiredError` if gone."""
        with self._in_flight():
            with self._lock:
                slot = self._slots.pop(env_id, None)
                if slot is None:
                    raise self._gone(env_id)
            self._close_slot(slot)
        log.debug("env closed", extra={"env_id": env_id, "live": len(self)})

    def _claim(self, env_id: int) -> _Slot[E]:
        """The slot of ``env_id``, counted as used (so it cannot expire) until the caller gives it back."""
        with self._lock:
            slot = self._slots.get(env_id)
            if slot is None:
                raise self._gone(env_id)
            if not self._is_expired(slot, time.monotonic()):
                slot.users += 1
                return slot
            self._forget_expired(env_id)  # past its timeout, not yet swept: reaped now
            error = self._gone(env_id)
        self._close_reaped([slot])
        raise error

    def _gone(self, env_id: int) -> EnvError:
        """The error for a call naming an env that is not open (call with the lock held)."""
        if env_id in self._expired:
            return EnvExpiredError(self._expired[env_id])
        return UnknownEnvError(f"unknown {self._id_name} {env_id}: create one with POST /create")

    # ------------------------------------------------------------------ idle reaping
    def _is_expired(self, slot: _Slot[E], now: float) -> bool:
        return self.idle_timeout_s > 0 and slot.users == 0 and now - slot.last_used >= self.idle_timeout_s

    def _forget_expired(self, env_id: int, why: str = "") -> None:
        """Drop expired env ``env_id`` from the open envs and remember it as reaped, with the message a later
        request naming it gets (lock held; the idle timeout's by default)."""
        del self._slots[env_id]
        self._expired[env_id] = why or (
            f"{self._id_name} {env_id} expired after {self.idle_timeout_s:g} s idle and was "
            "closed; create a new env with POST /create"
        )
        if len(self._expired) > EXPIRED_IDS_KEPT:
            self._expired.popitem(last=False)
        self.reaped += 1

    def _pop_expired(self) -> list[_Slot[E]]:
        """Take every expired env out of the open envs (lock held); the caller closes them with `_close_reaped`."""
        now = time.monotonic()
        expired = [(env_id, slot) for env_id, slot in self._slots.items() if self._is_expired(slot, now)]
        for env_id, _ in expired:
            self._forget_expired(env_id)
        return [slot for _, slot in expired]

    def _idle(self, now: float) -> list[tuple[float, int]]:
        """``(seconds idle, id)`` of every built env no call holds, idlest first (lock held)."""
        idle = [(now - s.last_used, i) for i, s in self._slots.items() if s.users == 0 and s.env is not None]
        return sorted(idle, reverse=True)

    def _pop_idlest(self) -> _Slot[E] | None:
        """At the cap: take out the env idle longest if it has been idle ``evict_idle_s`` (> 0) or more, logged and
        remembered like an expired one (a later request naming it answers 410); None if none may go (lock held)."""
        idle = self._idle(time.monotonic())
        if self.evict_idle_s <= 0 or not idle or idle[0][0] < self.evict_idle_s:
            return None
        seconds, env_id = idle[0]
        slot = self._slots[env_id]
        self._forget_expired(
            env_id,
            f"{self._id_name} {env_id} was closed after {seconds:.0f} s idle to make room for a new env at the cap "
            f"of {self.max_envs} (--evict-idle-s {self.evict_idle_s:g}); create a new env with POST /create",
        )
        log.info("idle env evicted at the cap", extra={"env_id": env_id, "idle_s": round(seconds, 1)})
        return slot

    def _cap_state(self) -> dict[str, Any]:
        """What a 503 at the cap says (lock held): ``open``, ``max_envs``, ``idle_envs`` (no call holds them),
        ``longest_idle_s``, ``evict_idle_s`` and ``retry_after_s``, in whole seconds (>= 1): until the idlest env
        may be evicted (or, without eviction, expires), else `UNKNOWN_RETRY_AFTER_S`."""
        idle = self._idle(time.monotonic())
        longest = idle[0][0] if idle else 0.0
        limit = self.evict_idle_s or self.idle_timeout_s
        retry = max(1, math.ceil(limit - longest)) if idle and limit > 0 else UNKNOWN_RETRY_AFTER_S
        state = {
            "open": len(self._slots),
            "max_envs": self.max_envs,
            "idle_envs": len(idle),
            "longest_idle_s": round(longest, 1),
            "evict_idle_s": self.evict_idle_s,
            "retry_after_s": retry,
        }
        return state

    def _close_reaped(self, slots: list[_Slot[E]]) -> None:
        for slot in slots:
            try:
                self._close_slot(slot)
            except Exception:  # a reaped env that fails to close must not fail the request that reaped it
                log.exception("closing an expired env failed")
        if slots:
            log.info(
                "expired envs closed",
                extra={"reaped": len(slots), "idle_timeout_s": self.idle_timeout_s, "live": len(self)},
            )

    def reap_expired(self) -> int:
        """Close every env idle for ``idle_timeout_s`` or longer; returns how many."""
        with self._lock:
            expired = self._pop_expired()
        self._close_reaped(expired)
        return len(expired)

    @property
    def sweep_period_s(self) -> float:
        """How often the server's sweep thread reaps: half the idle timeout, at most 30 s."""
        return min(self.idle_timeout_s / 2, MAX_SWEEP_PERIOD_S)

    def sweep(self, stop: threading.Event) -> None:
        """Reap expired envs every `sweep_period_s` until ``stop`` is set (the server's sweep thread)."""
        while not stop.wait(self.sweep_period_s):
            self.reap_expired()

    # ------------------------------------------------------------------ health
    @contextmanager
    def _in_flight(self) -> Iterator[None]:
        token = next(self._tokens)
        with self._lock:
            self._calls[token] = time.monotonic()
        try:
            if self._hung.is_set():
                threading.Event().wait()  # the injected fault: this call never returns
            yield
        finally:
            with self._lock:
                del self._calls[token]

    def inject_hang(self) -> None:
        """Test-only fault (``POST /debug/hang``): from now on every env call blocks forever."""
        self._hung.set()

    def health(self) -> dict[str, Any]:
        """``open`` envs, the cap ``max_envs``, envs ``reaped`` so far, ``idle_timeout_s``, env calls
        ``in_flight`` and ``oldest_request_s``, how long the oldest of them has run (0.0 when none)."""
        now = time.monotonic()
        with self._lock:
            oldest = now - min(self._calls.values()) if self._calls else 0.0
            return {
                "open": len(self._slots),
                "max_envs": self.max_envs,
                "reaped": self.reaped,
                "idle_timeout_s": self.idle_timeout_s,
                "in_flight": len(self._calls),
                "oldest_request_s": round(oldest, 3),
            }

    # ------------------------------------------------------------------ the rest
    def _close_slot(self, slot: _Slot[E]) -> None:
        with slot.lock:  # let an in-flight call on this env finish first
            closer = getattr(slot.env, "close", None)
            if callable(closer):
                closer()
            slot.env = None  # type: ignore[assignment]

    def ids(self) -> list[int]:
        with self._lock:
            return sorted(self._slots)

    def close_all(self) -> None:
        """Close every open env (the server is shutting down: envs with processes of their own end them)."""
        for env_id in self.ids():
            try:
                self.close(env_id)
            except (UnknownEnvError, EnvExpiredError):
                pass  # closed meanwhile

    def __len__(self) -> int:
        with self._lock:
            return len(self._slots)


def registries_lifespan(*registries: EnvRegistry[Any]) -> Callable[[FastAPI], AsyncContextManager[None]]:
    """The lifespan of an app serving ``registries``: one sweep thread per registry with an idle timeout while
    the server runs; at shutdown the sweeps stop and every open env is closed."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        stop = threading.Event()
        sweeps = [
            threading.Thread(target=r.sweep, args=(stop,), name="idle-sweep", daemon=True)
            for r in registries
            if r.idle_timeout_s > 0
        ]
        for thread in sweeps:
            thread.start()
        yield
        stop.set()
        for thread in sweeps:
            thread.join()
        for registry in registries:
            registry.close_all()

    return lifespan
