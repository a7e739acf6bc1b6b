"""The warm start before RL: expert demonstrations, then SFT, cached under a key of everything that shapes them.

    python scripts/warm_start.py [--env_name ENV] [--model DIR] [--n_demos 32] [--n_dev_demos 8]
        [--action_format FORMAT] [--server_url URL] [--cache_dir DIR] [overrides: agent.max_turns=12, train.epochs=2]
    python scripts/warm_start.py --env_name babyai,webshop    # a mixed-env run: demonstrations of each env
    python scripts/warm_start.py --program examples.webshop_openai_agent:play    # an agent program's own episodes

The key hashes the base model (its path and the size and mtime of its weight
files), the env, the action format, the number of demonstrations, the agent
limits (``ppo_trainer.yaml``'s, with the run's ``agent.*`` overrides: ``run_training.sh`` passes them on, so
the demonstrations are cut exactly as RL's episodes are; an ``agent.action_format=`` override is the format
the demonstrations are written in), the envs' task lists (``prepare_data.task_fingerprint``:
a new WebShop catalogue is a new key), which episodes each env keeps (``EnvSpec.demos_keep``), the SFT defaults
(``sft_trainer.yaml``) and the SFT overrides (every other ``key=value``); changing any of them rebuilds the warm start,
and the script says which it did. The last line printed is the warm-started
Hugging Face folder (what ``actor_rollout_ref.model.path`` takes). Without
``--server_url`` the demonstration script starts its own env server.  With
several envs (comma-separated) each env gives ``--n_demos`` train and
``--n_dev_demos`` dev episodes, and SFT trains on all of them together.

``--program package.module:function`` (or the RL run's ``+agent.program=`` override) makes the
demonstrations that agent program's own conversations, played through the gateway with the expert
answering its model calls (``make_sft_data.py --program``), in the ``tool_call`` format; the key then
also holds the program's name and its module's source.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import pandas as pd
from prepare_data import task_fingerprint

from agentgym.registry import get_env_spec
from verl.utils.cache import cache_root

if TYPE_CHECKING:
    from verl.trainer.sft_trainer import SFTConfig

ROOT = Path(__file__).resolve().parents[1]
TIMING_FILE = "timing.json"  # how long the demonstrations and SFT took when the warm start was built
LIMIT_KEYS = ("max_turns", "max_prompt_length", "max_response_length", "max_obs_length", "max_trajectory_length")


def agent_limits(agent_overrides: Sequence[str] = ()) -> dict[str, int | None]:
    """The agent limits of the RL config (``ppo_trainer.yaml`` with ``agent.key=value`` overrides): demonstrations
    are written under the same ones, so SFT trains on exactly the prompts and truncations RL will show the model.
    ``max_turns`` and ``max_trajectory_length`` may be None: each env's own (``EnvSpec``), as in RL."""
    from omegaconf import OmegaConf

    agent = OmegaConf.load(ROOT / "verl" / "trainer" / "config" / "ppo_trainer.yaml").agent
    given = OmegaConf.from_dotlist([item.removeprefix("agent.") for item in agent_overrides])
    agent = OmegaConf.merge(agent, {key: given[key] for key in LIMIT_KEYS if key in given})
    return {key: None if agent[key] is None else int(agent[key]) for key in LIMIT_KEYS}


def longest_trajectory(limits: dict[str, int | None], envs: Sequence[str]) -> int:
    """The longest demonstration SFT must hold: ``max_trajectory_length``, or, when it is None, the largest of the
    envs' own budgets (``EnvSpec.max_trajectory_length``), as in RL."""
    from openmanus_rl.agent import AgentConfig

    return AgentConfig(
        env_name=",".join(envs), max_trajectory_length=limits["max_trajectory_length"]
    ).longest_trajectory


