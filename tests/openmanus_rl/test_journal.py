"""The rollout journal: what a crashed rollout had done is taken back, never sampled again.

The file's rules on hand-written records (a torn last line, another key, a turn whose context
differs); then real WebShop rollouts (a scripted generator, so every reply is known) that crash
part-way and are resumed from their journal: the resumed batch equals an uninterrupted one's,
row for row, and no journaled turn reaches the generator again.
"""

import dataclasses
import json

import pytest
from agent_helpers import ScriptedGenerator, StreamingScriptedGenerator, task_batch
from test_agent_async import CONFIG, assert_same_trajectories

from openmanus_rl.agent import OpenManusAgent
from openmanus_rl.agent.journal import (
    JournalReplay,
    RolloutJournal,
    context_digest,
    trajectory_from_state,
    trajectory_state,
)
from openmanus_rl.agent.trajectory import Trajectory

KEY = {"step": 3, "policy": "/ckpt/global_step_2", "config": "abc"}


def a_trajectory(copy: int = 0) -> Trajectory:
    t = Trajectory(row=1, copy=copy, uid="u1", task_id=7, data_source="webshop", seed=1234 + copy)
    t.prompt_ids = [5, 6, 7]
    t.add_model_turn([10, 11], [-0.5, -0.25], eot_id=2)  # no end-of-turn: one is appended
    t.add_observation_turn([20, 21, 22])
    t.model_texts = ["ab"]
    t.step_rewards = [0.5]
    t.turns = [{"role": "assistant", "text": "ab"}]
    t.status = "done"
    return t


def test_a_trajectory_round_trips_through_its_state():
    t = a_trajectory()
    state = json.loads(json.dumps(trajectory_state(t)))
    assert "client" not in state
    assert state["segments"] == [
        {"kind": "model", "start": 0, "end": 2},
        {"kind": "end_of_turn", "start": 2, "end": 3},
        {"kind": "observation", "start": 3, "end": 6},
    ]
    assert state["turn_spans"] == [[0, 3]]
    back = trajectory_from_state(state)
    assert back == t
    assert back.turn_spans == [(0, 3)]


def test_records_are_read_back_and_a_torn_last_line_is_cut(tmp_path):
    path = tmp_path / "step_3.jsonl"
    journal = RolloutJournal(path, KEY)
    t = Trajectory(row=0, copy=1, uid="u", task_id=7, data_source="webshop", seed=99)
    journal.add_turn(t, [1, 2, 3], [4, 2], [-0.5, -0.125], "stop")
    done = a_trajectory()
    journal.add_finished(done)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {"journal": 1, "key": KEY}
    assert json.loads(lines[1]) == {
        "turn": "webshop|7|1|99",
        "n": 0,
        "context": context_digest([1, 2, 3]),
        "ids": [4, 2],
        "log_probs": [-0.5, -0.125],
        "reason": "stop",
    }
    assert json.loads(lines[2])["finished"] == "webshop|7|0|1234"
    good = path.stat().st_size
    with open(path, "a") as f:  # killed while writing the next record
        f.write('{"turn": "webshop|7|1|99", "n": 1, "ids": [4')

    again = RolloutJournal(path, KEY)
    assert again.torn
    assert path.stat().st_size == good  # the torn tail is gone: the next record starts a line of its own
    assert again.replayed_turn(t, [1, 2, 3]) == ([4, 2], [-0.5, -0.125], "stop")
    assert again.replayed_turn(t, [1, 2, 9]) is None  # not sampled from this context: never attached to it
    moved = Trajectory(row=5, copy=0, uid="other", task_id=7, data_source="webshop", seed=1234)
    restored = again.restored(moved)
    assert (restored.row, restored.uid, restored.response_ids, restored.status) == (
        5,
        "other",
        [10, 11, 2, 20, 21, 22],
        "done",
    )
    again.add_turn(t, [1, 2, 3, 4, 2], [8, 2], [-1.0, -1.0], "stop")
    assert len(RolloutJournal(path, KEY).turns["webshop|7|1|99"]) == 2


def test_a_journal_of_another_rollout_is_set_aside_with_one_line(tmp_path, capsys):
    path = tmp_path / "step_3.jsonl"
    RolloutJournal(path, KEY).add_finished(a_trajectory())
    other = {**KEY, "policy": "unsaved weights v2 of process 1f2e"}
    journal = RolloutJournal(path, other)
    assert journal.finished == {} and journal.set_aside == tmp_path / "step_3.jsonl.stale"
    assert capsys.readouterr().out == (
        f"[journal] {path} was written for another rollout (differs in: policy): set aside as step_3.jsonl.stale\n"
    )
    assert json.loads(path.read_text()) == {"journal": 1, "key": other}
    assert (tmp_path / "step_3.jsonl.stale").is_file()


def test_failed_trajectories_are_not_journaled_as_finished(tmp_path):
    journal = RolloutJournal(tmp_path / "j.jsonl", KEY)
    replay = JournalReplay(journal, {}, history_window=0)
    ok, failed, running = a_trajectory(0), a_trajectory(1), a_trajectory(2)
    failed.status, running.status = "failed", "running"
    replay.record_finished([ok, failed, running, ok])
    assert list(journal.finished) == ["webshop|7|0|1234"]
    assert replay.metrics()["journal/kib"] > 0


# ---------------------------------------------------------------------------------------------- resumed rollouts
ACTIONS = ("Thought: look\nAction: search[cotton shirt]", "Thought: next\nAction: click[next >]", "no action here")


def varied(tokenizer):
    """Each turn's reply picked by its sampling seed: searches, clicks and invalid replies, so episodes differ."""
    replies = [tokenizer.encode(a, add_special_tokens=False) + [2] for a in ACTIONS]
    return lambda prompt_ids, seed: (replies[seed % 3], "stop")


