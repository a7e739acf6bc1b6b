"""`verl.batch_keys` names every key a `DataProto` carries: nothing writes or reads an unnamed key, and every named
key has a writer (the scan is `batch_key_scan`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from batch_key_scan import read_keys, written_keys

from verl import batch_keys as K

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "verl", ROOT / "openmanus_rl"]
DATASET_ONLY = {"prompt", "extra_info", "reward_model"}  # parquet columns: read_tasks writes them by column name


def test_every_key_written_is_named_in_batch_keys():
    unnamed = {key: places[:3] for key, places in written_keys(SOURCES).items() if key not in K.KEYS}
    assert unnamed == {}, f"add these to verl/batch_keys.py with their shape, dtype and writer: {unnamed}"


def test_every_key_read_is_named_in_batch_keys():
    unnamed = {key: places[:3] for key, places in read_keys(SOURCES).items() if key not in K.KEYS}
    assert unnamed == {}, f"read but not named in verl/batch_keys.py: {unnamed}"


def test_every_named_key_has_a_writer():
    unwritten = set(K.KEYS) - set(written_keys(SOURCES))
    assert unwritten == DATASET_ONLY
    assert all("read_tasks" in K.KEYS[key].writer for key in DATASET_ONLY)


def test_each_named_key_says_where_it_lives_its_shape_and_its_writer():
    assert len(K.KEYS) == 52
    for key in K.KEYS.values():
        assert key.where in (K.TENSOR, K.ROWS) and key.shape and key.dtype and key.writer and key.meaning
        assert (key.where == K.TENSOR) == key.shape.startswith("(")
    assert K.KEYS["old_log_probs"] == K.Key(
        "old_log_probs",
        K.TENSOR,
        "(B, T)",
        "float32",
        "verl.workers.fsdp_workers (compute_log_prob)",
        "log pi_old of each response token, recomputed by the trainer",
    )


SNIPPETS = [
    ('def f(batch):\n    batch.batch["new_tensor"] = 1\n', {"new_tensor"}),
    ("def f(batch):\n    batch.batch[K.ADVANTAGES] = 1\n", {"advantages"}),
    ('def f(batch):\n    nt = batch.non_tensor_batch\n    nt["aliased"] = 1\n', {"aliased"}),
    ('def f(batch):\n    batch.non_tensor_batch.update({"updated": 1}, kw=2)\n', {"updated", "kw"}),
    ('def f():\n    return DataProto.from_dict({"direct": 1}, non_tensors={"rows": 2})\n', {"direct", "rows"}),
    ('def f():\n    t = pack()\n    t["stored"] = 1\n    return DataProto.from_dict(t)\n', {"stored"}),
    (
        'def f():\n    own = {"a": 1}\n    nt = {k: v for k, v in own.items()}\n'
        "    return DataProto.from_dict({}, nt)\n",
        {"a"},
    ),
    ('def f() -> dict[str, torch.Tensor]:\n    return {"column": 1}\n', {"column"}),
    (
        'def f(m):\n    def fn(mb):\n        return {"mapped": 1}\n'
        "    out = m.map_micro_batches(d, fn)\n    return DataProto.from_dict(out)\n",
        {"mapped"},
    ),
    ('def f():\n    return DataProto.from_dict(meta_info={"not_a_key": 1})\n', set()),
    ('def f():\n    return from_dict(Config, {"a_config_field": 1})\n', set()),
    ('def f():\n    x = {"plain_dict": 1}\n    return x\n', set()),
]  # fmt: skip


@pytest.mark.parametrize("source, expected", SNIPPETS)
def test_the_scan_finds_the_ways_a_key_is_written(tmp_path, source, expected):
    ast.parse(source)
    (tmp_path / "m.py").write_text(source)
    assert set(written_keys([tmp_path])) == expected


def test_the_scan_finds_reads():
    source = (
        "def f(batch):\n    b = batch.batch\n    x = b['sub'] + batch.non_tensor_batch.get('got')\n"
        "    y = 'tested' in batch.batch.keys()\n    return batch.select(batch_keys=['selected'])\n"
    )
    path = Path(__file__).parent / "__scan_probe__"
    path.mkdir(exist_ok=True)
    try:
        (path / "m.py").write_text(source)
        assert set(read_keys([path])) == {"sub", "got", "tested", "selected"}
    finally:
        (path / "m.py").unlink()
        path.rmdir()
