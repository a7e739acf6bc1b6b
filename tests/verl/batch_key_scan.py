"""Finds every string key the code writes into a `DataProto`'s ``batch`` or ``non_tensor_batch`` (by reading the
source, not running it), for `tests/verl/test_batch_keys.py`.

A key counts as written where it is
* stored by subscript: ``x.batch["k"] = ...``, ``x.non_tensor_batch["k"] = ...``, or through a name bound to one
  of those (``b = batch.batch``; ``b["k"] = ...``), or ``.update({"k": ...})`` / ``.update(k=...)`` on them;
* a literal key of a dict given to ``DataProto(...)``, ``DataProto.from_dict(...)`` or ``from_single_dict(...)``,
  directly, by a name bound to a dict in the same function (with its later ``name["k"] = ...`` stores), or through
  ``{**name}``;
* a literal key of the dicts a nested function returns to ``map_micro_batches`` when that result reaches a builder;
* a literal key of a dict returned by a module function or method annotated to return ``dict[str, torch.Tensor]`` or
  ``dict[str, np.ndarray]`` (columns built for a batch, e.g. ``pack_sequences``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from verl import batch_keys

FIELDS = ("batch", "non_tensor_batch")
NAMES = {name: value for name, value in vars(batch_keys).items() if name.isupper() and isinstance(value, str)}


def key_text(node: ast.AST | None) -> str | None:
    """A key expression's text: a string literal, or a `verl.batch_keys` constant (``K.OLD_LOG_PROBS``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("K", "batch_keys"):
        return NAMES.get(node.attr)
    return None


BUILDERS = ("DataProto", "from_dict", "from_single_dict")
COLUMN_RETURNS = ("dict[str, torch.Tensor]", "dict[str, np.ndarray]")


def _literal_keys(node: ast.AST, bound: dict[str, list[ast.AST]], seen: set[str]) -> list[tuple[str, int]]:
    """String keys of a dict expression: a literal (with ``**`` parts) or a name bound to dicts in the function."""
    if isinstance(node, ast.Dict):
        keys = []
        for key, value in zip(node.keys, node.values):
            if key is None:
                keys += _literal_keys(value, bound, seen)
            elif key_text(key) is not None:
                keys.append((key_text(key), key.lineno))
        return keys
    if isinstance(node, ast.DictComp):  # {k: f(v) for k, v in name.items()}: name's keys
        source = node.generators[0].iter
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and source.func.attr == "items":
            return _literal_keys(source.func.value, bound, seen)
        return []
    if isinstance(node, ast.Name) and node.id in bound and node.id not in seen:
        seen = seen | {node.id}
        return [k for value in bound[node.id] for k in _literal_keys(value, bound, seen)]
    return []


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """The nodes of ``fn``'s body, without those of functions nested in it."""
    nodes, todo = [], list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        nodes.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return nodes


