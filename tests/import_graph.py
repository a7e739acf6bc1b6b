"""What a source file imports at run time, for the tests of the packages' import structure."""

from __future__ import annotations

import ast
from pathlib import Path


def runtime_imports(path: Path, root: Path | None = None) -> set[str]:
    """Absolute names of the modules ``path`` imports anywhere in it (function bodies included), except under
    ``if TYPE_CHECKING:`` (type hints only).  Relative imports are resolved when ``root`` (the package folder that
    holds ``path``) is given, and left out otherwise."""
    tree = ast.parse(path.read_text(), filename=str(path))
    type_only = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for sub in ast.walk(node)
    }
    here = (root.name, *path.relative_to(root).with_suffix("").parts[:-1]) if root is not None else ()
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level and here:
            base = list(here[: max(len(here) - node.level + 1, 1)])  # the package the dots name
            if node.module:
                names.add(".".join([*base, node.module]))
            else:
                names.update(".".join([*base, alias.name]) for alias in node.names)
    return names
