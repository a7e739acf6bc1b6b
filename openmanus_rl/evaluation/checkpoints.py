"""What ``--model`` stands for: a Hugging Face folder, a trainer checkpoint step, or the checkpoints folder."""

from __future__ import annotations

import os
from pathlib import Path

from verl.trainer.checkpoint import LATEST_MARKER


class ModelPathError(FileNotFoundError):
    """``--model`` names no Hugging Face folder, checkpoint step or checkpoints folder."""


def _is_hf_folder(path: Path) -> bool:
    return (path / "config.json").is_file()


def resolve_model_path(path: str | os.PathLike[str]) -> Path:
    """The Hugging Face folder that ``path`` stands for.

    Tried in order: ``path`` itself (holds ``config.json``); ``path/huggingface``
    (``<ckpt>/global_step_K/actor``); ``path/actor/huggingface``
    (``<ckpt>/global_step_K``); and, when ``path`` holds ``latest_checkpointed_iteration.txt``
    (the checkpoints folder), ``path/global_step_<K>/actor/huggingface``.  Raises
    `ModelPathError` listing every place looked at.
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise ModelPathError(f"--model {root}: no such file or directory")
    candidates = [root, root / "huggingface", root / "actor" / "huggingface"]
    looked = [str(c / "config.json") for c in candidates]
    for candidate in candidates:
        if _is_hf_folder(candidate):
            return candidate.resolve()
    marker = root / LATEST_MARKER
    note = ""
    if marker.is_file():
        text = marker.read_text().strip()
        try:
            step = int(text)
        except ValueError:
            raise ModelPathError(f"--model {root}: {marker} should hold a step number, holds {text!r}") from None
        hf = root / f"global_step_{step}" / "actor" / "huggingface"
        if _is_hf_folder(hf):
            return hf.resolve()
        looked.append(f"{hf / 'config.json'} (step {step}, from {marker})")
        if (root / f"global_step_{step}" / "actor").is_dir():
            note = " (the checkpoint has an actor/ folder but no Hugging Face export in actor/huggingface/)"
    else:
        looked.append(f"{marker} (a checkpoints folder)")
        steps = sorted(p.name for p in root.glob("global_step_*") if p.is_dir())
        if steps:
            note = f" (found {', '.join(steps)} but no {LATEST_MARKER}: pass one of them)"
        elif (root / "actor").is_dir() or (root.name == "actor" and root.parent.name.startswith("global_step_")):
            note = " (a checkpoint step with no Hugging Face export: actor/huggingface/ is missing)"
    raise ModelPathError(
        f"--model {root} is not a Hugging Face folder, checkpoint step or checkpoints folder{note}; "
        "looked for:\n  " + "\n  ".join(looked)
    )


def model_label(hf: Path) -> str:
    """A short name for default output files: the ``global_step_K`` of a checkpoint export, else the folder name."""
    for part in reversed(hf.parts):
        if part.startswith("global_step_"):
            return part
    return hf.name or "model"
