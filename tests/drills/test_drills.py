"""Fault drills: each injects a fault into a real run (tiny model, real WebShop servers, real Ray and vLLM) and
checks what the run does. Run this tier alone with ``pytest -m drills``.

What survives what (docs/reliability.md's table is built from these):
* an env server SIGKILLed or hung mid-run: restarted by the trainer, the step rolled out again, the run goes on;
* an env route that hangs while the server's health check answers: found by its oldest in-flight request, the
  server restarted, the run goes on;
* an env server whose port another process took while it was down: restarted on a free port, the agent follows;
* an env server that cannot come back: the run checkpoints its last completed step and stops, naming the server;
* a reward module that raises or hangs: its rows fail with the error recorded; too many: retried once, then a stop;
* the driver SIGKILLed in a step, while it writes that step's checkpoint (LoRA, a KL loss, one-step-off rollout):
  re-running resumes from the checkpoint before and gives the same step;
* the driver SIGKILLed in a step's rollout: re-running replays the step's journal (finished episodes taken whole,
  the turns of the one under way replayed) and gives the same step;
* a Ray worker killed: the run stops within seconds naming the worker and step; re-running resumes;
* a bad input: one message before Ray, servers or anything under the output dir.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Mapping

import psutil
import pytest
import requests
import torch
from safetensors.torch import load_file
from trainer_runs import grpo_step_args
from waiting import wait_until

from agentgym.server import FAULT_INJECTION_ENV
from agentgym.spawn import free_port

pytestmark = pytest.mark.drills
slow = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PLUGIN_PATH = os.pathsep.join(
    str(REPO / "tests" / d) for d in ("drills", "verl")
)  # faulty_reward builds on fixed_rollout


def webshop_args(model: str, webshop_tasks: Path, out: Path, port: int | list[int], *extra: str) -> list[str]:
    """GRPO on WebShop with the tiny model; the trainer starts and supervises the server(s) on ``port``."""
    ports = ",".join(map(str, port if isinstance(port, list) else [port]))
    return [
        f"actor_rollout_ref.model.path={model}",
        f"data.train_files={webshop_tasks}/train.parquet",
        f"data.val_files={webshop_tasks}/test.parquet",
        "algorithm.adv_estimator=grpo",
        "agent.n=2",
        "data.train_batch_size=2",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.optim.lr=1e-4",
        "actor_rollout_ref.rollout.max_model_len=2048",
        "actor_rollout_ref.rollout.kv_cache_gb=1",
        f"agent.env_ports=[{ports}]",
        "agent.manage_servers=true",
        "agent.max_turns=2",
        "agent.max_response_length=16",
        "agent.max_obs_length=96",
        "agent.max_prompt_length=1024",
        "agent.max_trajectory_length=1536",
        "agent.request_timeout_s=5",
        "trainer.val_before_train=false",
        "trainer.test_freq=0",
        "trainer.logger=[console,jsonl]",
        f"trainer.output_dir={out}",
        "trainer.threads_per_worker=1",
        "ray_init.num_cpus=2",
        *extra,
    ]


class Run:
    """``python -m verl.trainer.main_ppo args`` in the background, its stdout and stderr in one log file;
    ``environ`` adds to its environment (and so to that of the env servers it starts)."""

    def __init__(self, args: list[str], log: Path, pythonpath: str = "", environ: Mapping[str, str] | None = None):
        env = dict(os.environ, PYTHONUNBUFFERED="1", **(environ or {}))
        if pythonpath:
            env["PYTHONPATH"] = os.pathsep.join([pythonpath, os.environ.get("PYTHONPATH", "")])
        self.log = log
        with open(log, "w") as sink:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "verl.trainer.main_ppo", *args],
                cwd=REPO,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, check: Callable[[str], object], what: str, timeout_s: float = 600, poll_s: float = 0.02):
        """Poll until ``check(log text)`` is truthy; fail (with the log's tail) if the run exits or time runs out."""

        def seen() -> object:
            found = check(self.text())
            if not found and self.proc.poll() is not None:
                pytest.fail(f"the run exited ({self.proc.returncode}) before {what}:\n{self.text()[-4000:]}")
            return found

        try:
            return wait_until(seen, what, timeout_s, poll_s)
        except pytest.fail.Exception:
            if self.proc.poll() is None:
                self.proc.kill()
                pytest.fail(f"timed out waiting for {what}:\n{self.text()[-4000:]}")
            raise

    def finish(self, timeout_s: float = 900) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"the run did not finish within {timeout_s} s:\n{self.text()[-4000:]}")

    def sigkill(self) -> None:
        """SIGKILL the driver alone, as a user's ``kill -9`` would; then reap what it leaves behind."""
        try:
            family = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            family = []
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        _, alive = psutil.wait_procs(family, timeout=30)
        for proc in alive:  # Ray's own processes notice their driver's death in their own time
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass


