"""No arrow back up inside a package: in `verl`, `openmanus_rl` and `agentgym`, the graph of imports between
first-level parts (subpackages and top-level modules) has no cycle, so each part can be read, tested and
changed with only the parts below it.  (`tests/verl/test_engine_boundary.py` checks `verl`'s named layers.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from import_graph import runtime_imports

REPO = Path(__file__).resolve().parents[1]


def part_imports(root: Path) -> dict[str, set[str]]:
    """First-level part of ``root`` -> the other first-level parts it imports at run time (`runtime_imports`)."""
    package = root.name
    edges: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        me = path.relative_to(root).parts[0].removesuffix(".py")
        parts = {m.split(".")[1] for m in runtime_imports(path, root) if m.split(".")[0] == package and "." in m}
        edges.setdefault(me, set()).update(parts - {me})
    return edges


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (its parts in order, the first repeated at the end), or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


@pytest.mark.parametrize("package", ["verl", "openmanus_rl", "agentgym"])
def test_the_parts_of_a_package_import_each_other_without_a_cycle(package):
    edges = part_imports(REPO / package)
    assert len(edges) > 5  # the walk saw the package
    assert cycle(edges) is None


def test_relative_imports_count_and_a_cycle_is_named(tmp_path):
    root = tmp_path / "pkg"
    (root / "a").mkdir(parents=True)
    (root / "a" / "m.py").write_text("from ..b import x\nfrom . import sibling\n")
    (root / "b.py").write_text("import os\nfrom .c import y\n")
    (root / "c.py").write_text("from pkg.a.m import z\n")
    edges = part_imports(root)
    assert edges == {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert cycle(edges) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None
