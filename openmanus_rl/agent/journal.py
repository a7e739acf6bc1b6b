"""`RolloutJournal`: every model turn and every finished trajectory of a rollout, on disk as it happens.

A crash (the driver killed, a worker lost, the box rebooted) loses nothing a
rollout already did: a rollout given the same journal again (`OpenManusAgent.run_llm_loop`'s
``journal``) takes each finished trajectory from it whole and replays each
unfinished one's journaled turns into a fresh env, so no model turn is sampled
twice. File layout (JSONL, one object a line, each written, flushed and
``fsync``-ed before the rollout goes on)::

    {"journal": 1, "key": {...}}                                  the header: what the records belong to
    {"turn": ID, "n": k, "context": SHA, "ids": [...], "log_probs": [...], "reason": "stop"}
    {"finished": ID, "state": {...}}                              a `Trajectory`'s fields (no env client)

``ID`` names a trajectory whatever its place in a batch: ``data_source|task|copy|seed`` (the seed
comes from (run seed, step, task, copy), `verl.utils.seeding.trajectory_seed`, so a task drawn twice
in one step, by a refill round, is the same trajectory twice). ``context`` is
the SHA-256 of the token ids the turn was sampled from: a replayed turn is used only when the
trajectory's context equals it, so a reply is never attached to a context it was not sampled from
(an env that answered differently this time makes the rest of that episode sampled live).
Failed trajectories are not journaled as finished: a resumed rollout plays them again (their
journaled turns replayed), since their failure may have been the crash itself.

Opening a journal whose header holds another key (another policy, config or step) sets the file
aside as ``NAME.stale`` with one printed line naming the differing fields; its records are never
mixed in. A last line torn by a crash mid-write is detected (no newline, or not JSON) and cut off.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from .trajectory import Segment, Trajectory

VERSION = 1


def trajectory_id(t: Trajectory) -> str:
    """A trajectory's name in a journal: ``data_source|task|copy|seed``."""
    return f"{t.data_source}|{t.task_id}|{t.copy}|{t.seed}"


def context_digest(ids: Sequence[int]) -> str:
    """SHA-256 of a token id sequence (the context a turn was sampled from)."""
    return hashlib.sha256(json.dumps([int(i) for i in ids]).encode()).hexdigest()


def trajectory_state(t: Trajectory) -> dict[str, Any]:
    """Every field of a finished trajectory but its env client, as JSON-ready values."""
    state = {f.name: getattr(t, f.name) for f in dataclasses.fields(t) if f.name != "client"}
    state["segments"] = [dataclasses.asdict(s) for s in t.segments]
    state["turn_spans"] = [list(span) for span in t.turn_spans]
    return state


def trajectory_from_state(state: Mapping[str, Any]) -> Trajectory:
    """The `Trajectory` `trajectory_state` wrote."""
    fields = dict(state)
    fields["segments"] = [Segment(**s) for s in fields.get("segments", [])]
    fields["turn_spans"] = [tuple(span) for span in fields.get("turn_spans", [])]
    return Trajectory(**fields)


def _differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


class RolloutJournal:
    """An append-only journal at ``path`` for the records of one rollout identified by ``key`` (any JSON object:
    the policy version, the config that shapes sampling, the step).

    Opening reads what an earlier run with the same key left (`finished`, `turns`), drops a torn last line,
    and sets a journal of another key aside. Writes are serialised by a lock; each is durable before it
    returns.
    """

    def __init__(self, path: str | os.PathLike[str], key: Mapping[str, Any]) -> None:
        self.path = Path(path)
        self.key = json.loads(json.dumps(dict(key)))  # as it reads back: tuples become lists
        self.finished: dict[str, Trajectory] = {}
        self.turns: dict[str, list[dict[str, Any]]] = {}
        self.torn = False
        self.set_aside: Path | None = None
        self.bytes_written = 0
        self.write_s = 0.0
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._open()

    # ------------------------------------------------------------------ reading
    def _open(self) -> None:
        good = self._read() if self.path.is_file() else 0
        if self.set_aside is None and self.path.is_file():
            with open(self.path, "r+b") as f:  # cut a torn tail so appends start on a line of their own
                f.truncate(good)
        if not self.path.is_file() or good == 0:
            self.finished.clear()
            self.turns.clear()
            with open(self.path, "wb") as f:
                self._write_line(f, {"journal": VERSION, "key": self.key})

    def _read(self) -> int:
        """Load the records; returns the byte length of the good lines (0 when the file must start over)."""
        data = self.path.read_bytes()
        lines, good, end = data.split(b"\n"), 0, 0
        for i, raw in enumerate(lines[:-1]):  # the piece after the last newline is torn or empty
            end += len(raw) + 1
            try:
                record = json.loads(raw)
            except ValueError:
                self.torn = True
                break
            if i == 0:
                if record.get("journal") != VERSION or record.get("key") != self.key:
                    self._set_aside(record.get("key") if isinstance(record.get("key"), dict) else {})
                    return 0
            elif "turn" in record:
                self.turns.setdefault(record["turn"], []).append(record)
            elif "finished" in record:
                self.finished[record["finished"]] = trajectory_from_state(record["state"])
            good = end
        self.torn = self.torn or bool(lines[-1])
        return good

    def _set_aside(self, other: Mapping[str, Any]) -> None:
        self.set_aside = self.path.with_name(self.path.name + ".stale")
        os.replace(self.path, self.set_aside)
        print(
            f"[journal] {self.path} was written for another rollout (differs in: "
            f"{', '.join(_differences(other, self.key)) or 'format'}): set aside as {self.set_aside.name}",
            flush=True,
        )

    def restored(self, t: Trajectory) -> Trajectory | None:
        """The journaled finished trajectory with ``t``'s id, placed at ``t``'s row (None: not finished)."""
        done = self.finished.get(trajectory_id(t))
        if done is None:
            return None
        return dataclasses.replace(done, row=t.row, uid=t.uid, env=t.env)

    def replayed_turn(self, t: Trajectory, context: Sequence[int]) -> tuple[list[int], list[float], str] | None:
        """The journaled reply of ``t``'s next turn when it was sampled from exactly ``context``; else None."""
        records = self.turns.get(trajectory_id(t), [])
        n = t.num_turns
        if n >= len(records) or records[n]["n"] != n or records[n]["context"] != context_digest(context):
            return None
        record = records[n]
        return list(record["ids"]), list(record["log_probs"]), str(record["reason"])

    def journaled_turns(self, t: Trajectory) -> int:
        """How many turns of ``t`` the journal holds."""
        return len(self.turns.get(trajectory_id(t), []))

    # ------------------------------------------------------------------ writing
    def _write_line(self, f: Any, record: Mapping[str, Any]) -> None:
        line = (json.dumps(record) + "\n").encode()
        f.write(line)
        f.flush()
        os.fsync(f.fileno())
        self.bytes_written += len(line)

    def _append(self, record: Mapping[str, Any]) -> None:
        start = time.perf_counter()
        with self._lock, open(self.path, "ab") as f:
            self._write_line(f, record)
            self.write_s += time.perf_counter() - start

    def add_turn(self, t: Trajectory, context: Sequence[int], ids: list[int], log_probs: list[float], reason: str):
        """Journal ``t``'s turn ``t.num_turns`` (call before it is added to ``t``), sampled from ``context``."""
        tid = trajectory_id(t)
        record = {
            "turn": tid,
            "n": t.num_turns,
            "context": context_digest(context),
            "ids": [int(i) for i in ids],
            "log_probs": [float(x) for x in log_probs],
            "reason": reason,
        }
        self._append(record)
        turns = self.turns.setdefault(tid, [])
        del turns[t.num_turns :]  # a diverged replay's later records are replaced by the live ones
        turns.append(record)

    def add_finished(self, t: Trajectory) -> None:
        """Journal a finished, not failed, trajectory."""
        tid = trajectory_id(t)
        self._append({"finished": tid, "state": trajectory_state(t)})
        self.finished[tid] = t

    def remove(self) -> None:
        """Delete the file (its rollout is complete and saved elsewhere)."""
        self.path.unlink(missing_ok=True)


