"""docs/results/README.md and index.json index every study under docs/results, and no file there holds an absolute
path of the machine it was written on (the placeholder scheme is in docs/results/README.md)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
INDEX_FILES = ("README.md", "index.json")
KEYS = {"study", "what", "command", "commit", "config_hash", "box", "headline", "folder"}

# A path that starts at one of these roots, at the start of a path: not inside a longer path or word (the
# character before it is not a letter, digit, '_', '.', '~', '-' or '/'), or right after "file://". A URL's
# path ("https://host/tmp/x") is inside a longer path, so it does not match.
ROOTS = "work tmp root home mnt opt usr var private Users scratch srv nfs data media workspace".split()
ABSOLUTE = re.compile(r"(?:(?<=file://)|(?<![\w.~/\-]))/(?:" + "|".join(ROOTS) + r")/[^\s\"'`,;:)\]}>]*")
# System programs named by their standard place, not by the machine's layout.
SYSTEM_PROGRAMS = {"/usr/bin/env", "/usr/bin/time"}


def index_rows() -> list[dict]:
    return json.loads((RESULTS / "index.json").read_text())


def entries() -> list[str]:
    return sorted(p.name for p in RESULTS.iterdir() if p.name not in INDEX_FILES)


def text_files() -> list[Path]:
    """Every file under docs/results that is UTF-8 text (no NUL byte); images and other binaries are skipped."""
    out = []
    for path in sorted(RESULTS.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        raw = path.read_bytes()
        if b"\0" in raw:
            continue
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        out.append(path)
    return out


def absolute_paths(text: str) -> list[str]:
    return [m.group(0) for m in ABSOLUTE.finditer(text) if m.group(0) not in SYSTEM_PROGRAMS]


def readme_table_rows() -> list[list[str]]:
    """The cells of the studies table: the rows after its header line and separator, up to the first line that is
    not a table row."""
    lines = (RESULTS / "README.md").read_text().splitlines()
    header = "| study | what it is | command that produced it | commit | config hash | box | headline | folder |"
    start = lines.index(header)
    assert lines[start + 1] == "|---|---|---|---|---|---|---|---|"
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def test_every_entry_has_exactly_one_row_and_every_row_an_entry():
    rows = index_rows()
    folders = [row["folder"] for row in rows]
    for name in entries():
        assert folders.count(f"docs/results/{name}") == 1, name
    assert len(rows) == len(entries())
    repo = RESULTS.parents[1]
    for row in rows:
        assert (repo / row["folder"]).exists(), row["folder"]
        assert (repo / row["folder"]).parent == RESULTS, row["folder"]


def test_rows_have_every_key_and_no_empty_value():
    for row in index_rows():
        assert set(row) == KEYS, row.get("study")
        for key in KEYS:
            assert isinstance(row[key], str) and row[key].strip(), (row["study"], key)


def test_readme_table_matches_index_json():
    rows = index_rows()
    table = readme_table_rows()
    assert len(table) == len(rows)
    assert [cells[0] for cells in table] == [row["study"] for row in rows]
    for cells, row in zip(table, rows):
        assert len(cells) == 8, row["study"]
        assert cells[3] == row["commit"]
        assert cells[4] == row["config_hash"]


def test_config_hash_is_the_config_json_sha256_prefix():
    repo = RESULTS.parents[1]
    for row in index_rows():
        folder = repo / row["folder"]
        configs = sorted(folder.rglob("config.json")) if folder.is_dir() else []
        expected = ", ".join(hashlib.sha256(p.read_bytes()).hexdigest()[:12] for p in configs) or "none"
        assert row["config_hash"] == expected, row["study"]


def test_commits_are_short_hashes():
    for row in index_rows():
        for commit in row["commit"].split(", "):
            assert re.fullmatch(r"[0-9a-f]{7,12}", commit), (row["study"], commit)


def test_no_absolute_machine_path_in_any_text_file():
    found = {}
    for path in text_files():
        hits = absolute_paths(path.read_text(encoding="utf-8"))
        if hits:
            found[str(path.relative_to(RESULTS))] = hits[:3]
    assert found == {}


def test_the_path_check_finds_what_it_should_and_only_that():
    assert absolute_paths("model /work/main/outputs/x and <home>/.cache") == ["/work/main/outputs/x"]
    assert absolute_paths('"model": "/root/.cache/openmanus_rl/models/m"') == ["/root/.cache/openmanus_rl/models/m"]
    assert absolute_paths("method=file:///tmp/vllm_dist_1 PATH=/a/bin:/opt/x/bin") == ["/tmp/vllm_dist_1", "/opt/x/bin"]
    assert absolute_paths("see https://example.org/tmp/x and docs/results/tmp/y and <tmp>/ckpt/global_step_3") == []
    assert absolute_paths("#!/usr/bin/env bash\n/usr/bin/time -v cmd > /dev/null") == []
    assert absolute_paths("/usr/lib/python3/x.py") == ["/usr/lib/python3/x.py"]