def metrics(out: Path) -> list[dict]:
    path = out / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def steps_logged(out: Path) -> list[int]:
    return [row["step"] for row in metrics(out)]


def latest(out: Path) -> str | None:
    marker = out / "checkpoints" / "latest_checkpointed_iteration.txt"
    return marker.read_text().strip() if marker.is_file() else None


def server_pid(run: Run, port: int) -> int:
    found = run.wait_for(
        lambda text: re.search(rf"webshop server on port {port} started \(pid (\d+)\)", text), "the server start"
    )
    return int(found.group(1))


def start_past_step_1(
    model: str, webshop_tasks: Path, tmp_path: Path, port: int, *extra: str, environ: Mapping[str, str] | None = None
) -> tuple[Run, Path, int]:
    """A 4-step run without checkpoints on one supervised server;
    returns once step 1 is logged (run, output dir, server pid)."""
    out = tmp_path / "run"
    run = Run(
        webshop_args(model, webshop_tasks, out, port, "trainer.total_training_steps=4", "trainer.save_freq=0", *extra),
        tmp_path / "run.log",
        environ=environ,
    )
    pid = server_pid(run, port)
    run.wait_for(lambda _: 1 in steps_logged(out), "step 1")
    return run, out, pid


def complete_checkpoint(path: Path) -> bool:
    return all(
        (path / part).is_file()
        for part in ("trainer_state.pt", "actor/actor.pt", "actor/huggingface/model.safetensors")
    )


# ---------------------------------------------------------------------------------------------------- env servers
# The env-server drills roll out with the plain HF engine: what they drill is the supervisor and the agent, and a run
# starts 15 s sooner without vLLM (the worker drills below keep vLLM: a killed worker takes its engine with it).
HF_ENGINE = "actor_rollout_ref.rollout.name=hf"