class JournalReplay:
    """One rollout's use of its journal: what it restores and replays, and what it writes. Without a journal
    every method does nothing (and `reply` answers None), so the rollout runs as if there were none.

    ``specs``: each env's `EnvSpec` (an env whose ``replays`` is False starts its unfinished episodes over);
    ``history_window``: the agent's, which shapes a turn's context (`Trajectory.context`).
    """

    def __init__(self, journal: RolloutJournal | None, specs: Mapping[str, Any], history_window: int) -> None:
        self.journal = journal
        self.specs = specs
        self.history_window = history_window
        self.restored_count = 0
        self.replayed: set[tuple[str, int]] = set()
        self.diverged: set[str] = set()
        self.restarted: set[str] = set()
        self.written: set[str] = set()

    def restored(self, t: Trajectory) -> Trajectory:
        """The journal's finished copy of ``t`` if it holds one, else ``t``."""
        done = self.journal.restored(t) if self.journal is not None else None
        if done is None:
            return t
        self.restored_count += 1
        return done

    def reply(self, t: Trajectory) -> tuple[list[int], list[float], str] | None:
        """``t``'s next turn from the journal (ids, log-probs, finish reason), or None: sample it."""
        if self.journal is None:
            return None
        if not self.specs[t.env_name].replays:  # its env cannot be brought back: start over
            if t.num_turns == 0 and self.journal.journaled_turns(t):
                self.restarted.add(trajectory_id(t))
            return None
        output = self.journal.replayed_turn(t, t.context(self.history_window))
        if output is None:
            if self.journal.journaled_turns(t) > t.num_turns:
                self.diverged.add(trajectory_id(t))
            return None
        self.replayed.add((trajectory_id(t), t.num_turns))
        return output

    def record_turn(self, t: Trajectory, output: tuple[list[int], list[float], str]) -> None:
        """Journal a sampled turn of ``t`` (before it is added to ``t``); a replayed one is there already."""
        if self.journal is not None and (trajectory_id(t), t.num_turns) not in self.replayed:
            self.journal.add_turn(t, t.context(self.history_window), *output)

    def record_finished(self, trajectories: Sequence[Trajectory]) -> None:
        """Journal each of ``trajectories`` that has finished without failing, once."""
        if self.journal is None:
            return
        for t in trajectories:
            tid = trajectory_id(t)
            if not t.running and not t.failed and tid not in self.written:
                self.journal.add_finished(t)
                self.written.add(tid)

    def metrics(self) -> dict[str, float]:
        """``journal/restored`` (finished trajectories taken whole), ``journal/replayed_turns`` (model turns not
        sampled again), ``journal/diverged`` (replays cut short: the context differed), ``journal/restarted``
        (unfinished episodes of an env that does not replay, played from the start), ``journal/write_s`` and
        ``journal/kib`` (what journaling cost so far)."""
        journal = self.journal
        return {
            "journal/restored": float(self.restored_count),
            "journal/replayed_turns": float(len(self.replayed)),
            "journal/diverged": float(len(self.diverged)),
            "journal/restarted": float(len(self.restarted)),
            "journal/write_s": journal.write_s if journal is not None else 0.0,
            "journal/kib": journal.bytes_written / 1024 if journal is not None else 0.0,
        }