class Killed(Exception):
    pass


class KilledAfter(StreamingScriptedGenerator):
    """A streaming generator whose poll number ``polls`` raises (the rollout dies there)."""

    def __init__(self, policy, polls):
        super().__init__(policy)
        self.polls, self.calls_made = polls, 0

    def poll_generation(self, max_wait_s=0.0):
        self.calls_made += 1
        if self.calls_made == self.polls:
            raise Killed
        return super().poll_generation(max_wait_s)


def run(tokenizer, generator, config, journal=None):
    with OpenManusAgent(tokenizer, generator, config) as agent:
        return agent.run_llm_loop(task_batch([0, 1, 2]), global_step=3, journal=journal)


@pytest.mark.slow
def test_an_async_rollout_killed_part_way_resumes_from_its_journal(tokenizer, webshop_server, tmp_path):
    config = {**CONFIG, "env_ports": [webshop_server.port], "max_in_flight": 2}
    whole = run(tokenizer, StreamingScriptedGenerator(varied(tokenizer)), config)
    path = tmp_path / "step_3.jsonl"
    with pytest.raises(Killed):
        run(tokenizer, KilledAfter(varied(tokenizer), polls=8), config, RolloutJournal(path, KEY))
    crashed = RolloutJournal(path, KEY)
    journaled = {tid: len(turns) for tid, turns in crashed.turns.items()}
    finished = set(crashed.finished)
    assert 0 < len(finished) < 6  # some episodes were over, some under way

    resumed_generator = StreamingScriptedGenerator(varied(tokenizer))
    resumed = run(tokenizer, resumed_generator, config, RolloutJournal(path, KEY))
    assert_same_trajectories(resumed, whole)
    metrics = resumed.meta_info["metrics"]
    unfinished_turns = sum(n for tid, n in journaled.items() if tid not in finished)
    assert metrics["journal/restored"] == len(finished)
    assert metrics["journal/replayed_turns"] == unfinished_turns
    assert metrics["journal/diverged"] == 0
    total_turns = int(sum(whole.non_tensor_batch["num_turns"]))
    assert len(resumed_generator.submitted) == total_turns - sum(journaled.values())  # no turn sampled twice


@pytest.mark.slow
def test_a_sync_rollout_killed_mid_turn_replays_every_episodes_first_turns(tokenizer, webshop_server, tmp_path):
    config = {**CONFIG, "env_ports": [webshop_server.port], "rollout_mode": "sync"}
    whole = run(tokenizer, ScriptedGenerator(varied(tokenizer)), config)

    def kill(call):
        if call == 2:  # the third turn's batched call
            raise Killed

    path = tmp_path / "step_3.jsonl"
    with pytest.raises(Killed):
        run(tokenizer, ScriptedGenerator(varied(tokenizer), before_call=kill), config, RolloutJournal(path, KEY))
    live = [row for row, turns in enumerate(whole.non_tensor_batch["num_turns"]) if turns == 3]
    resumed_generator = ScriptedGenerator(varied(tokenizer))
    resumed = run(tokenizer, resumed_generator, config, RolloutJournal(path, KEY))
    assert_same_trajectories(resumed, whole)
    metrics = resumed.meta_info["metrics"]
    finished_early = 6 - len(live)  # episodes over after two turns were journaled whole
    assert metrics["journal/restored"] == finished_early
    assert metrics["journal/replayed_turns"] == 2 * len(live)
    assert [len(call["seeds"]) for call in resumed_generator.calls] == [len(live)]  # only the third turns


@pytest.mark.slow
def test_a_journal_of_other_weights_replays_nothing(tokenizer, webshop_server, tmp_path):
    config = {**CONFIG, "env_ports": [webshop_server.port], "rollout_mode": "sync"}
    path = tmp_path / "step_3.jsonl"
    run(tokenizer, ScriptedGenerator(varied(tokenizer)), config, RolloutJournal(path, KEY))
    generator = ScriptedGenerator(varied(tokenizer))
    out = run(tokenizer, generator, config, RolloutJournal(path, {**KEY, "policy": "/ckpt/global_step_1"}))
    assert out.meta_info["metrics"]["journal/restored"] == 0
    assert sum(len(call["seeds"]) for call in generator.calls) == int(sum(out.non_tensor_batch["num_turns"]))


@pytest.mark.slow
def test_episodes_of_an_env_that_cannot_replay_start_over(tokenizer, webshop_server, tmp_path):
    config = {**CONFIG, "env_ports": [webshop_server.port], "rollout_mode": "sync"}
    whole = run(tokenizer, ScriptedGenerator(varied(tokenizer)), config)

    def kill(call):
        if call == 2:
            raise Killed

    path = tmp_path / "step_3.jsonl"
    with pytest.raises(Killed):
        run(tokenizer, ScriptedGenerator(varied(tokenizer), before_call=kill), config, RolloutJournal(path, KEY))
    generator = ScriptedGenerator(varied(tokenizer))
    with OpenManusAgent(tokenizer, generator, config) as agent:
        agent.specs["webshop"] = dataclasses.replace(agent.specs["webshop"], replays=False)
        out = agent.run_llm_loop(task_batch([0, 1, 2]), global_step=3, journal=RolloutJournal(path, KEY))
    assert_same_trajectories(out, whole)
    metrics = out.meta_info["metrics"]
    live = sum(1 for turns in whole.non_tensor_batch["num_turns"] if turns == 3)  # under way at the kill
    assert (metrics["journal/restarted"], metrics["journal/replayed_turns"]) == (live, 0)
    assert metrics["journal/restored"] == 6 - live
    assert sum(len(call["seeds"]) for call in generator.calls) == 3 * live  # every turn of theirs sampled again