@slow
def test_a_hung_env_route_then_a_hung_server_are_found_and_restarted(tiny_model_path, webshop_tasks, tmp_path):
    """One run, two hangs.  First every env call of the server hangs (the test-only fault injection) while GET / and
    GET /health answer: the supervisor sees the oldest in-flight request pass agent.server_hang_s, kills and restarts
    the server.  Then the restarted server is SIGSTOPped (the kernel still accepts its connections; nothing answers):
    its health check goes unanswered, and it is killed and restarted too (after a step passed on it: two faults in
    one step, rolled out again only once, stop the run)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    out = tmp_path / "run"
    run = Run(
        webshop_args(
            tiny_model_path,
            webshop_tasks,
            out,
            port,
            "trainer.total_training_steps=8",
            "trainer.save_freq=0",
            HF_ENGINE,
            "agent.server_hang_s=4",
            "agent.request_timeout_s=2",
            "agent.env_retries=0",
        ),
        tmp_path / "run.log",
        environ={FAULT_INJECTION_ENV: "1"},
    )
    first = server_pid(run, port)
    run.wait_for(lambda _: 1 in steps_logged(out), "step 1")
    assert requests.post(url + "/debug/hang", timeout=10).json() is True
    stuck = run.wait_for(
        lambda _: requests.get(url + "/health", timeout=10).json()["oldest_request_s"] >= 1,
        "an env request hanging for a second",
    )
    assert stuck and requests.get(url + "/", timeout=10).json() == "ok"  # the health check still answers
    back = run.wait_for(
        lambda text: re.search(rf"webshop server on port {port} is back \(pid (\d+), restart 1\)", text),
        "the first restart",
    )
    second = int(back.group(1))
    # a step must pass on the restarted server first: a step is rolled out again once,
    # so two faults in one step stop the run
    done = max(steps_logged(out))
    run.wait_for(lambda _: max(steps_logged(out)) > done, "a step on the restarted server")
    os.kill(second, signal.SIGSTOP)
    assert [s for s in range(1, 9) if s not in steps_logged(out)], (
        "the run ended before the second hang: make it longer"
    )
    assert run.finish() == 0, run.text()[-4000:]
    text = run.text()
    assert re.search(
        rf"webshop server on port {port} has had an env request in flight for \d+ s while its health "
        rf"check answered \(an env route hung\); killed it; restarting in 1.0 s \(attempt 1 of 3\)",
        text,
    )
    assert re.search(
        rf"webshop server on port {port} did not answer its health check for \d+ s \(hung\); killed it; restarting",
        text,
    )
    assert re.search(rf"webshop server on port {port} is back \(pid \d+, restart 2\)", text)
    for pid in (first, second):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    rows = metrics(out)
    assert [r["step"] for r in rows] == list(range(1, 9))
    assert rows[-1]["env/failed_trajectories"] == 0.0 and rows[-1]["env_server/restarts"] == 2.0


def kill_and_take_port(pid: int, port: int) -> socket.socket:
    """SIGKILL the server, then hold its port with a listening socket of our own; the socket."""
    blocker = socket.socket()
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    os.kill(pid, signal.SIGKILL)
    psutil.wait_procs([psutil.Process(pid)] if psutil.pid_exists(pid) else [], timeout=10)
    blocker.bind(("127.0.0.1", port))
    blocker.listen(64)
    return blocker


@slow
def test_a_killed_server_whose_port_was_taken_comes_back_on_a_free_port_while_the_other_carries_on(
    tiny_model_path, webshop_tasks, tmp_path
):
    """One of two servers is SIGKILLed after step 1 and another process takes its port: the server comes back on a
    free port and the agent follows it there; the other server serves meanwhile. (A restart on the same port: the
    hang drill.)"""
    ports, out, steps = [free_port(), free_port()], tmp_path / "run", 12
    run = Run(
        webshop_args(
            tiny_model_path,
            webshop_tasks,
            out,
            ports,
            f"trainer.total_training_steps={steps}",
            "trainer.save_freq=0",
            HF_ENGINE,
        ),
        tmp_path / "run.log",
    )
    victim = server_pid(run, ports[0])
    run.wait_for(lambda _: 1 in steps_logged(out), "step 1")
    blocker = kill_and_take_port(victim, ports[0])  # something else now holds the port
    try:
        moved = run.wait_for(
            lambda text: re.search(
                rf"webshop server on port {ports[0]}: the port is taken by another process; "
                rf"restarting on port (\d+) \(the agent now uses http://127.0.0.1:(\d+)\)",
                text,
            ),
            "the move to a free port",
        )
        assert moved.group(1) == moved.group(2)
        new_port = int(moved.group(1))
        run.wait_for(
            lambda text: re.search(rf"webshop server on port {new_port} is back \(pid \d+, restart 1\)", text),
            "the restart",
        )
        back_at = max(steps_logged(out), default=0)
        assert back_at < steps, "the run ended before the restart: make it longer"
        assert run.finish() == 0, run.text()[-4000:]
    finally:
        blocker.close()
    text = run.text()
    assert f"webshop server on port {ports[0]} exited with code -9; restarting in 1.0 s (attempt 1 of 3)" in text
    assert f"port {ports[1]} exited" not in text and f"port {ports[1]} did not answer" not in text
    served = [
        json.loads(line)
        for step in range(2, steps + 1)
        for line in (out / "trajectories" / "rollouts" / f"step_{step:06d}.jsonl").open()
    ]
    assert any(r["server"] == f"http://127.0.0.1:{ports[1]}" and not r["failed"] for r in served), (
        "the survivor served nothing"
    )
    later = [
        json.loads(line)
        for step in range(back_at + 1, steps + 1)
        for line in (out / "trajectories" / "rollouts" / f"step_{step:06d}.jsonl").open()
    ]
    assert any(r["server"] == f"http://127.0.0.1:{new_port}" and not r["failed"] for r in later), (
        "the moved server served nothing"
    )
    rows = metrics(out)
    assert [r["step"] for r in rows] == list(range(1, steps + 1))
    assert rows[-1]["env/failed_trajectories"] == 0.0 and rows[-1]["env_server/restarts"] == 1.0
    assert rows[-1]["env_server/down"] == 0.0
    assert rows[-1]["rollout/trajectories"] == 4.0


@slow
def test_a_server_that_cannot_come_back_stops_the_run_with_a_checkpoint(tiny_model_path, webshop_tasks, tmp_path, shop):
    data = shutil.copytree(
        shop.data_dir, tmp_path / "webshop_data"
    )  # the server's catalogue, which the test takes away
    port = free_port()
    run, out, pid = start_past_step_1(
        tiny_model_path,
        webshop_tasks,
        tmp_path,
        port,
        HF_ENGINE,
        "agent.server_max_restarts=2",
        "agent.request_timeout_s=2",
        "agent.env_retries=0",
        environ={"WEBSHOP_DATA_DIR": str(data)},
    )
    shutil.rmtree(data)  # every restart fails to load the catalogue
    os.kill(pid, signal.SIGKILL)
    assert run.finish() == 3, run.text()[-4000:]
    text = run.text()
    assert f"webshop server on port {port} exited with code -9; restarting in 1.0 s (attempt 1 of 2)" in text
    assert re.search(
        rf"run stopped: webshop server on port {port} is down and could not be restarted "
        rf"\(restart attempt 2 failed: exited with code 1\)",
        text,
    )
    assert f"{data} has no items_shuffle_1000.json; expected WebShop's data files there" in text  # the log's tail
    done = steps_logged(out)[-1]  # steps may finish before the kill lands; the first one after it stops the run
    assert 1 <= done < 4
    assert (
        f"the latest checkpoint is {out / 'checkpoints' / f'global_step_{done}'}; "
        "re-run the same command to resume from it"
    ) in text
    assert latest(out) == str(done) and complete_checkpoint(out / "checkpoints" / f"global_step_{done}")


# ---------------------------------------------------------------------------------------------------- rewards
def faulty_reward_args(model: str, data: Path, out: Path, *extra: str) -> list[str]:
    return grpo_step_args(
        model,
        data,
        out,
        "faulty_reward:PLUGIN",
        "algorithm.reward_score_fn=drill_faulty",
        "algorithm.reward_timeout_s=2",
        "actor_rollout_ref.rollout.name=hf",
        *extra,
    )


@slow
def test_a_reward_module_that_raises_or_hangs_fails_its_rows_with_the_error(tiny_model_path, countdown_data, tmp_path):
    out = tmp_path / "run"
    run = Run(faulty_reward_args(tiny_model_path, countdown_data, out), tmp_path / "run.log", pythonpath=PLUGIN_PATH)
    assert run.finish() == 0, run.text()[-4000:]
    (step,) = metrics(out)
    assert (
        step["reward/errors"] == 2.0 and step["trainer/step_retries"] == 0.0
    )  # 2 of 4 failed: at the limit, not above
    assert step["actor/grad_norm"] > 0  # the healthy group still trains


@slow
def test_too_many_failed_rows_retry_the_step_once_then_stop_the_run(tiny_model_path, countdown_data, tmp_path):
    out = tmp_path / "run"
    run = Run(
        faulty_reward_args(tiny_model_path, countdown_data, out, "trainer.max_failed_fraction=0.25"),
        tmp_path / "run.log",
        pythonpath=PLUGIN_PATH,
    )
    assert run.finish() == 3, run.text()[-4000:]
    text = run.text()
    assert (
        "[trainer] step 1: 2 of 4 trajectories failed (trainer.max_failed_fraction=0.25); most common error: " in text
    ) and "rolling the step out again (once)" in text
    assert "run stopped: step 1 failed twice: 2 of 4 trajectories failed" in text
    assert (
        "reward 'drill_faulty' failed: ValueError: drill: this reward module has a bug" in text
        or "reward 'drill_faulty' failed: timed out after 2 s" in text
    )
    assert "no checkpoint was written; re-running starts from the beginning" in text
    assert steps_logged(out) == []


# ---------------------------------------------------------------------------------------------------- the driver
def run_straight(model: str, webshop_tasks: Path, tmp_path: Path, *extra: str) -> Path:
    """A run of ``webshop_args(..., *extra)`` never interrupted, to compare a resumed one with; its output dir."""
    out = tmp_path / "straight"
    run = Run(webshop_args(model, webshop_tasks, out, free_port(), *extra), tmp_path / "straight.log")
    assert run.finish() == 0, run.text()[-4000:]
    return out


def assert_same_weights_at_step_2(out: Path, straight_out: Path) -> None:
    """The policies both runs exported at step 2 agree within the resume tolerance (1e-4 relative, 1e-6 absolute)."""
    weights = [
        load_file(o / "checkpoints" / "global_step_2" / "actor" / "huggingface" / "model.safetensors")
        for o in (out, straight_out)
    ]
    assert weights[0].keys() == weights[1].keys()
    for name in weights[0]:
        torch.testing.assert_close(weights[0][name], weights[1][name], rtol=1e-4, atol=1e-6, msg=name)


def tasks_per_step(out: Path) -> dict[int, list[int]]:
    """The task ids each step's rollout played, from its trajectory records."""
    found = {}
    for path in sorted((out / "trajectories" / "rollouts").glob("step_*.jsonl")):
        step = int(path.stem.split("_")[1])
        found[step] = sorted({json.loads(line)["task_id"] for line in path.read_text().splitlines()})
    return found