def _mapped_columns(value: ast.AST, nested: dict[str, ast.FunctionDef]) -> list[ast.AST]:
    """``out = model.map_micro_batches(data, fn, ...)``: the dicts the nested ``fn`` returns (its columns)."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return []
    if value.func.attr != "map_micro_batches":
        return []
    fns = [nested[a.id] for a in value.args if isinstance(a, ast.Name) and a.id in nested]
    return [n.value for f in fns for n in _own_nodes(f) if isinstance(n, ast.Return) and n.value is not None]


def _function_keys(fn: ast.AST, top_level: bool) -> list[tuple[str, int]]:
    nested = {n.name: n for n in _own_nodes(fn) if isinstance(n, ast.FunctionDef)}
    aliases: set[str] = set()  # names bound to x.batch / x.non_tensor_batch
    bound: dict[str, list[ast.AST]] = {}  # names bound to dicts, with their later subscript stores
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = (
                    zip(target.elts, node.value.elts)
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                    else [(target, node.value)]
                )
                for name, value in pairs:
                    if not isinstance(name, ast.Name):
                        continue
                    if isinstance(value, ast.Attribute) and value.attr in FIELDS:
                        aliases.add(name.id)
                    elif isinstance(value, (ast.Dict, ast.DictComp)):
                        bound.setdefault(name.id, []).append(value)
                    else:  # e.g. tensors = pack_sequences(...): a column dict if it reaches a builder
                        bound.setdefault(name.id, []).extend(_mapped_columns(value, nested))
    for node in ast.walk(fn):  # stores into bound dicts: tensors["rollout_log_probs"] = ...
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name):
            if key_text(node.slice) is not None and node.value.id in bound:
                bound[node.value.id].append(ast.Dict(keys=[node.slice], values=[ast.Constant(0)]))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update":
            target = node.func.value  # non_tensors.update({...}) on a column dict
            if isinstance(target, ast.Name) and target.id in bound:
                bound[target.id] += [a for a in node.args if isinstance(a, ast.Dict)]
                bound[target.id] += [
                    ast.Dict(keys=[ast.Constant(k.arg)], values=[ast.Constant(0)]) for k in node.keywords if k.arg
                ]

    def is_batch(expr: ast.AST) -> bool:
        return (isinstance(expr, ast.Attribute) and expr.attr in FIELDS) or (
            isinstance(expr, ast.Name) and expr.id in aliases
        )

    keys: list[tuple[str, int]] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and is_batch(node.value):
            if key_text(node.slice) is not None:
                keys.append((key_text(node.slice), node.lineno))
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name == "update" and isinstance(func, ast.Attribute) and is_batch(func.value):
            keys += [(k.arg, node.lineno) for k in node.keywords if k.arg]
            for arg in node.args:
                keys += _literal_keys(arg, bound, set())
        builder = name == "DataProto" or (
            name in BUILDERS and isinstance(func, ast.Attribute) and ast.unparse(func.value) in ("DataProto", "cls")
        )
        if builder:
            for arg in [*node.args, *(k.value for k in node.keywords if k.arg != "meta_info")]:
                keys += _literal_keys(arg, bound, set())
    if (
        top_level
        and isinstance(fn, ast.FunctionDef)
        and fn.returns is not None
        and ast.unparse(fn.returns) in COLUMN_RETURNS
    ):
        for node in _own_nodes(fn):
            if isinstance(node, ast.Return) and node.value is not None:
                keys += _literal_keys(node.value, bound, set())
    return keys


def written_keys(roots: list[Path]) -> dict[str, list[str]]:
    """Each key written under ``roots`` (``*.py``), with the ``path:line`` places that write it."""
    found: dict[str, list[str]] = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            top = {id(n) for n in tree.body} | {
                id(n) for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body
            }  # module functions and methods, not nested helpers
            for fn in ast.walk(tree):
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for key, line in _function_keys(fn, id(fn) in top):
                        found.setdefault(key, []).append(f"{path}:{line}")
    return {key: sorted(set(places)) for key, places in sorted(found.items())}


def _reads(fn: ast.AST) -> list[tuple[str, int]]:
    aliases = {
        t.id
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr in FIELDS
        for t in node.targets
        if isinstance(t, ast.Name)
    }

    def is_batch(expr: ast.AST) -> bool:
        return (isinstance(expr, ast.Attribute) and expr.attr in FIELDS) or (
            isinstance(expr, ast.Name) and expr.id in aliases
        )

    keys = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and is_batch(node.value):
            keys.append((key_text(node.slice), node.lineno))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("get", "pop") and is_batch(node.func.value) and node.args:
                keys.append((key_text(node.args[0]), node.lineno))
            if node.func.attr in ("select", "pop"):
                for k in node.keywords:
                    if k.arg in ("batch_keys", "non_tensor_batch_keys") and isinstance(k.value, (ast.List, ast.Tuple)):
                        keys += [(key_text(e), node.lineno) for e in k.value.elts]
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            target = node.comparators[0]
            if isinstance(target, ast.Call) and isinstance(target.func, ast.Attribute) and target.func.attr == "keys":
                target = target.func.value
            if is_batch(target):
                keys.append((key_text(node.left), node.lineno))
    return [(k, line) for k, line in keys if k is not None]


def read_keys(roots: list[Path]) -> dict[str, list[str]]:
    """Each literal key read under ``roots`` from a ``batch`` / ``non_tensor_batch`` (subscript, ``get``, ``pop``,
    ``in``, ``select``), with its places."""
    found: dict[str, list[str]] = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for fn in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for key, line in _reads(fn):
                        found.setdefault(key, []).append(f"{path}:{line}")
    return {key: sorted(set(places)) for key, places in sorted(found.items())}
