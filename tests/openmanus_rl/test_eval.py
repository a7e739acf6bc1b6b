"""`openmanus_rl.eval` and `openmanus_rl.evaluation`: the statistics (literal values worked out by hand), model path
resolution, per-task results and summaries, ``compare`` on hand-written result files, and one end-to-end run."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from openmanus_rl.eval import main
from openmanus_rl.evaluation.checkpoints import ModelPathError, resolve_model_path
from openmanus_rl.evaluation.compare import compare
from openmanus_rl.evaluation.provenance import git_commit, model_files, model_sha256, package_versions
from openmanus_rl.evaluation.results import (
    TaskResult,
    load_task_results,
    task_results_from_batch,
    task_results_from_episodes,
    tasks_path_for,
)
from openmanus_rl.evaluation.run import with_env_urls
from openmanus_rl.evaluation.servers import server_url_list
from openmanus_rl.evaluation.stats import bootstrap_ci, mcnemar_exact, paired_bootstrap_ci, wilson_interval
from openmanus_rl.evaluation.summary import summarize
from verl.protocol import DataProto

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------- Wilson
# p = s/n, z = 1.959964, z^2 = 3.841459
# center = (p + z^2/(2n)) / (1 + z^2/n);  half = z/(1 + z^2/n) * sqrt(p(1-p)/n + z^2/(4n^2))
# 7/10: denom = 1.384146, center = (0.7 + 0.192073)/1.384146 = 0.644493,
#       half = 1.416013 * sqrt(0.021 + 0.009604) = 1.416013 * 0.174939 = 0.247716 -> (0.3968, 0.8922)
# 0/10: center = 0.192073/1.384146 = 0.138766, half = 1.416013 * sqrt(0.009604) = 0.138766 -> (0, 0.2775)
# 10/10: mirror image of 0/10 -> (0.7225, 1)
# 2/3:  denom = 2.280486, center = (0.666667 + 0.640243)/2.280486 = 0.573082,
#       half = 0.859449 * sqrt(0.074074 + 0.106707) = 0.859449 * 0.425184 = 0.365424 -> (0.2077, 0.9385)
@pytest.mark.parametrize(
    "successes,n,lo,hi",
    [
        (7, 10, 0.3968, 0.8922),
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (2, 3, 0.2077, 0.9385),
    ],
)
def test_wilson_interval_literal_values(successes, n, lo, hi):
    got = wilson_interval(successes, n)
    assert round(got[0], 4) == lo and round(got[1], 4) == hi


def test_wilson_interval_edges():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi < 1.0
    assert wilson_interval(10, 10)[1] == 1.0
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


# ---------------------------------------------------------------------------------------------- McNemar
# p = min(1, 2 * sum_{i<=min(b,c)} C(b+c, i) / 2^(b+c))
# b=0,c=0: n=0, 2 * 1/1 = 2 -> 1.0
# b=5,c=0: n=5, 2 * C(5,0)/32 = 2/32 = 0.0625
# b=10,c=2: n=12, 2 * (1 + 12 + 66)/4096 = 158/4096 = 0.038574 -> 0.0386
# b=5,c=1: n=6, 2 * (1 + 6)/64 = 14/64 = 0.21875
@pytest.mark.parametrize(
    "b,c,p", [(0, 0, 1.0), (5, 0, 0.0625), (10, 2, 0.0386), (2, 10, 0.0386), (5, 1, 0.2188), (3, 3, 1.0)]
)
def test_mcnemar_exact_literal_values(b, c, p):
    assert round(mcnemar_exact(b, c), 4) == p


def test_mcnemar_exact_is_exact():
    assert mcnemar_exact(10, 2) == pytest.approx(158 / 4096, rel=1e-12)
    assert mcnemar_exact(5, 1) == pytest.approx(0.21875, rel=1e-12)
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def mcnemar_by_hand(b: int, c: int) -> float:
    """``min(1, 2 * sum_{i<=min(b,c)} C(b+c, i) / 2^(b+c))`` in exact fractions."""
    n = b + c
    return float(min(Fraction(1), 2 * Fraction(sum(math.comb(n, i) for i in range(min(b, c) + 1)), 2**n)))


def test_scipys_binomial_test_is_the_hand_written_mcnemar_sum():
    for b in range(30):
        for c in range(30):
            assert mcnemar_exact(b, c) == pytest.approx(mcnemar_by_hand(b, c), rel=1e-9, abs=1e-300), (b, c)


# ---------------------------------------------------------------------------------------------- bootstrap
def test_bootstrap_ci_deterministic_for_a_seed():
    values = np.random.default_rng(1).random(50)
    a = bootstrap_ci(values, resamples=500, seed=7)
    assert a == bootstrap_ci(values, resamples=500, seed=7)
    assert a != bootstrap_ci(values, resamples=500, seed=8)
    assert a[0] < float(values.mean()) < a[1]


def bootstrap_by_hand(x: np.ndarray, resamples: int, seed: int, level: float = 0.95) -> tuple[float, float]:
    """The percentile bootstrap written out: resample indices from default_rng(seed), the mean of each, quantiles."""
    idx = np.random.default_rng(seed).integers(0, x.size, size=(resamples, x.size))
    lo, hi = np.quantile(x[idx].mean(axis=1), [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


@pytest.mark.parametrize("seed,level", [(0, 0.95), (7, 0.9)])
def test_scipys_bootstrap_is_the_percentile_bootstrap_written_out(seed, level):
    values = np.random.default_rng(1).random(50)
    expected = bootstrap_by_hand(values, 800, seed, level)
    assert bootstrap_ci(values, resamples=800, seed=seed, level=level) == pytest.approx(expected, abs=1e-12)


def test_bootstrap_ci_of_a_constant_vector():
    assert bootstrap_ci([0.5] * 9, seed=3) == (0.5, 0.5)
    lo, hi = bootstrap_ci([0.1] * 9)
    assert lo == pytest.approx(0.1, abs=1e-12) and hi == pytest.approx(0.1, abs=1e-12)


def test_bootstrap_ci_other_statistic_and_errors():
    assert bootstrap_ci([1.0, 2.0, 3.0], stat=np.max, resamples=200, seed=0)[1] == 3.0
    with pytest.raises(ValueError):
        bootstrap_ci([])


def test_paired_bootstrap_ci():
    a = [0.0, 1.0, 1.0, 0.0, 0.5]
    assert paired_bootstrap_ci(a, list(a)) == (0.0, 0.0)
    # B = A + 0.25 on every task: the difference is the constant 0.25
    assert paired_bootstrap_ci(a, [x + 0.25 for x in a], seed=5) == (0.25, 0.25)
    b = [1.0, 1.0, 1.0, 0.0, 1.0]
    first = paired_bootstrap_ci(a, b, resamples=1000, seed=2)
    assert first == paired_bootstrap_ci(a, b, resamples=1000, seed=2)
    assert first == bootstrap_ci(np.subtract(b, a), resamples=1000, seed=2)
    with pytest.raises(ValueError):
        paired_bootstrap_ci([1.0], [1.0, 2.0])


# ---------------------------------------------------------------------------------------------- model paths
@pytest.fixture
def checkpoints(tmp_path: Path) -> Path:
    ckpt = tmp_path / "checkpoints"
    hf = ckpt / "global_step_3" / "actor" / "huggingface"
    hf.mkdir(parents=True)
    (hf / "config.json").write_text("{}")
    (ckpt / "global_step_1" / "actor").mkdir(parents=True)  # an older step without an HF export
    (ckpt / "latest_checkpointed_iteration.txt").write_text("3\n")
    return ckpt


def test_resolve_model_path_from_each_form(checkpoints: Path):
    hf = (checkpoints / "global_step_3" / "actor" / "huggingface").resolve()
    assert resolve_model_path(checkpoints) == hf
    assert resolve_model_path(checkpoints / "global_step_3") == hf
    assert resolve_model_path(checkpoints / "global_step_3" / "actor") == hf
    assert resolve_model_path(str(hf)) == hf


def test_resolve_model_path_errors_name_what_was_looked_for(tmp_path: Path, checkpoints: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelPathError) as err:
        resolve_model_path(empty)
    message = str(err.value)
    for looked in (
        empty / "config.json",
        empty / "huggingface" / "config.json",
        empty / "actor" / "huggingface" / "config.json",
        empty / "latest_checkpointed_iteration.txt",
    ):
        assert str(looked) in message
    with pytest.raises(ModelPathError, match="no such file"):
        resolve_model_path(tmp_path / "missing")
    with pytest.raises(ModelPathError, match="no Hugging Face export"):
        resolve_model_path(checkpoints / "global_step_1")
    (checkpoints / "latest_checkpointed_iteration.txt").write_text("1")
    with pytest.raises(ModelPathError, match="global_step_1"):
        resolve_model_path(checkpoints)
    assert isinstance(err.value, FileNotFoundError)


def test_main_reports_a_bad_model_path(tmp_path: Path, capsys):
    assert main(["--model", str(tmp_path)]) == 2
    assert "looked for" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- results
def _result(
    task: int,
    success: bool,
    reward: float = 0.0,
    sample: int = 0,
    failed: bool = False,
    turns: int = 2,
    invalid: int = 0,
    source: str = "webshop",
) -> TaskResult:
    return TaskResult(
        task_id=task,
        sample=sample,
        success=success,
        env_reward=reward,
        turns=turns,
        invalid_actions=invalid,
        failed=failed,
        data_source=source,
    )


def test_task_results_from_batch():
    turns = [
        [
            {"role": "observation", "text": "o"},
            {"role": "assistant", "valid": False},
            {"role": "observation", "text": "bad"},
            {"role": "assistant", "valid": True},
        ],
        [{"role": "assistant", "valid": True}],
        [],
        [{"role": "assistant", "valid": False}],
    ]
    out = DataProto.from_dict(
        non_tensors={
            "task_id": [4, 4, 9, 9],
            "success": [True, False, False, False],
            "env_reward": [1.0, 0.5, 0.0, 0.0],
            "num_turns": [2, 1, 0, 1],
            "trajectory": turns,
            "failed": [False, False, True, False],
            "data_source": ["webshop"] * 4,
            "status": ["done", "done", "failed", "turn_limit"],
            "error": [None, None, "EnvServerError: boom", None],
        }
    )
    rows = task_results_from_batch(out, n=2)
    assert [(r.task_id, r.sample) for r in rows] == [(4, 0), (4, 1), (9, 0), (9, 1)]
    assert [r.invalid_actions for r in rows] == [1, 0, 0, 1]
    assert [r.failed for r in rows] == [False, False, True, False]
    assert rows[2].error == "EnvServerError: boom" and rows[0].error is None
    assert rows[0].to_json() == {
        "task_id": 4,
        "sample": 0,
        "success": True,
        "env_reward": 1.0,
        "turns": 2,
        "invalid_actions": 1,
        "failed": False,
        "data_source": "webshop",
        "status": "done",
        "error": None,
    }
    assert TaskResult.from_json(rows[3].to_json()) == rows[3]


def test_task_results_from_episodes():
    # task 4: two episodes, the first with a prefix break (two rows of session s1) whose program said it failed
    # although its reward was 1; task 9: a failed episode and a successful one (success as the gateway resolves it)
    out = DataProto.from_dict(
        non_tensors={
            "gateway_session": ["s1", "s1", "s2", "s3", "s4"],
            "task_id": [4, 4, 4, 9, 9],
            "num_turns": [2, 3, 1, 0, 4],
            "reward_total": [1.0, 1.0, 0.5, 0.0, 1.0],
            "success": [False, False, False, False, True],
            "failed": [False, False, False, True, False],
            "data_source": ["webshop"] * 5,
            "status": ["done", "done", "truncated", "failed", "done"],
            "error": [None, None, None, "TimeoutError: episode", None],
        }
    )
    rows = task_results_from_episodes(out)
    assert [r.to_json() for r in rows] == [
        {
            "task_id": 4,
            "sample": 0,
            "success": False,
            "env_reward": 1.0,
            "turns": 5,
            "invalid_actions": 0,
            "failed": False,
            "data_source": "webshop",
            "status": "done",
            "error": None,
        },
        {
            "task_id": 4,
            "sample": 1,
            "success": False,
            "env_reward": 0.5,
            "turns": 1,
            "invalid_actions": 0,
            "failed": False,
            "data_source": "webshop",
            "status": "truncated",
            "error": None,
        },
        {
            "task_id": 9,
            "sample": 0,
            "success": False,
            "env_reward": 0.0,
            "turns": 0,
            "invalid_actions": 0,
            "failed": True,
            "data_source": "webshop",
            "status": "failed",
            "error": "TimeoutError: episode",
        },
        {
            "task_id": 9,
            "sample": 1,
            "success": True,
            "env_reward": 1.0,
            "turns": 4,
            "invalid_actions": 0,
            "failed": False,
            "data_source": "webshop",
            "status": "done",
            "error": None,
        },
    ]


def test_with_env_urls_spreads_the_servers_by_task_id():
    batch = DataProto.from_dict(
        non_tensors={
            "data_source": ["webshop"] * 3,
            "extra_info": [{"index": 7, "split": "test"}, {"index": 2, "split": "test"}, {"split": "test"}],
        }
    )
    out = with_env_urls(batch, ["http://a:1", "http://b:2"])
    assert list(out.non_tensor_batch["extra_info"]) == [
        {"index": 7, "split": "test", "env_url": "http://b:2"},
        {"index": 2, "split": "test", "env_url": "http://a:1"},
        {"split": "test", "env_url": "http://a:1"},
    ]  # no index: the row (2)
    assert list(batch.non_tensor_batch["extra_info"])[0] == {"index": 7, "split": "test"}  # the batch is left as it was
    assert list(out.non_tensor_batch["data_source"]) == ["webshop"] * 3


def test_a_program_that_cannot_load_fails_before_any_work(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--model", "no/such/folder", "--program", "examples.webshop_openai_agent:no_such_function"])
    assert exc.value.code == 2
    assert (
        "--program: program 'examples.webshop_openai_agent:no_such_function' cannot be loaded"
        in capsys.readouterr().err
    )


def test_summarize_greedy_leaves_failed_episodes_out():
    results = [
        _result(0, True, 1.0, invalid=1),
        _result(1, False, 0.5, turns=3),
        _result(2, True, 1.0, turns=1),
        _result(3, False, 0.0, failed=True, turns=1, invalid=1),
    ]
    s = summarize(results, n=1)
    assert (s["tasks"], s["scored_tasks"], s["rollouts"], s["failed"]) == (4, 3, 4, 1)
    assert s["success_rate"] == pytest.approx(2 / 3)
    assert [round(x, 4) for x in s["success_ci95"]] == [0.2077, 0.9385]  # Wilson 2/3, worked out above
    assert s["mean_reward"] == pytest.approx(2.5 / 3)
    assert s["reward_ci95"] == list(bootstrap_ci([1.0, 0.5, 1.0], resamples=2000, seed=0))
    assert s["invalid_action_rate"] == pytest.approx(1 / 6)  # 1 invalid over 2 + 3 + 1 turns of unfailed episodes
    assert s["mean_turns"] == pytest.approx(2.0)
    assert "pass_at_k" not in s


def test_summarize_samples_mean_and_pass_at_k():
    # task 0: 1/2 succeed; task 1: 0/2; task 2: 2/2; task 3: one failed sample, the other succeeds
    results = [
        _result(0, True, 1.0, 0),
        _result(0, False, 0.0, 1),
        _result(1, False, 0.2, 0),
        _result(1, False, 0.4, 1),
        _result(2, True, 1.0, 0),
        _result(2, True, 1.0, 1),
        _result(3, False, 0.0, 0, failed=True),
        _result(3, True, 1.0, 1),
    ]
    s = summarize(results, n=2, seed=4)
    assert (s["tasks"], s["scored_tasks"], s["failed"]) == (4, 4, 1)
    assert s["success_rate"] == s["mean_at_k"] == pytest.approx((0.5 + 0 + 1 + 1) / 4)
    assert s["pass_at_k"] == pytest.approx(3 / 4)
    assert s["mean_reward"] == pytest.approx((0.5 + 0.3 + 1 + 1) / 4)
    assert s["success_ci95"] == list(bootstrap_ci([0.5, 0.0, 1.0, 1.0], resamples=2000, seed=4))


def test_prefix_cache_use_between_two_readings():
    from openmanus_rl.evaluation.run import prefix_cache_use

    before = {"requests": 3, "queries": 400, "hits": 100}
    after = {"requests": 7, "queries": 1200, "hits": 700}
    assert prefix_cache_use(before, after) == {"queries": 800, "hits": 600, "hit_rate": 0.75}
    assert prefix_cache_use(before, before) == {"queries": 0, "hits": 0, "hit_rate": 0.0}
    assert prefix_cache_use(None, None) is None  # an engine that does not count


def test_tasks_path_for():
    assert tasks_path_for("results/run.json") == Path("results/run.tasks.jsonl")
    assert tasks_path_for("results/run") == Path("results/run.tasks.jsonl")


def test_server_url_list():
    assert server_url_list("http://127.0.0.1:36001") == ["http://127.0.0.1:36001"]
    assert server_url_list("localhost:5000/, https://10.0.0.5:36002") == [
        "http://localhost:5000",
        "https://10.0.0.5:36002",
    ]
    with pytest.raises(ValueError, match=r"--server_url must list URLs like http://HOST:PORT, got 'ftp://x:1'"):
        server_url_list("http://a:1,ftp://x:1")
    with pytest.raises(ValueError, match="at least one server"):
        server_url_list(" , ")


# ---------------------------------------------------------------------------------------------- compare
def _write_jsonl(path: Path, rows: list[TaskResult]) -> Path:
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in rows))
    return path


# Shared scored tasks 0..8.          task: 0    1    2    3  4  5  6  7  8
SUCCESS_A = [1, 1, 0, 0, 0, 0, 1, 0, 0]
SUCCESS_B = [1, 0, 1, 1, 1, 1, 1, 0, 1]
REWARD_A = [1.0, 1.0, 0.5, 0.0, 0.0, 0.0, 1.0, 0.0, 0.25]
REWARD_B = [1.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0]


@pytest.fixture
def result_files(tmp_path: Path) -> tuple[Path, Path]:
    a = [_result(t, bool(s), r) for t, (s, r) in enumerate(zip(SUCCESS_A, REWARD_A))]
    b = [_result(t, bool(s), r) for t, (s, r) in enumerate(zip(SUCCESS_B, REWARD_B))]
    a += [_result(9, True, 1.0), _result(10, True, 1.0)]  # task 10 only in A
    b += [_result(9, False, 0.0, failed=True), _result(11, False, 0.0)]  # task 9 failed in B; task 11 only in B
    _write_jsonl(tmp_path / "A.tasks.jsonl", a)
    (tmp_path / "A.json").write_text(json.dumps({"model": "a", "tasks_file": "A.tasks.jsonl"}))
    return tmp_path / "A.json", _write_jsonl(tmp_path / "B.tasks.jsonl", b)


def test_compare_literal_values(result_files, capsys):
    a, b = result_files
    c = compare(a, b, seed=0)
    assert (c["shared_tasks"], c["only_a"], c["only_b"], c["unscored_shared"]) == (9, 1, 1, 1)
    s = c["success"]
    assert s["a_mean"] == pytest.approx(3 / 9) and s["b_mean"] == pytest.approx(7 / 9)
    assert s["gain"] == pytest.approx(4 / 9)
    # discordant: b = A fails & B succeeds = tasks 2, 3, 4, 5, 8; c = A succeeds & B fails = task 1
    assert (s["b"], s["c"]) == (5, 1)
    assert s["mcnemar_p"] == 0.21875  # 2 * (C(6,0) + C(6,1)) / 2^6 = 14/64
    assert s["ci95"] == list(paired_bootstrap_ci(SUCCESS_A, SUCCESS_B, resamples=10000, seed=0))
    assert s["ci95"][0] <= 4 / 9 <= s["ci95"][1]
    r = c["reward"]
    assert r["gain"] == pytest.approx((7.5 - 3.75) / 9)
    assert r["ci95"] == list(paired_bootstrap_ci(REWARD_A, REWARD_B, resamples=10000, seed=0))
    assert "mcnemar_p" not in r
    assert c["binary"] is True

    assert main(["compare", str(a), str(b), "--json", str(a.parent / "cmp.json")]) == 0
    printed = capsys.readouterr().out
    assert "+0.4444" in printed and "b (A fails, B succeeds) = 5" in printed and "p = 0.2188" in printed
    assert json.loads((a.parent / "cmp.json").read_text())["success"]["mcnemar_p"] == 0.21875


def test_compare_identical_and_sampled(tmp_path: Path):
    rows = [_result(t, bool(t % 2), 0.5 * (t % 3)) for t in range(6)]
    a = _write_jsonl(tmp_path / "a.tasks.jsonl", rows)
    c = compare(a, a)
    assert c["success"]["gain"] == 0.0 and c["success"]["ci95"] == [0.0, 0.0]
    assert (c["success"]["b"], c["success"]["c"], c["success"]["mcnemar_p"]) == (0, 0, 1.0)
    # two samples per task in B: per-task mean success, no McNemar
    sampled = [_result(t, s, 0.0, sample=k) for t in range(6) for k, s in enumerate((True, bool(t % 2)))]
    b = _write_jsonl(tmp_path / "b.tasks.jsonl", sampled)
    c = compare(a, b)
    assert c["binary"] is False and "mcnemar_p" not in c["success"]
    assert c["success"]["gain"] == pytest.approx((6 * 0.5 + 3 * 0.5) / 6 - 3 / 6)


def test_compare_missing_file(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="nothing.tasks.jsonl"):
        load_task_results(tmp_path / "nothing.json")


def test_import_has_no_side_effects():
    code = (
        "import sys, openmanus_rl.eval; "
        "print(sorted(m for m in ('torch', 'transformers', 'vllm', 'verl.workers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_end_to_end_hf_engine(tiny_model_path: str, server: str, tmp_path: Path, capsys):
    out = tmp_path / "results" / "tiny.json"
    data_dir = tmp_path / "data"  # missing: eval writes it with scripts/prepare_data.py
    tiny = ["--model", tiny_model_path, "--server_url", server, "--data_dir", str(data_dir)]
    tiny += "--engine hf --dtype float32 --limit 3 --max_turns 2 --threads 2".split()
    code = main([*tiny, "--out", str(out), "--request_timeout_s", "45"])
    assert code == 0
    assert (data_dir / "webshop" / "test.parquet").is_file()
    summary = json.loads(out.read_text())
    for key in (
        "model",
        "env",
        "split",
        "n",
        "greedy",
        "tasks",
        "success_rate",
        "success_ci95",
        "mean_reward",
        "reward_ci95",
        "invalid_action_rate",
        "mean_turns",
        "failed",
        "per_source",
        "config",
        "ci_method",
        "provenance",
    ):
        assert key in summary, key
    assert summary["tasks"] == 3 and summary["n"] == 1 and summary["greedy"] is True
    assert summary["env"] == "webshop" and summary["split"] == "test"
    assert summary["model"] == str(Path(tiny_model_path).resolve())
    assert 0 <= summary["success_rate"] <= 1
    assert 0 <= summary["success_ci95"][0] <= summary["success_rate"] <= summary["success_ci95"][1] <= 1
    assert summary["failed"] == 0 and set(summary["per_source"]) == {"webshop"}
    assert 1 <= summary["mean_turns"] <= 2
    assert summary["config"]["engine"] == "hf" and summary["config"]["server_urls"] == [server]
    assert (summary["config"]["kv_cache_gb"], summary["config"]["request_timeout_s"]) == (4.0, 45.0)
    assert summary["tasks_per_s"] == pytest.approx(3 / summary["wall_s"])
    assert summary["config"]["schedule"] == "window" and summary["config"]["batch_size"] == 64
    assert summary["prefix_cache"] is None  # the HF engine keeps no prefix cache
    task_path = data_dir / "webshop" / "test.parquet"
    assert summary["provenance"] == {
        "model_sha256": model_sha256(tiny_model_path),
        "model_files": [p.name for p in model_files(tiny_model_path)],
        "task_file": str(task_path),
        "task_file_sha256": hashlib.sha256(task_path.read_bytes()).hexdigest(),
        "versions": package_versions(),
        "git_commit": git_commit(),
    }
    assert "config.json" in summary["provenance"]["model_files"]

    lines = [json.loads(line) for line in (tmp_path / "results" / "tiny.tasks.jsonl").read_text().splitlines()]
    assert len(lines) == 3
    assert [row["task_id"] for row in lines] == [0, 1, 2]
    for row in lines:
        assert {"task_id", "sample", "success", "env_reward", "turns", "invalid_actions", "failed"} <= set(row)
        assert 0 <= row["invalid_actions"] <= row["turns"] <= 2
    printed = capsys.readouterr().out
    assert (
        "success_rate" in printed and f"wall {summary['wall_s']:.0f} s, {summary['tasks_per_s']:.3f} tasks/s" in printed
    )

    # the run compared with itself: no gain, no discordant pair
    c = compare(out, out)
    assert c["shared_tasks"] == 3 and c["success"]["gain"] == 0.0 and c["success"]["mcnemar_p"] == 1.0
    assert math.isclose(c["reward"]["gain"], 0.0)

    # a window of one task in flight, and batches of two tasks: every task plays the same episode
    for schedule, batch_size in (("window", "1"), ("batches", "2")):
        other = tmp_path / "results" / f"{schedule}.json"
        assert main([*tiny, "--out", str(other), "--schedule", schedule, "--batch_size", batch_size]) == 0
        assert (
            f"{'a window of 1 task' if schedule == 'window' else '2 batch(es) of up to 2 tasks'}"
            in capsys.readouterr().out
        )
        assert (tmp_path / "results" / f"{schedule}.tasks.jsonl").read_text() == (
            tmp_path / "results" / "tiny.tasks.jsonl"
        ).read_text()


@pytest.mark.slow
def test_end_to_end_agent_program(tiny_model_path: str, server: str, tmp_path: Path):
    """The example agent program through the gateway: the tiny random model never calls a tool, so each episode
    plays the program's whole turn cap on the server it was given, buys nothing and scores 0."""
    from examples.webshop_openai_agent import MAX_TURNS

    out = tmp_path / "program.json"
    code = main(
        [
            "--model",
            tiny_model_path,
            "--engine",
            "hf",
            "--dtype",
            "float32",
            "--limit",
            "2",
            "--threads",
            "2",
            "--max_response_length",
            "8",
            "--server_url",
            server,
            "--data_dir",
            str(tmp_path / "data"),
            "--out",
            str(out),
            "--program",
            "examples.webshop_openai_agent:play",
        ]
    )
    assert code == 0
    summary = json.loads(out.read_text())
    assert (summary["tasks"], summary["failed"], summary["success_rate"], summary["mean_reward"]) == (2, 0, 0.0, 0.0)
    assert summary["mean_turns"] == MAX_TURNS and summary["config"]["program"] == "examples.webshop_openai_agent:play"
    rows = [json.loads(line) for line in (tmp_path / "program.tasks.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["sample"], r["turns"], r["failed"], r["status"]) for r in rows] == [
        (0, 0, MAX_TURNS, False, "done"),
        (1, 0, MAX_TURNS, False, "done"),
    ]