@slow
@pytest.mark.timeout(1800)  # three runs
def test_a_driver_killed_while_writing_a_checkpoint_resumes_to_the_same_step(tiny_model_path, webshop_tasks, tmp_path):
    """On the recipe with the most state to carry: GRPO with LoRA, a KL loss (the reference is the policy with its
    adapters off) and one-step-off rollout (each rollout runs while the step before trains, so a checkpoint also holds
    the batch rolled out ahead). The driver is SIGKILLed in step 2, while it writes step 2's checkpoint: everything
    step 2 did is lost and a half-written checkpoint is left. The re-run resumes from step 1 and ends with the step 2
    of a run never interrupted: the same tasks (none lost, none played twice), metrics and weights."""
    common = (
        "trainer.total_training_steps=2",
        "trainer.save_freq=1",
        "data.shuffle=false",
        "actor_rollout_ref.model.lora_rank=4",
        "actor_rollout_ref.model.lora_alpha=8",
        "actor_rollout_ref.actor.optim.lr=1e-3",
        "actor_rollout_ref.actor.use_kl_loss=true",
        "trainer.staleness=1",
        "actor_rollout_ref.actor.tis_cap=2",
    )
    straight_out = run_straight(tiny_model_path, webshop_tasks, tmp_path, *common)
    rows = metrics(straight_out)
    assert [r["step"] for r in rows] == [1, 2]
    # step 1 trains what the first weights drew; step 2 what the weights before the last update drew
    assert [r["rollout/staleness"] for r in rows] == [0.0, 1.0]
    assert "timing_s/rollout_wait" not in rows[0]
    assert rows[1]["timing_s/rollout_wait"] < rows[1]["timing_s/rollout"]  # it rolled out while step 1 trained
    for r in rows:  # GRPO: a KL loss, no critic
        assert "actor/kl_loss" in r and "actor/tis_weight_mean" in r and not any(k.startswith("critic/vf") for k in r)
    assert tasks_per_step(straight_out) == {1: [700, 701], 2: [702, 703]}

    out, port = tmp_path / "killed", free_port()
    args = webshop_args(tiny_model_path, webshop_tasks, out, port, *common)
    killed = Run(args, tmp_path / "killed.log")
    pid = server_pid(killed, port)
    partial = out / "checkpoints" / ".tmp_global_step_2"
    killed.wait_for(lambda _: partial.exists(), "the step-2 checkpoint being written", poll_s=0.002)
    killed.sigkill()
    assert partial.exists(), "the kill landed after the checkpoint was complete"
    assert steps_logged(out) == [1]  # a step's metrics are logged once its checkpoint is complete
    psutil.wait_procs([psutil.Process(pid)] if psutil.pid_exists(pid) else [], timeout=10)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, (
        "the env server outlived its trainer"
    )
    first = out / "checkpoints" / "global_step_1"
    assert latest(out) == "1" and complete_checkpoint(first)
    assert not (out / "checkpoints" / "global_step_2").exists()
    saved = torch.load(first / "actor" / "actor.pt", weights_only=False)["model"]
    assert len(saved) == 28 and all(
        name.endswith((".lora_A", ".lora_B")) for name in saved
    )  # 2 layers x 7 projections x (A, B)
    assert (first / "rollout_ahead.pt").is_file()  # step 2's batch

    resumed = Run(args, tmp_path / "resumed.log")
    assert resumed.finish() == 0, resumed.text()[-4000:]
    assert f"resumed from {first} at step 1" in resumed.text()
    assert latest(out) == "2" and complete_checkpoint(out / "checkpoints" / "global_step_2") and not partial.exists()
    assert tasks_per_step(out) == {1: [700, 701], 2: [702, 703]}
    again, plain = metrics(out)[-1], rows[-1]
    assert again["step"] == plain["step"] == 2
    for key in (
        "env/reward/mean",
        "env/turns/mean",
        "response_length/mean",
        "prompt_length/mean",
        "critic/score/mean",
        "rollout/staleness",
    ):
        assert again[key] == plain[key], key
    for key in ("actor/pg_loss", "actor/kl_loss", "actor/entropy", "actor/tis_weight_mean"):
        assert again[key] == pytest.approx(plain[key], rel=1e-3, abs=1e-5), key
    assert_same_weights_at_step_2(out, straight_out)