def action_format(default: str, agent_overrides: Sequence[str] = ()) -> str:
    """The format the demonstrations are written in: the RL run's (an ``agent.action_format=`` override, the last
    one given), else ``default`` (``--action_format``)."""
    given = [item.split("=", 1)[1] for item in agent_overrides if item.startswith("agent.action_format=")]
    return given[-1] if given else default


def model_fingerprint(model: Path) -> list:
    """Path plus (name, size, mtime) of the weight files: a rebuilt model gets a new key."""
    files = sorted(p for p in model.iterdir() if p.suffix in (".safetensors", ".bin", ".json"))
    return [str(model.resolve())] + [(p.name, p.stat().st_size, int(p.stat().st_mtime)) for p in files]


def cache_key(args: argparse.Namespace, model: Path, dtype: str) -> str:
    """The warm start's identity: model files, env tasks, format, demonstrations, agent limits, the SFT overrides and
    defaults, and ``dtype``, the one SFT trains in here (`sft_dtype`)."""
    envs = [name.strip() for name in args.env_name.split(",")]
    fields = {
        "model": model_fingerprint(model),
        "env": args.env_name,
        "tasks": task_fingerprint(envs),
        "action_format": args.action_format,
        "n_demos": args.n_demos,
        "n_dev_demos": args.n_dev_demos,
        "noise": args.noise,
        "agent": agent_limits(args.agent_overrides),
        "keep": [get_env_spec(env).demos_keep for env in envs],
        "sft": sorted(args.sft_overrides),
        "sft_defaults": (ROOT / "verl" / "trainer" / "config" / "sft_trainer.yaml").read_text(),
        "sft_dtype": dtype,
        "bf16_weights": "stochastic rounding",  # the warm starts trained under nearest rounding scored 16 points less
    }
    if args.program:
        fields["program"] = [args.program, program_source_sha256(args.program)]
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def env_sft_overrides(envs: Sequence[str], given: Sequence[str]) -> list[str]:
    """The SFT overrides a warm start of ``envs`` runs: the envs' own (`EnvSpec.warm_start_sft`; of several envs,
    those all of them declare), less any whose key ``given`` sets, then ``given``."""
    declared = [get_env_spec(env).warm_start_sft for env in envs]
    shared = [item for item in declared[0] if all(item in other for other in declared[1:])]
    keys = {_override_key(item) for item in given}
    return [item for item in shared if _override_key(item) not in keys] + list(given)


def _override_key(item: str) -> str:
    """The config key a Hydra override names: ``train.epochs`` for ``train.epochs=1``, ``+train.epochs=1``,
    ``++train.epochs=1`` and ``~train.epochs``."""
    return item.split("=", 1)[0].lstrip("+~")


def sft_config(
    model: Path, sft_overrides: Sequence[str], limits: dict[str, int | None], envs: Sequence[str]
) -> SFTConfig:
    """The SFT config this warm start will run, composed and validated once, before any demonstration is played: a bad
    override fails in seconds, not after the expert's episodes (the data files are checked when SFT starts: they are
    written first). Raises `ConfigError`."""
    from verl.trainer.main_sft import load_sft_config

    return load_sft_config(
        [f"model.path={model}", f"data.max_length={longest_trajectory(limits, envs)}", *sft_overrides],
        check_files=False,
    )


def sft_dtype(cfg: SFTConfig) -> str:
    """The dtype SFT trains in on this machine, resolved as the SFT trainer does (``auto`` follows the hardware): a
    warm start trained in bf16 on one box is not reused as the fp32 one of another."""
    from verl.utils.precision import resolve_dtype

    return resolve_dtype(cfg.train.mixed_precision, cfg.trainer.device, "train").dtype


def program_source_sha256(program: str) -> str:
    """The SHA-256 of the source file of ``program``'s module: an edited program gets new demonstrations."""
    import inspect

    from openmanus_rl.gateway.config import load_program

    return hashlib.sha256(Path(inspect.getfile(load_program(program))).read_bytes()).hexdigest()


