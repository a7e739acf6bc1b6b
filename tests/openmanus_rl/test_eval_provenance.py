"""`openmanus_rl.evaluation.provenance` on a fixture model folder (digests recomputed here from the documented byte
stream), and ``compare``'s warning when two results read different task files."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from importlib.util import find_spec, module_from_spec, spec_from_file_location
from pathlib import Path

import pytest
import tomllib
import torch
import transformers

from openmanus_rl.eval import main
from openmanus_rl.evaluation.compare import compare
from openmanus_rl.evaluation.provenance import (
    file_sha256,
    git_commit,
    model_files,
    model_sha256,
    package_versions,
    provenance,
)

REPO = Path(__file__).resolve().parents[2]

HASHED = {
    "config.json": b'{"model_type": "llama"}',
    "model-00001-of-00002.safetensors": b"\x00\x01weights-1",
    "model-00002-of-00002.safetensors": b"weights-2\xff",
    "pytorch_model.bin": b"bin",
    "tokenizer.json": b'{"version": "1.0"}',
    "tokenizer_config.json": b"{}",
    "special_tokens_map.json": b"{}",
    "merges.txt": b"a b\n",
    "vocab.json": b'{"a": 0}',
}
IGNORED = {"README.md": b"# tiny", "optimizer.pt": b"state", "Config.JSON": b"{}", "generation_config.json": b"{}"}


@pytest.fixture
def model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    for name, data in {**HASHED, **IGNORED}.items():
        (folder / name).write_bytes(data)
    (folder / "sub" / "extra.safetensors").write_bytes(b"not hashed: in a sub-folder")
    return folder


def _expected_model_digest(files: dict[str, bytes]) -> str:
    stream = b"".join(
        name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data for name, data in sorted(files.items())
    )
    return hashlib.sha256(stream).hexdigest()


def test_model_files_are_the_weights_config_and_tokenizer(model_folder: Path):
    assert [p.name for p in model_files(model_folder)] == [
        "config.json",
        "merges.txt",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "pytorch_model.bin",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.json",
    ]


def test_model_sha256_is_the_documented_stream(model_folder: Path):
    expected = _expected_model_digest(HASHED)
    assert model_sha256(model_folder) == expected
    (model_folder / "README.md").write_text("changed")
    (model_folder / "sub" / "extra.safetensors").write_bytes(b"changed")
    assert model_sha256(model_folder) == expected
    (model_folder / "tokenizer_config.json").write_bytes(b'{"x": 1}')
    assert model_sha256(model_folder) == _expected_model_digest({**HASHED, "tokenizer_config.json": b'{"x": 1}'})
    assert model_sha256(model_folder) != expected


def test_model_sha256_of_a_folder_without_model_files(tmp_path: Path):
    assert model_sha256(tmp_path) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_file_sha256(tmp_path: Path):
    path = tmp_path / "test.parquet"
    path.write_bytes(b"PAR1" + bytes(range(256)) * 5000 + b"PAR1")  # more than one read chunk
    assert file_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    (tmp_path / "abc").write_bytes(b"abc")
    assert file_sha256(tmp_path / "abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def _vllm_version() -> str | None:
    """vLLM's own ``_version.py`` read alone (importing vllm is slow), whatever distribution installed it."""
    spec = find_spec("vllm")
    if spec is None:
        return None
    loaded = spec_from_file_location("vllm_version", Path(spec.origin).with_name("_version.py"))
    module = module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module.__version__


def test_package_versions():
    assert package_versions() == {
        "python": ".".join(map(str, sys.version_info[:3])),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "vllm": _vllm_version(),
        "openmanus_rl": tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"],
    }


def test_git_commit(tmp_path: Path):
    assert git_commit(tmp_path) is None
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(git + ["init", "-q"], check=True)
    assert git_commit(tmp_path) is None  # no commit yet
    (tmp_path / "f").write_text("x")
    subprocess.run(git + ["add", "f"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "one"], check=True)
    branch = (tmp_path / ".git" / "HEAD").read_text().removeprefix("ref: ").strip()
    head = (tmp_path / ".git" / branch).read_text().strip()
    assert len(head) == 40 and git_commit(tmp_path) == head
    assert git_commit(tmp_path / "missing") is None


def test_provenance(model_folder: Path, tmp_path: Path):
    tasks = tmp_path / "test.parquet"
    tasks.write_bytes(b"tasks")
    assert provenance(model_folder, tasks) == {
        "model_sha256": _expected_model_digest(HASHED),
        "model_files": sorted(HASHED),
        "task_file": str(tasks),
        "task_file_sha256": hashlib.sha256(b"tasks").hexdigest(),
        "versions": package_versions(),
        "git_commit": git_commit(REPO),
    }


# ---------------------------------------------------------------------------------------------- compare's warning
def _result_file(folder: Path, name: str, task_sha: str | None) -> Path:
    rows = [
        {"task_id": t, "sample": 0, "success": t % 2 == 0, "env_reward": 1.0 if t % 2 == 0 else 0.0, "failed": False}
        for t in range(4)
    ]
    (folder / f"{name}.tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {"model": name, "tasks_file": f"{name}.tasks.jsonl"}
    if task_sha is not None:
        summary["provenance"] = {"task_file_sha256": task_sha}
    (folder / f"{name}.json").write_text(json.dumps(summary))
    return folder / f"{name}.json"


def test_compare_warns_when_the_task_files_differ(tmp_path: Path, capsys):
    a = _result_file(tmp_path, "a", "1" * 64)
    b = _result_file(tmp_path, "b", "2" * 64)
    same = _result_file(tmp_path, "same", "1" * 64)
    old = _result_file(tmp_path, "old", None)
    expected = (
        "A and B read different task files (sha256 111111111111... and 222222222222...): "
        "the same task id may be a different task"
    )
    assert compare(a, b)["warnings"] == [expected]
    assert compare(a, same)["warnings"] == []
    assert compare(a, old)["warnings"] == []
    assert compare(a, tmp_path / "b.tasks.jsonl")["warnings"] == []

    assert main(["compare", str(a), str(b)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line.startswith("warning:")] == [f"warning: {expected}"]
    assert main(["compare", str(a), str(same)]) == 0
    assert not any(line.startswith("warning:") for line in capsys.readouterr().out.splitlines())