def journal_lines(path: Path) -> tuple[set[str], dict[str, int]]:
    """A step journal's finished trajectory ids and its model turns per trajectory (complete lines only)."""
    finished, turns = set(), {}
    text = path.read_text() if path.is_file() else ""
    for line in text.splitlines()[1:] if text.endswith("\n") else text.splitlines()[1:-1]:
        record = json.loads(line)
        if "finished" in record:
            finished.add(record["finished"])
        elif "turn" in record:
            turns[record["turn"]] = turns.get(record["turn"], 0) + 1
    return finished, turns


@slow
@pytest.mark.timeout(1800)  # three runs
def test_a_driver_killed_mid_rollout_replays_the_steps_journal(tiny_model_path, webshop_tasks, tmp_path):
    """The driver is SIGKILLed in step 2's rollout once 5 of its 8 episodes have finished and the 6th has played a
    turn (one episode at a time, ``agent.max_in_flight=1``, 4 turns each). The re-run resumes from step 1's
    checkpoint and rolls step 2 out again: the 5 journaled episodes are taken whole, the journaled turns of the one
    under way are replayed into a fresh env, and only the rest reach the engine. Step 2 ends as in a run never
    interrupted: same metrics and weights. The plain HF engine draws the samples: one episode at a time, each
    request is a batch of its own seeded by its own seed, so a re-run draws what the first run drew."""
    common = (
        "trainer.total_training_steps=2",
        "trainer.save_freq=1",
        "data.shuffle=false",
        "agent.n=4",
        "agent.max_in_flight=1",
        "agent.max_turns=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        HF_ENGINE,
    )
    straight_out = run_straight(tiny_model_path, webshop_tasks, tmp_path, *common)
    plain = metrics(straight_out)[-1]
    assert plain["journal/restored"] == 0 and plain["journal/replayed_turns"] == 0
    assert not list((straight_out / "checkpoints" / "journal").glob("step_*"))  # each went with its checkpoint

    out = tmp_path / "killed"
    args = webshop_args(tiny_model_path, webshop_tasks, out, free_port(), *common)
    journal = out / "checkpoints" / "journal" / "step_2.jsonl"
    killed = Run(args, tmp_path / "killed.log")

    def under_way(_: str) -> bool:
        finished, turns = journal_lines(journal)
        return len(finished) >= 5 and any(tid not in finished for tid in turns)

    killed.wait_for(under_way, "5 finished episodes and one under way in step 2", poll_s=0.002)
    killed.sigkill()
    finished, turns = journal_lines(journal)
    assert 5 <= len(finished) < 8, "the kill landed after step 2's rollout"
    assert latest(out) == "1" and steps_logged(out) == [1]
    in_flight_turns = sum(n for tid, n in turns.items() if tid not in finished)
    assert 1 <= in_flight_turns < 4

    resumed = Run(args, tmp_path / "resumed.log")
    assert resumed.finish() == 0, resumed.text()[-4000:]
    again = metrics(out)[-1]
    assert again["step"] == 2
    assert again["journal/restored"] == len(finished)
    assert again["journal/replayed_turns"] == in_flight_turns
    assert again["journal/diverged"] == 0
    for key in ("env/reward/mean", "env/turns/mean", "response_length/mean", "prompt_length/mean"):
        assert again[key] == plain[key], key
    assert again["actor/pg_loss"] == pytest.approx(plain["actor/pg_loss"], rel=1e-3, abs=1e-5)
    assert not journal.exists()
    assert_same_weights_at_step_2(out, straight_out)


