"""What the entry points share: their ``--help`` text (`help_text`, `asks_help`), and for SFT and the reward
model, load the config or exit 2 with one message, fit, report.

    sys.exit(run_trainer(argv, load_sft_config, SFTTrainer, "sft", describe))

The trainer's ``fit()`` returns its summary, with ``hf_folder``, the best weights' folder; the last line printed
is that folder, so scripts can capture it.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Protocol, Sequence, TypeVar

from verl.utils.typed_config import ConfigError, load_yaml_config
from verl.utils.yaml_defaults import CONFIG_DIR

HELP_FLAGS = ("-h", "--help")

Config = TypeVar("Config")


def asks_help(args: Sequence[str]) -> bool:
    """Whether the command line holds ``-h`` or ``--help`` (anywhere: the rest is not read then)."""
    return any(arg in HELP_FLAGS for arg in args)


def help_text(module: str, runs: str, config: str, example: str, options: Sequence[tuple[str, str]] = ()) -> str:
    """The ``--help`` of ``python -m verl.trainer.<module>``: the usage line, what it runs (``runs``), where its YAML
    (``<config>.yaml``) is, how to override a key, the ``options`` (flag, what it does) and one ``example``
    command line."""
    flags = "".join(f" [{flag}]" for flag, _ in options)
    rows = [
        ("key=value", "set a key of the YAML by its dotted path, e.g. trainer.output_dir=outputs/mine"),
        ("+key=value", "add a key the YAML lacks (the config is typed: a key no section takes is refused)"),
        *options,
        ("-h, --help", "print this text and exit"),
    ]
    width = max(len(flag) for flag, _ in rows) + 2
    return "\n".join(
        [
            f"usage: python -m verl.trainer.{module}{flags} [key=value ...] [+key=value ...]",
            "",
            runs,
            "",
            f"config: {CONFIG_DIR / f'{config}.yaml'} (every key, its default and what it does)",
            *(f"  {flag.ljust(width)}{what}" for flag, what in rows),
            "",
            "example:",
            f"  {example}",
        ]
    )


class CheckedConfig(Protocol):
    def check_files(self, prefix: str) -> None: ...


Checked = TypeVar("Checked", bound=CheckedConfig)


def load_checked(config_type: type[Checked], yaml_name: str, prefix: str, overrides: list[str], files: bool) -> Checked:
    """Compose ``config/<yaml_name>.yaml`` with Hydra-syntax overrides and type-check it as ``config_type``; with
    ``files``, also check that its data files exist. `ConfigError` on the first problem."""
    cfg = load_yaml_config(config_type, yaml_name, overrides, prefix)
    if files:
        cfg.check_files(prefix)
    return cfg


class Trainer(Protocol):
    def fit(self) -> dict[str, Any]: ...

    def leave_distributed(self) -> None: ...


def run_trainer(
    argv: list[str] | None,
    load_config: Callable[[list[str]], Config],
    make_trainer: Callable[[Config], Trainer],
    name: str,
    describe: Callable[[dict[str, Any]], str],
) -> int:
    """Exit code 2 on a config error (``config error: ...`` on stderr), else 0 after fitting: prints
    ``[name] <describe(summary)>`` and then the weights' folder."""
    os.environ.setdefault("WORLD_SIZE", "1")
    try:
        cfg = load_config(list(sys.argv[1:] if argv is None else argv))
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    trainer = make_trainer(cfg)
    try:
        summary = trainer.fit()
    finally:
        trainer.leave_distributed()  # nccl warns of leaked resources when a process exits still in its group
    print(f"[{name}] {describe(summary)}")
    print(summary["hf_folder"])
    return 0