def split_program(overrides: Sequence[str]) -> tuple[str | None, list[str]]:
    """The agent program an ``[+]agent.program=`` override names (the last one), and the other overrides."""
    program, rest = None, []
    for item in overrides:
        if item.lstrip("+").startswith("agent.program="):
            program = item.split("=", 1)[1]
        else:
            rest.append(item)
    return program, rest


def say(text: str) -> None:
    """Progress goes to stderr: stdout carries only the resulting folder."""
    print(f"[warm_start] {text}", file=sys.stderr, flush=True)


def run(cmd: list[str]) -> str:
    """Run ``cmd`` with its output shown on stderr; return its last stdout line."""
    return run_together([cmd])[0]


def run_together(cmds: list[list[str]]) -> list[str]:
    """Run ``cmds`` at the same time, each one's output shown on stderr line by line as it comes; return each
    one's last stdout line. The first failure stops the others; exits naming the failed and the stopped commands."""
    for cmd in cmds:
        say("$ " + " ".join(cmd))
    procs = [subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True) for cmd in cmds]
    stopped: set[int] = set()
    with ThreadPoolExecutor(len(procs)) as pool:
        relays = [pool.submit(_relay, proc) for proc in procs]
        for done in as_completed(relays):
            if procs[relays.index(done)].returncode and not stopped:
                stopped = {i for i, proc in enumerate(procs) if proc.poll() is None}
                for i in stopped:
                    procs[i].terminate()
    failed = [
        f"(exit {proc.returncode}) {' '.join(cmd)}"
        for i, (cmd, proc) in enumerate(zip(cmds, procs))
        if proc.returncode and i not in stopped
    ]
    if failed:
        halted = [" ".join(cmds[i]) for i in sorted(stopped)]
        sys.exit(
            "[warm_start] failed: " + "; ".join(failed) + ("; stopped with it: " + "; ".join(halted) if halted else "")
        )
    return [relay.result() for relay in relays]


def _relay(proc: subprocess.Popen) -> str:
    """Copy ``proc``'s stdout to stderr until it ends; its last non-empty line."""
    last = ""
    assert proc.stdout is not None
    for line in proc.stdout:
        print(line, end="", file=sys.stderr, flush=True)
        last = line.strip() or last
    proc.wait()
    return last


def demo_command(
    args: argparse.Namespace, env: str, split: str, n: int, model: Path, limits: dict[str, int | None], folder: Path
) -> list[str]:
    """The `make_sft_data.py` command that writes ``n`` demonstrations of ``env``'s ``split`` into ``folder``."""
    cmd = [
        sys.executable,
        "scripts/make_sft_data.py",
        "--env_name",
        env,
        "--split",
        split,
        "--n",
        str(n),
        "--action_format",
        args.action_format,
        "--noise",
        str(args.noise),
        "--tokenizer",
        str(model),
        "--out",
        str(folder / f"demos_{split}_{env}.parquet"),
    ] + [f"--{k}={v}" for k, v in limits.items() if v is not None]
    if args.server_url:
        cmd += ["--server_url", args.server_url]
    if args.program:
        cmd += ["--program", args.program]
    return cmd


def build_parser() -> argparse.ArgumentParser:
    """The script's flags; ``--env_name`` and ``--action_format`` default to ``ppo_trainer.yaml``'s agent section."""
    from verl.utils.yaml_defaults import add_yaml_argument

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_yaml_argument(parser, "--env_name", "agent.env_name", "an env, or several comma-separated")
    parser.add_argument(
        "--model", default=None, help="the base model folder (default: the prepared SmolLM2-135M-Instruct)"
    )
    parser.add_argument(
        "--n_demos", type=int, default=32, help="expert episodes played on train tasks (successful ones are kept)"
    )
    parser.add_argument(
        "--n_dev_demos", type=int, default=8, help="expert episodes played on dev tasks (held-out loss)"
    )
    parser.add_argument("--noise", type=float, default=0.0, help="the expert's noise level")
    add_yaml_argument(parser, "--action_format", "agent.action_format")
    parser.add_argument("--server_url", default=None)
    parser.add_argument(
        "--program",
        default=None,
        metavar="PACKAGE.MODULE:FUNCTION",
        help="demonstrations of this agent program through the gateway (format tool_call)",
    )
    parser.add_argument(
        "--cache_dir", default=None, help="default: $OPENMANUS_CACHE/warm_start or ~/.cache/openmanus_rl/warm_start"
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        help="agent.<limit>=value (the RL run's agent limits, e.g. "
        "agent.max_turns=12) or Hydra overrides for verl.trainer.main_sft",
    )
    return parser