# ---------------------------------------------------------------------------------------------------- workers
@slow
@pytest.mark.timeout(1800)
def test_a_killed_worker_stops_the_run_within_seconds_and_it_resumes(tiny_model_path, webshop_tasks, tmp_path):
    out, port = tmp_path / "run", free_port()
    args = webshop_args(
        tiny_model_path, webshop_tasks, out, port, "trainer.total_training_steps=3", "trainer.save_freq=1"
    )
    run = Run(args, tmp_path / "run.log")
    found = run.wait_for(
        lambda text: re.search(r"workers: ActorRolloutRefWorker pids \[(\d+)\]", text), "the worker pids"
    )
    run.wait_for(lambda _: latest(out) == "1", "the step-1 checkpoint")
    os.kill(int(found.group(1)), signal.SIGKILL)
    killed_at = time.monotonic()
    assert run.finish(timeout_s=120) == 3, run.text()[-4000:]
    stopped_in = time.monotonic() - killed_at
    text = run.text()
    died = re.search(
        r"run stopped: a worker died in step (\d+): ActorRolloutRefWorker rank 0 of 1 died during \w+", text
    )
    assert died, text[-3000:]
    done = int(died.group(1)) - 1  # the step the kill landed in may be 2 or, on a fast box, 3
    assert done in (1, 2) and latest(out) == str(done)
    assert (
        f"the latest checkpoint is {out / 'checkpoints' / f'global_step_{done}'}; "
        "re-run the same command to resume from it"
    ) in text
    assert stopped_in < 60, f"the run took {stopped_in:.0f} s to stop"

    resumed = Run(args, tmp_path / "resumed.log")
    assert resumed.finish() == 0, resumed.text()[-4000:]
    assert f"resumed from {out / 'checkpoints' / f'global_step_{done}'} at step {done}" in resumed.text()
    assert steps_logged(out)[-1] == 3 and latest(out) == "3"


# ---------------------------------------------------------------------------------------------------- bad inputs
def _bad_start(tiny_model_path: str, tasks_dir: Path, out: Path, port: int) -> subprocess.CompletedProcess:
    args = webshop_args(tiny_model_path, tasks_dir, out, port)
    return subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_a_missing_data_file_fails_before_any_work(tiny_model_path, tmp_path):
    out, port = tmp_path / "out", free_port()
    proc = _bad_start(tiny_model_path, tmp_path / "nowhere", out, port)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"config error: data.train_files='{tmp_path / 'nowhere'}/train.parquet' does not exist; "
        "run scripts/prepare_data.py"
    )
    assert not out.exists() and "ray" not in proc.stdout.lower()
    with pytest.raises(OSError):  # no server was started on the port
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_an_unwritable_output_dir_fails_before_any_work(tiny_model_path, webshop_tasks, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    out, port = blocker / "run", free_port()
    proc = _bad_start(tiny_model_path, webshop_tasks, out, port)
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == f"config error: trainer.output_dir='{out}' cannot be created: {blocker} is not a directory"
    )
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
