"""`OpenManusAgent`: multi-turn rollouts of a batch of tasks against AgentGym env servers.

``run_llm_loop(gen_batch)``: every row names a task (``extra_info["index"]``)
and is rolled out ``n`` times (one GRPO group, same task, distinct seeds, one
``uid``).  Env calls (create/reset, step) run on a thread pool (only HTTP
runs there; all tokenisation stays on the calling thread).  A trajectory
ends when its env says done, at its turn cap (`AgentConfig.turn_cap`), when the token budget is
spent (see `AgentConfig`), or when its env fails (the episode is marked
failed and never scored).

Two rollout modes (``agent.rollout_mode``), same trajectories:

* ``async`` (with a generator that streams: ``submit_generation`` /
  ``poll_generation`` / ``cancel_generation``, as the rollout worker does):
  each trajectory's prompt is submitted as soon as it is ready, the engine
  batches whatever is running (continuous batching), each finished reply is
  parsed at once and its env step dispatched while generation goes on, and
  the observation's turn is submitted on the next loop.  No trajectory waits
  for another's turn.  ``timing_s/generation`` is the time spent in the
  engine, ``timing_s/env`` the time spent waiting for env calls with nothing
  to generate.
* ``sync`` (and any generator with only ``generate_sequences``): each turn,
  all unfinished trajectories are generated in one batched
  ``generate_sequences`` call, then their env steps run in parallel.

Both loops take a turn with the same steps: `_next_turn` (the first prompt, or the pending observation into
the sequence, or the end at the turn cap or the token budget), `_take_reply` (the model turn; an invalid one
queues its feedback) and `_step` (the env); the episode's own state changes are `Trajectory` methods.  They
differ only in when a turn is generated.

Seeds: copy ``c`` of task ``<data_source>:<task id>`` at step ``global_step`` gets
`trajectory_seed` ``(config.seed, global_step, task, c)`` (`task_keys`: a task's repeat within
the batch is ``task#1``...), whatever its place in the batch; turn ``t`` of it
is sampled with ``(seed + 1_000_003 * t) mod 2**31``, passed in the ``seed``
column to the generator.
"""

from __future__ import annotations

import json
import logging
import re
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from openmanus_rl.envs import EnvClientError, EnvPool, EnvSpec, RetryPolicy, get_env_spec
from openmanus_rl.records import step_path, write_jsonl, write_viewer
from openmanus_rl.rewards import RewardComposer
from verl.protocol import DataProto
from verl.utils.seeding import SEED_MOD, task_keys, trajectory_seed
from verl.utils.timing import PhaseTimer
from verl.utils.tracking import progress_bar

from .chat import ChatFormat
from .config import AgentConfig, _plain
from .journal import JournalReplay, RolloutJournal
from .output import build_batch, objects, rollout_metrics, score, trajectory_record
from .templates import ParsedAction, get_action_template
from .trajectory import Trajectory

log = logging.getLogger(__name__)

MIN_FIRST_OBSERVATION_TOKENS = 32


def first_user_text(instructions: str, observation: str) -> str:
    """The first user message: the env's instructions, then the first observation after an ``Observation:`` line."""
    return f"{instructions}\n\nObservation:\n{observation}"


TURN_SEED_STRIDE = 1_000_003
POLL_WAIT_S = 1.0  # longest engine wait per poll when no env call is out (a finished reply ends it sooner)
STREAMING = ("submit_generation", "poll_generation", "cancel_generation")


def turn_seed(seed: int, turn: int) -> int:
    return (seed + TURN_SEED_STRIDE * turn) % SEED_MOD


def task_id_of(extra_info: Any, row: int) -> int:
    """The env task id of a dataset row: ``extra_info["index"]`` (an int, or a name like ``webshop_12``)."""
    if isinstance(extra_info, str):
        extra_info = json.loads(extra_info)
    index = extra_info.get("index") if isinstance(extra_info, Mapping) else None
    if isinstance(index, str) and (match := re.search(r"(\d+)$", index)):
        index = int(match.group(1))
    if not isinstance(index, int) or isinstance(index, bool):
        raise ValueError(f"row {row}: extra_info must hold an int 'index' (the env task id), got {extra_info!r}")
    return index


