"""Ray node labels as the config names them (``{node-type: gpu}``) and as ``ray.nodes()`` reports them.

Ray-free, so config checks can use it without importing Ray: the nodes are the dicts of ``ray.nodes()``
(``NodeID``, ``Alive``, ``Labels``, ``Resources``).
"""

from __future__ import annotations

from typing import Any, Iterable


def is_label_selector(value: Any) -> bool:
    """Whether ``value`` maps label names to string values (None, no selector, counts as one)."""
    return value is None or (
        isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    )


def carries(node: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether ``node`` is alive and has every label of ``labels``."""
    return bool(node.get("Alive")) and all(node.get("Labels", {}).get(k) == v for k, v in labels.items())


def user_labels(node: dict[str, Any]) -> dict[str, str]:
    """A node's labels without Ray's own (``ray.io/...``)."""
    return {k: v for k, v in node.get("Labels", {}).items() if not k.startswith("ray.io/")}


def describe(nodes: Iterable[dict[str, Any]], resources: Iterable[str] = ()) -> str:
    """``<id prefix> labels {...} [<amount> <resource>, ...]`` for each node, for error messages."""
    wanted = list(resources)

    def one(node: dict[str, Any]) -> str:
        amounts = ", ".join(f"{node['Resources'].get(r, 0.0):g} {r}" for r in wanted)
        return f"{node['NodeID'][:8]} labels {user_labels(node)}" + (f" {amounts}" if amounts else "")

    return "; ".join(one(n) for n in nodes)