def main() -> None:
    parser = build_parser()
    args = parser.parse_args()
    program, args.overrides = split_program(args.overrides)
    args.program = args.program or program
    args.agent_overrides = [item for item in args.overrides if item.startswith("agent.")]
    envs = [name.strip() for name in args.env_name.split(",")]
    args.sft_overrides = env_sft_overrides(envs, [item for item in args.overrides if not item.startswith("agent.")])
    args.action_format = "tool_call" if args.program else action_format(args.action_format, args.agent_overrides)
    limits = agent_limits(args.agent_overrides)
    if args.server_url and len(envs) > 1:
        parser.error("--server_url names one server, so it goes with one env only")
    if args.program and len(envs) > 1:
        parser.error("--program plays one env's tasks: give one --env_name")
    py = sys.executable
    model = Path(args.model) if args.model else Path(run([py, "scripts/prepare_model.py"]))
    from verl.utils.typed_config import ConfigError

    try:
        sft = sft_config(model, args.sft_overrides, limits, envs)
    except ConfigError as exc:
        sys.exit(f"[warm_start] config error: {exc}")
    root = Path(args.cache_dir or cache_root() / "warm_start")
    kind = "program" if args.program else args.action_format
    folder = root / f"{'+'.join(envs)}_{kind}_{args.n_demos}_{cache_key(args, model, sft_dtype(sft))}"
    hf = folder / "sft" / "huggingface"
    if (folder / "sft" / "sft_summary.json").is_file() and (hf / "config.json").is_file():
        summary = json.loads((folder / "sft" / "sft_summary.json").read_text())
        say(f"cached: {hf} (dev loss {summary['best_dev_loss']:.4f}; same model, env, format, demos and SFT config)")
        print(hf)
        return
    say(f"building {folder} (no warm start yet for this model, env, format, demos and SFT config)")
    started = time.perf_counter()
    splits = {"train": args.n_demos, "dev": args.n_dev_demos}
    demos = {split: folder / f"demos_{split}.parquet" for split in splits}
    # an env's train and dev demonstrations side by side: each is mostly one busy thread (start-up, its server, expert)
    for env in envs:
        run_together([demo_command(args, env, split, n, model, limits, folder) for split, n in splits.items()])
    for split, out in demos.items():
        parts = [pd.read_parquet(folder / f"demos_{split}_{env}.parquet") for env in envs]
        pd.concat(parts, ignore_index=True).to_parquet(out, index=False)
    demos_s = time.perf_counter() - started
    run(
        [
            py,
            "-m",
            "verl.trainer.main_sft",
            f"model.path={model}",
            f"data.train_files={demos['train']}",
            f"data.val_files={demos['dev']}",
            f"data.max_length={longest_trajectory(limits, envs)}",
            f"trainer.output_dir={folder / 'sft'}",
            f"trainer.experiment_name=sft_{'+'.join(envs)}",
            *args.sft_overrides,
        ]
    )
    sft_s = time.perf_counter() - started - demos_s
    (folder / TIMING_FILE).write_text(json.dumps({"demonstrations_s": demos_s, "sft_s": sft_s}) + "\n")
    print(hf)


if __name__ == "__main__":
    main()