class RolloutProgress:
    """The rollout's progress bar (trajectories finished / total; turns, generated tokens/s), shown
    only where the training step bar is (stderr is a terminal); `update` reads the trajectories.
    With ``every_s`` > 0 it also prints ``[rollout] k/n trajectories finished, S s (~T s left)`` that
    often (T: the time so far per finished trajectory, times those left), for a log to show where a
    long rollout is (an evaluation's window of 500 tasks)."""

    def __init__(self, trajectories: list[Trajectory], desc: str, every_s: float = 0.0) -> None:
        self.trajectories = trajectories
        self.bar = progress_bar(len(trajectories), desc=desc, unit="traj", leave=False)
        self.start = time.perf_counter()
        self.every_s = every_s
        self.printed = self.start

    def line(self, finished: int, now: float) -> str:
        """The progress line for ``finished`` trajectories at ``now`` (`time.perf_counter`)."""
        total, elapsed = len(self.trajectories), now - self.start
        left = f" (~{elapsed / finished * (total - finished):.0f} s left)" if finished else ""
        return f"[rollout] {finished}/{total} trajectories finished, {elapsed:.0f} s{left}"

    def update(self) -> None:
        now = time.perf_counter()
        due = self.every_s > 0 and now - self.printed >= self.every_s
        if self.bar is None and not due:
            return
        finished = sum(not t.running for t in self.trajectories)
        if due:
            self.printed = now
            print(self.line(finished, now), flush=True)
        if self.bar is None:
            return
        tokens = sum(t.model_tokens for t in self.trajectories)
        elapsed = max(now - self.start, 1e-9)
        self.bar.set_postfix(
            turns=sum(t.num_turns for t in self.trajectories), tok_s=f"{tokens / elapsed:.1f}", refresh=False
        )
        self.bar.update(finished - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@dataclass
class EnvSide:
    """One env of the agent: its spec, its reward composer, the instructions of its first prompt (and that
    prompt's tokens without an observation), the tools the chat template gets (None: none) and its pool of
    env clients."""

    spec: EnvSpec
    composer: RewardComposer
    instructions: str
    tools: list[dict[str, Any]] | None
    bare_prompt: list[int]
    pool: EnvPool
    max_turns: int  # the turn cap of this env's episodes (`AgentConfig.turn_cap`)


class OpenManusAgent:
    """Rolls out tasks of ``config.env_name`` with ``generator`` (anything with
    ``generate_sequences(DataProto) -> DataProto``: the ActorRolloutRef worker
    group, or an in-process worker; the async mode also needs its streaming
    methods) and returns training-ready `DataProto`s.
    With several envs (``env_name="babyai,webshop"``) each row goes to the env its ``data_source`` names;
    with one, every row goes to it.
    Call `close` (or use it as a context manager) to close the env clients."""

    def __init__(self, tokenizer: Any, generator: Any, config: AgentConfig | Mapping[str, Any]) -> None:
        self.config = config if isinstance(config, AgentConfig) else AgentConfig(**_plain(config))
        self.config.validate()
        cfg = self.config
        self.tokenizer = tokenizer
        self.generator = generator
        self.template = get_action_template(cfg.action_format)
        self.chat = ChatFormat(tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.chat.eot_id
        policy = RetryPolicy(cfg.request_timeout_s, cfg.env_retries, cfg.env_retry_backoff_s)
        self.envs: dict[str, EnvSide] = {}
        for name, urls in cfg.servers_by_env().items():
            spec = get_env_spec(name)
            format_text, tools = self.template.prompt(spec, self.chat.native_tools)
            instructions = f"{spec.instructions}\n\n{format_text}"
            bare_prompt = self.chat.prompt_ids(first_user_text(instructions, ""), tools)
            if len(bare_prompt) + MIN_FIRST_OBSERVATION_TOKENS > cfg.max_prompt_length:
                raise ValueError(
                    f"max_prompt_length {cfg.max_prompt_length} is too small: the {name} instructions "
                    f"alone take {len(bare_prompt)} tokens, and the first observation needs at least "
                    f"{MIN_FIRST_OBSERVATION_TOKENS}"
                )
            composer = RewardComposer.from_config(cfg.reward_components, name, [self.template.format_pattern])
            self.envs[name] = EnvSide(
                spec,
                composer,
                instructions,
                tools,
                bare_prompt,
                EnvPool(spec, urls, policy, cfg.env_cooldown_s),
                cfg.turn_cap(name),
            )
        self.specs = {name: side.spec for name, side in self.envs.items()}
        self._executor = ThreadPoolExecutor(cfg.concurrency, thread_name_prefix="env")
        self._start_errors_reported = 0
        self._rollouts = 0  # numbers each streamed rollout's request ids
        self._replay = JournalReplay(None, self.specs, self.config.history_window)  # the running rollout's journal

    # ------------------------------------------------------------------ public
    def run_llm_loop(
        self,
        gen_batch: DataProto,
        output_dir: str | None = None,
        global_step: int = 0,
        do_sample: bool = True,
        journal: RolloutJournal | None = None,
    ) -> DataProto:
        """Roll out every row ``n`` times; returns ``len(gen_batch) * n`` rows (see `output`) with
        ``meta_info["metrics"]``.  With ``output_dir``, also writes the step's JSONL records (and viewer page).

        With ``journal`` (`openmanus_rl.agent.journal`) every model turn and finished trajectory is written to
        it as it happens, and what it already holds is not played again: a finished trajectory is taken whole,
        an unfinished one's journaled turns are replayed into a fresh env (envs whose spec ``replays``) instead
        of being sampled. ``journal/*`` metrics count both."""
        start = time.perf_counter()
        trajectories = self._trajectories(gen_batch, global_step)
        replay = JournalReplay(journal, self.specs, self.config.history_window)
        trajectories = [replay.restored(t) for t in trajectories]
        live = [t for t in trajectories if t.running]
        progress = RolloutProgress(trajectories, f"rollout step {global_step}", self.config.progress_every_s)
        self._replay = replay
        try:
            if self.streams:
                timer = self._run_async(live, do_sample, progress)
            else:
                timer = self._run(live, do_sample, progress=progress)
            replay.record_finished(live)
        finally:
            progress.close()
            self._replay = JournalReplay(None, self.specs, self.config.history_window)
        out = self._finish(trajectories, timer, start, output_dir, global_step, gen_batch.non_tensor_batch)
        if journal is not None:
            out.meta_info["metrics"].update(replay.metrics())
        return out

    def _run_single_rollout(
        self, task_id: int, seed: int = 0, do_sample: bool = True, uid: str = "single", data_source: str | None = None
    ) -> DataProto:
        """One trajectory, generated with batch size 1 and stepped without threads: the debugging path."""
        start = time.perf_counter()
        trajectory = Trajectory(0, 0, uid, task_id, data_source or self.config.env_names[0], seed)
        trajectory.env = self._env_for(trajectory.data_source, 0)
        return self._finish([trajectory], self._run([trajectory], do_sample, parallel=False), start, None, 0)

    def open_journal(self, path: str, key: dict[str, Any]) -> RolloutJournal:
        """The journal at ``path`` for a rollout identified by ``key`` (`RolloutJournal`), for `run_llm_loop`."""
        return RolloutJournal(path, key)

    @property
    def streams(self) -> bool:
        """Whether rollouts run asynchronously: ``rollout_mode`` async and a generator that streams."""
        return self.config.rollout_mode == "async" and all(
            callable(getattr(self.generator, m, None)) for m in STREAMING
        )

    def close(self) -> None:
        """Close every env client (``POST /close``) and the thread pool."""
        self._executor.shutdown(wait=True)
        for side in self.envs.values():
            side.pool.close()

    def __enter__(self) -> "OpenManusAgent":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ set-up
    def _env_for(self, data_source: str, row: int) -> str:
        """The env that plays a row of ``data_source``: the only env, or the one of that name."""
        if len(self.envs) == 1:
            return next(iter(self.envs))
        if data_source not in self.envs:
            raise ValueError(
                f"row {row} has data_source {data_source!r}, which names none of the envs "
                f"{sorted(self.envs)} of agent.env_name"
            )
        return data_source

    def _trajectories(self, gen_batch: DataProto, global_step: int) -> list[Trajectory]:
        rows = len(gen_batch)
        nt = gen_batch.non_tensor_batch
        if "extra_info" not in nt:
            raise ValueError("gen_batch needs a non-tensor 'extra_info' column with the env task id in 'index'")
        uids = nt.get("uid")
        sources = nt.get("data_source")
        ids = [task_id_of(nt["extra_info"][row], row) for row in range(rows)]
        names = [str(sources[row]) if sources is not None else self.config.env_names[0] for row in range(rows)]
        keys = task_keys(f"{source}:{task_id}" for source, task_id in zip(names, ids))
        out = []
        for row, (task_id, source, key) in enumerate(zip(ids, names, keys)):
            uid = str(uids[row]) if uids is not None else f"step{global_step}-row{row}-task{task_id}"
            env = self._env_for(source, row)
            for copy in range(self.config.n):
                seed = trajectory_seed(self.config.seed, global_step, key, copy)
                out.append(Trajectory(row, copy, uid, task_id, source, seed, env=env))
        return out

    def _first_prompt(self, side: EnvSide, observation: str) -> tuple[list[int], int, bool]:
        """The first prompt's ids with the observation cut to fit;
        also the observation's tokens and whether it was cut."""
        cfg = self.config
        limit = min(cfg.max_obs_length, cfg.max_prompt_length - len(side.bare_prompt))
        while limit >= 0:
            obs_ids, cut = self.chat.truncate(observation, limit)
            ids = self.chat.prompt_ids(first_user_text(side.instructions, self.tokenizer.decode(obs_ids)), side.tools)
            if len(ids) <= cfg.max_prompt_length:
                return ids, len(obs_ids), cut
            limit -= len(ids) - cfg.max_prompt_length  # token boundaries moved when encoded in context
        raise RuntimeError(f"cannot fit the first observation into max_prompt_length={cfg.max_prompt_length}")

    # ------------------------------------------------------------------ the loop
    def _run(
        self,
        trajectories: list[Trajectory],
        do_sample: bool,
        parallel: bool = True,
        progress: RolloutProgress | None = None,
    ) -> PhaseTimer:
        """The turn-synchronous loop: every env is started, then each turn the running trajectories that take
        one (`_next_turn`) are generated in one batched call and their env steps run, until none does."""
        timer = PhaseTimer()

        def each(fn: Callable[[Any], None], items: list[Any]) -> None:
            if parallel:
                list(self._executor.map(fn, items))
            else:
                for item in items:
                    fn(item)

        try:
            with timer("env"):
                each(self._start, trajectories)
            active = trajectories
            while active := [t for t in active if t.running and self._next_turn(t)]:
                with timer("generation"):
                    outputs = self._generate(active, do_sample)
                actions = [(t, self._take_reply(t, output)) for t, output in zip(active, outputs)]
                with timer("env"):
                    each(self._step, [(t, action) for t, action in actions if action is not None])
                self._replay.record_finished(active)
                if progress is not None:
                    progress.update()
        finally:
            self._release_clients(trajectories)
        return timer

    def _release_clients(self, trajectories: list[Trajectory]) -> None:
        for t in trajectories:
            if t.client is not None:
                self.envs[t.env_name].pool.release(t.client)
                t.client = None

    def _run_async(self, trajectories: list[Trajectory], do_sample: bool, progress: RolloutProgress) -> PhaseTimer:
        """The asynchronous loop: trajectories (by index) move between three places, ``env`` (an env
        call out on the thread pool), ``ready`` (next prompt to build and submit on this thread) and
        ``in_flight`` (a request in the engine), until every one has finished.  With ``max_in_flight``
        = k > 0 at most k are in those places at once: a sliding window, where the next trajectory starts
        as soon as one finishes (and its env client goes back to the pool)."""
        timer = PhaseTimer()
        self._rollouts += 1
        window = self.config.max_in_flight or len(trajectories)
        waiting = list(range(len(trajectories)))[::-1]  # popped from the end: trajectories start in order
        env: dict[Future, int] = {}
        ready: list[int] = []
        in_flight: dict[str, int] = {}
        try:
            while waiting or env or ready or in_flight:
                while waiting and len(env) + len(ready) + len(in_flight) < window:
                    i = waiting.pop()
                    env[self._executor.submit(self._start, trajectories[i])] = i
                ready_again: list[int] = []
                ended = self._submit(trajectories, sorted(ready), in_flight, do_sample, env, ready_again)
                ready[:] = ready_again
                if in_flight:
                    with timer("generation"):
                        replies = self._poll(0.0 if env else POLL_WAIT_S)
                    for request_id, output in replies:
                        i = in_flight.pop(request_id)
                        action = self._take_reply(trajectories[i], output)
                        if action is None:
                            ready.append(i)
                        else:
                            env[self._executor.submit(self._step, (trajectories[i], action))] = i
                elif env:
                    with timer("env"):
                        wait(env, return_when=FIRST_COMPLETED)
                for future in [f for f in env if f.done()]:
                    i = env.pop(future)
                    future.result()  # an env call's own failures are handled in it; anything else is a bug
                    if trajectories[i].running:
                        ready.append(i)
                    else:
                        ended.append(i)
                self._release_clients([trajectories[i] for i in ended])
                self._replay.record_finished([trajectories[i] for i in ended])
                progress.update()
        finally:
            if in_flight:
                self.generator.cancel_generation()
            wait(env)  # no env call may outlive the rollout: its client is released next
            self._release_clients(trajectories)
        return timer

    def _submit(
        self,
        trajectories: list[Trajectory],
        ready: list[int],
        in_flight: dict[str, int],
        do_sample: bool,
        env: dict[Future, int],
        ready_again: list[int],
    ) -> list[int]:
        """Start the next turn of each ready trajectory that still takes one (see `_next_turn`): a journaled
        turn is replayed at once (its action stepped on ``env``, or, invalid, the trajectory put in
        ``ready_again``), the others are submitted to the engine; returns the trajectories that end here."""
        batch, ended = [], []
        for i in ready:
            (batch if self._next_turn(trajectories[i]) else ended).append(i)
        live = []
        for i in batch:  # a turn the journal holds is taken from it: its action goes to the env now
            t = trajectories[i]
            output = self._journaled_reply(t)
            if output is None:
                live.append(i)
                continue
            action = self._take_reply(t, output)
            if action is None:
                ready_again.append(i)
            else:
                env[self._executor.submit(self._step, (t, action))] = i
        batch = live
        if not batch:
            return ended
        active = [trajectories[i] for i in batch]
        ids = [f"{self._rollouts}:{i}:{trajectories[i].num_turns}" for i in batch]
        request = self._request(active, do_sample)
        request.non_tensor_batch["request_id"] = objects(ids)
        request.non_tensor_batch["route"] = objects(batch)  # one trajectory, one rank: its prefix cache is there
        self.generator.submit_generation(request)
        in_flight.update(zip(ids, batch))
        return ended

    def _next_turn(self, t: Trajectory) -> bool:
        """Main thread: the trajectory's next prompt (first prompt, or its pending observation appended);
        False when it ends here instead (turn limit, token budget)."""
        if t.num_turns == 0:
            self._build_prompt(t)
        elif t.num_turns >= self.envs[t.env_name].max_turns:
            t.end("turn_limit")
        else:
            self._append_observation(t)
        return t.running

    def _poll(self, max_wait_s: float) -> list[tuple[str, tuple[list[int], list[float], str]]]:
        reply = self.generator.poll_generation(max_wait_s).non_tensor_batch
        rows = zip(reply["request_id"], reply["response_ids"], reply["response_log_probs"], reply["finish_reason"])
        return [(str(rid), self._reply_row(ids, lps, reason)) for rid, ids, lps, reason in rows]

    def _take_reply(self, t: Trajectory, output: tuple[list[int], list[float], str]) -> str | None:
        """Record a model turn (in the journal too); returns the action to step, or None after an invalid one
        (its feedback is queued)."""
        self._replay.record_turn(t, output)
        parsed = self._take_model_turn(t, *output)
        if parsed.valid:
            return parsed.action
        t.reject(parsed.feedback or self.template.invalid_feedback(self.envs[t.env_name].spec))
        return None

    def _start(self, t: Trajectory) -> None:
        """Env thread: create/reset; the first observation waits in ``pending_observation``."""
        side = self.envs[t.env_name]
        try:
            t.start(*side.pool.start_episode(t.task_id))
        except EnvClientError as exc:
            t.prompt_ids = list(side.bare_prompt)
            self._fail(t, exc)

    def _build_prompt(self, t: Trajectory) -> None:
        """Main thread (the tokenizer is not shared between threads): the first prompt from the first observation."""
        t.set_first_prompt(*self._first_prompt(self.envs[t.env_name], t.pending_observation or ""))

    def _request(self, active: list[Trajectory], do_sample: bool) -> DataProto:
        """The generation request for each trajectory's next turn (its turn index picks the seed)."""
        cfg = self.config
        for t in active:
            t.open_window(cfg.history_window)
        return DataProto.from_dict(
            non_tensors={
                "prompt_ids": objects([t.context(cfg.history_window) for t in active]),
                "seed": objects([turn_seed(t.seed, t.num_turns) for t in active]),
            },
            meta_info={
                "temperature": cfg.temperature,
                "top_p": cfg.top_p,
                "top_k": cfg.top_k,
                "max_tokens": cfg.max_response_length,
                "stop_token_ids": [self.chat.eot_id],
                "do_sample": do_sample,
            },
        )

    def _journaled_reply(self, t: Trajectory) -> tuple[list[int], list[float], str] | None:
        """``t``'s next turn from the rollout's journal (None: sample it); a replayed turn's context window is
        recorded as `_request` records a sampled one's."""
        output = self._replay.reply(t)
        if output is not None:
            t.open_window(self.config.history_window)
        return output

    def _reply_row(self, ids: Any, log_probs: Any, reason: Any) -> tuple[list[int], list[float], str]:
        """One generated row, cut after its first end-of-turn token (nothing after it, no padding)."""
        row_ids, row_lps = [int(x) for x in ids], [float(x) for x in log_probs]
        if len(row_ids) > self.config.max_response_length:
            raise RuntimeError(
                f"generator returned {len(row_ids)} tokens, above max_tokens={self.config.max_response_length}"
            )
        if self.chat.eot_id in row_ids:
            end = row_ids.index(self.chat.eot_id) + 1
            row_ids, row_lps = row_ids[:end], row_lps[:end]
        return row_ids, row_lps, str(reason)

    def _generate(self, active: list[Trajectory], do_sample: bool) -> list[tuple[list[int], list[float], str]]:
        """Each trajectory's next reply: from the journal where it holds the turn, else from one batched call."""
        outputs = [self._journaled_reply(t) for t in active]
        sampled = [t for t, output in zip(active, outputs) if output is None]
        if not sampled:
            return outputs
        reply = self.generator.generate_sequences(self._request(sampled, do_sample)).non_tensor_batch
        ids, log_probs, reasons = reply["response_ids"], reply["response_log_probs"], reply["finish_reason"]
        if not len(ids) == len(log_probs) == len(reasons) == len(sampled):
            raise RuntimeError(f"generator answered {len(ids)} rows for {len(sampled)} prompts")
        rows = iter(self._reply_row(ids[i], log_probs[i], reasons[i]) for i in range(len(sampled)))
        return [output if output is not None else next(rows) for output in outputs]

    def _take_model_turn(self, t: Trajectory, ids: list[int], log_probs: list[float], reason: str) -> ParsedAction:
        text = self.chat.decode(ids)
        parsed = self.template.parse(text, self.envs[t.env_name].spec)
        t.add_reply(ids, log_probs, self.chat.eot_id, text, parsed, reason)
        return parsed

    def _step(self, item: tuple[Trajectory, str]) -> None:
        t, action = item
        assert t.client is not None
        try:
            result = t.client.step(action)
        except EnvClientError as exc:
            self._fail(t, exc)
            return
        t.add_step(result)

    def _append_observation(self, t: Trajectory) -> None:
        """Main thread: the pending observation into the sequence, cut to ``max_obs_length`` (the agent's own
        feedback is never cut); the trajectory ends "truncated" instead when that and a full reply would pass its
        token budget (`_fits`)."""
        cfg = self.config
        assert t.pending_observation is not None
        budget = cfg.trajectory_budget(t.env_name)
        limit = (
            budget - cfg.max_prompt_length if t.pending_feedback else cfg.max_obs_length
        )  # our own feedback is never cut
        obs_ids, cut = self.chat.truncate(t.pending_observation, limit)
        wrapped = self.chat.observation_turn_ids(obs_ids)
        if not self._fits(t, len(wrapped)):
            t.end("truncated")
            log.info(
                "trajectory %s/%d (task %d) stops at turn %d: token budget %d spent",
                t.uid,
                t.copy,
                t.task_id,
                t.num_turns,
                budget,
            )
            return
        t.enter_observation(wrapped, len(obs_ids), cut)

    def _fits(self, t: Trajectory, observation_tokens: int) -> bool:
        """Whether an observation turn plus a full model turn still fit the env's budget (see `AgentConfig`)."""
        cfg = self.config
        turn = observation_tokens + cfg.max_response_length + 1
        budget = cfg.trajectory_budget(t.env_name)
        if cfg.history_window:
            return len(t.context(cfg.history_window)) + turn <= budget
        return len(t.response_ids) + turn <= budget - cfg.max_prompt_length

    def _fail(self, t: Trajectory, exc: EnvClientError) -> None:
        if t.client is not None:
            self.envs[t.env_name].pool.discard(t.client, exc)
            t.client = None
        t.fail(f"{type(exc).__name__}: {exc}")
        log.warning("trajectory %s/%d (task %d) failed: %s", t.uid, t.copy, t.task_id, t.error)

    # ------------------------------------------------------------------ output
    def _finish(
        self,
        trajectories: list[Trajectory],
        timer: PhaseTimer,
        start: float,
        output_dir: str | None,
        global_step: int,
        dataset_columns: dict | None = None,
    ) -> DataProto:
        cfg = self.config
        composers = {name: side.composer for name, side in self.envs.items()}
        scores = score(trajectories, composers, self.specs)
        step_wise = bool(cfg.history_window)
        out = build_batch(trajectories, scores, self.specs, self.pad_id, dataset_columns or {}, composers, step_wise)
        start_errors = sum(side.pool.stats["errors"] for side in self.envs.values())
        metrics = rollout_metrics(trajectories, scores, self.specs, start_errors - self._start_errors_reported)
        self._start_errors_reported = start_errors
        if output_dir is not None:
            records = [
                trajectory_record(t, self.chat, s, self.specs[t.env_name], global_step)
                for t, s in zip(trajectories, scores)
            ]
            write_jsonl(records, step_path(output_dir, global_step))
            if cfg.write_viewer:
                write_viewer(records, step_path(output_dir, global_step, ".html"), f"Rollouts, step {global_step}")
        total = time.perf_counter() - start
        generation, env = timer.totals["generation"], timer.totals["env"]
        metrics.update(
            {
                "timing_s/generation": generation,
                "timing_s/env": env,
                "timing_s/overhead": max(0.0, total - generation - env),
                "timing_s/rollout_total": total,
            }
        )
        out.meta_info["metrics"] = metrics
        return out
