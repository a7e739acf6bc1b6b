"""`StepJournals`: which journal a resumed step may replay, and when journals go."""

from pathlib import Path

from verl.trainer.ppo.step_journal import StepJournals, sampling_fingerprint

AGENT = {"env_name": "webshop", "n": 4, "env_ports": [36001], "max_in_flight": 0}


def test_the_fingerprint_follows_sampling_not_plumbing():
    base = sampling_fingerprint(AGENT, {"temperature": 1.0, "kv_cache_gb": 0.5})
    moved = sampling_fingerprint(
        {**AGENT, "env_ports": [36005], "max_in_flight": 2}, {"temperature": 1.0, "kv_cache_gb": 4}
    )
    assert moved == base
    assert sampling_fingerprint({**AGENT, "n": 8}, {"temperature": 1.0, "kv_cache_gb": 0.5}) != base
    assert sampling_fingerprint(AGENT, {"temperature": 0.7, "kv_cache_gb": 0.5}) != base


def test_a_key_names_a_checkpoint_only_for_the_weights_it_holds(tmp_path: Path):
    ckpt = tmp_path / "checkpoints"
    journals = StepJournals(ckpt, "f00d")
    assert journals.path(3) == ckpt / "journal" / "step_3.jsonl"
    unsaved = journals.key(2, 1)
    assert unsaved["step"] == 2 and unsaved["config"] == "f00d"
    assert unsaved["policy"].startswith("unsaved weights v1 of process ")
    assert StepJournals(ckpt, "f00d").key(2, 1) != unsaved  # another process cannot repeat it

    journals.saved(1, ckpt / "global_step_1", step=1)
    saved = journals.key(2, 1)
    assert saved == {"step": 2, "policy": str((ckpt / "global_step_1").resolve()), "config": "f00d"}
    resumed = StepJournals(ckpt, "f00d")
    resumed.loaded(1, ckpt / "global_step_1")
    assert resumed.key(2, 1) == saved  # a run resumed from that checkpoint replays step 2's journal
    assert resumed.key(3, 2)["policy"].startswith("unsaved weights v2")  # but not step 3's: weights since updated


def test_a_checkpoint_deletes_the_journals_of_the_steps_it_holds(tmp_path: Path):
    journals = StepJournals(tmp_path, "f00d")
    journals.root.mkdir(parents=True)
    for name in ("step_1.jsonl", "step_2.jsonl.stale", "step_3.jsonl", "step_12.jsonl", "notes.txt"):
        (journals.root / name).write_text("{}\n")
    journals.saved(2, tmp_path / "global_step_2", step=2)
    assert sorted(p.name for p in journals.root.iterdir()) == ["notes.txt", "step_12.jsonl", "step_3.jsonl"]
