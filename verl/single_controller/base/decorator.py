"""How a worker-group call is spread over ranks and gathered back.

A worker method marked ``@register(dispatch_mode=Dispatch.X)`` becomes a method
of the `RayWorkerGroup` with the same name. The mode says how the driver's
arguments are split over the ranks and how the ranks' results come back:

* ``ONE_TO_ALL``: every rank gets the same arguments; a list of results (one per rank).
* ``ALL_TO_ALL``: every argument is a list of ``world_size`` items, rank r gets item r; a list of results.
* ``RANK_ZERO``: only rank 0 is called; its result.
* ``DP_COMPUTE_PROTO``: every `DataProto` argument is padded to a multiple of
  ``world_size`` and chunked (rank r gets chunk r; other arguments are
  broadcast); the ranks' `DataProto` results are concatenated and the padding
  removed. The result's ``meta_info`` is rank 0's.
* ``ROUTE_PROTO``: every `DataProto` argument's row goes to rank
  ``route % world_size`` (its ``route`` non-tensor column, so rows with the same
  route always meet the same rank; a rank may get no rows); other arguments are
  broadcast; the ranks' `DataProto` results are concatenated.
* ``ALL_TO_ALL_CONCAT``: every rank gets the same arguments; the ranks'
  `DataProto` results are concatenated (rank order).
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Callable

import numpy as np

from verl.protocol import DataProto

DISPATCH_ATTR = "_verl_dispatch"


class Dispatch(Enum):
    ONE_TO_ALL = "one_to_all"
    ALL_TO_ALL = "all_to_all"
    RANK_ZERO = "rank_zero"
    DP_COMPUTE_PROTO = "dp_compute_proto"
    ROUTE_PROTO = "route_proto"
    ALL_TO_ALL_CONCAT = "all_to_all_concat"


def register(
    dispatch_mode: Dispatch = Dispatch.ONE_TO_ALL, blocking: bool = True, concurrency_group: str | None = None
) -> Callable:
    """Mark a worker method as callable on the whole group (``blocking=False`` returns a future).

    ``concurrency_group``: where the group's actors were started with that concurrency
    group (`RayWorkerGroup` ``concurrency_groups``), the method runs on its own thread, beside
    calls of other groups (e.g. generation while the policy trains); otherwise one call at a time.
    """
    if not isinstance(dispatch_mode, Dispatch):
        raise TypeError(f"dispatch_mode must be a Dispatch, got {dispatch_mode!r}")

    def decorator(fn: Callable) -> Callable:
        setattr(
            fn, DISPATCH_ATTR, {"mode": dispatch_mode, "blocking": blocking, "concurrency_group": concurrency_group}
        )
        return fn

    return decorator


def split_args(mode: Dispatch, world_size: int, args: tuple, kwargs: dict) -> tuple[list[tuple], list[dict], int]:
    """Per-rank ``(args, kwargs)`` lists for ``mode``, plus the padding added (DP_COMPUTE_PROTO)."""
    if mode in (Dispatch.ONE_TO_ALL, Dispatch.RANK_ZERO, Dispatch.ALL_TO_ALL_CONCAT):
        n = 1 if mode is Dispatch.RANK_ZERO else world_size
        return [args] * n, [kwargs] * n, 0
    if mode is Dispatch.ALL_TO_ALL:
        for i, a in enumerate(list(args) + list(kwargs.values())):
            if not isinstance(a, (list, tuple)) or len(a) != world_size:
                raise ValueError(f"ALL_TO_ALL argument {i} must be a list of {world_size} items (one per rank)")
        per_args = [tuple(a[r] for a in args) for r in range(world_size)]
        per_kwargs = [{k: v[r] for k, v in kwargs.items()} for r in range(world_size)]
        return per_args, per_kwargs, 0
    if mode is Dispatch.ROUTE_PROTO:

        def routed(a: Any) -> list[Any]:
            if not isinstance(a, DataProto):
                return [a] * world_size
            ranks = np.asarray([int(r) % world_size for r in a.non_tensor_batch["route"]], dtype=np.int64)
            return [a[np.flatnonzero(ranks == rank)] for rank in range(world_size)]

        arg_parts = [routed(a) for a in args]
        kwarg_parts = {k: routed(v) for k, v in kwargs.items()}
        return (
            [tuple(p[r] for p in arg_parts) for r in range(world_size)],
            [{k: p[r] for k, p in kwarg_parts.items()} for r in range(world_size)],
            0,
        )
    if mode is Dispatch.DP_COMPUTE_PROTO:
        lengths = {len(a) for a in list(args) + list(kwargs.values()) if isinstance(a, DataProto)}
        if len(lengths) > 1:
            raise ValueError(f"DP_COMPUTE_PROTO needs DataProto arguments of one length, got {sorted(lengths)}")
        pad = 0

        def chunks(a: Any) -> list[Any]:
            nonlocal pad
            if not isinstance(a, DataProto):
                return [a] * world_size
            padded, pad = a.pad_to_divisor(world_size)
            return padded.chunk(world_size)

        arg_chunks = [chunks(a) for a in args]
        kwarg_chunks = {k: chunks(v) for k, v in kwargs.items()}
        per_args = [tuple(c[r] for c in arg_chunks) for r in range(world_size)]
        per_kwargs = [{k: c[r] for k, c in kwarg_chunks.items()} for r in range(world_size)]
        return per_args, per_kwargs, pad
    raise ValueError(f"unknown dispatch mode {mode}")


def collect(mode: Dispatch, results: list[Any], pad: int) -> Any:
    """Gather the ranks' results for ``mode``."""
    if mode is Dispatch.RANK_ZERO:
        return results[0]
    if mode in (Dispatch.ROUTE_PROTO, Dispatch.ALL_TO_ALL_CONCAT):
        if not all(isinstance(r, DataProto) for r in results):
            raise TypeError(
                f"{mode.name} methods must return DataProto on every rank, got {[type(r).__name__ for r in results]}"
            )
        return DataProto.concat(results)
    if mode is Dispatch.DP_COMPUTE_PROTO:
        if all(isinstance(r, DataProto) for r in results):
            merged = DataProto.concat(results)
            return merged.unpad(pad) if len(merged) else merged  # metric-only results have no rows
        if all(r is None for r in results):
            return None
        raise TypeError(
            "DP_COMPUTE_PROTO methods must return DataProto (or None) on every rank, "
            f"got {[type(r).__name__ for r in results]}"
        )
    return results
