"""Ray-backed resource pools and worker groups.

`RayResourcePool` reserves, per node, one placement-group bundle per rank
(CPU cores, plus one GPU when ``use_gpu``); it never asks Ray for GPUs on a
box without them. With several nodes, or node labels to match, each node's
bundles go to a Ray node of their own that carries those labels (checked
before anything is reserved). `RayWorkerGroup` starts one Ray actor per rank inside those
bundles and exposes every ``@register``-ed worker method on the group, so the
driver calls ``group.update_actor(batch)`` as if it were one object.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError, RayTaskError
from ray.util.placement_group import PlacementGroup, placement_group, placement_group_table, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from verl.single_controller.base.decorator import DISPATCH_ATTR, Dispatch, collect, split_args
from verl.single_controller.base.worker import free_port
from verl.utils.node_labels import carries, describe


class ResourceError(RuntimeError):
    """The cluster cannot hold what a resource pool asks for."""


class WorkerError(RuntimeError):
    """A worker method raised; the message names the rank and carries its traceback."""


class RayResourcePool:
    """``process_on_nodes[i]`` ranks on node i, each with ``cpus_per_worker`` cores (and a GPU if ``use_gpu``).

    ``max_colocate_count`` worker groups may share the pool's bundles: each of
    their actors takes ``1 / max_colocate_count`` of a bundle. ``node_labels``:
    labels (Ray node labels, ``ray start --labels``) every node of the pool must
    carry. When there is more than one node or any label, node i is a distinct
    alive Ray node that has the labels and, in total, the resources of its ranks;
    `node_ids` says which, once placed.
    """

    def __init__(
        self,
        process_on_nodes: list[int],
        use_gpu: bool = False,
        cpus_per_worker: float = 1.0,
        max_colocate_count: int = 1,
        name_prefix: str = "verl_pool",
        placement_timeout_s: float = 60.0,
        node_labels: dict[str, str] | None = None,
    ):
        if not process_on_nodes or any(n <= 0 for n in process_on_nodes):
            raise ValueError(f"process_on_nodes must list positive counts, got {process_on_nodes}")
        if cpus_per_worker <= 0 or max_colocate_count < 1:
            raise ValueError(
                f"cpus_per_worker must be > 0 and max_colocate_count >= 1, got {cpus_per_worker}, {max_colocate_count}"
            )
        self.process_on_nodes = list(process_on_nodes)
        self.use_gpu = use_gpu
        self.cpus_per_worker = cpus_per_worker
        self.max_colocate_count = max_colocate_count
        self.name_prefix = name_prefix
        self.placement_timeout_s = placement_timeout_s
        self.node_labels = dict(node_labels or {})
        self.node_ids: list[str] = []  # the Ray node of each pool node, once placed
        self._pgs: list[PlacementGroup] | None = None

    @property
    def world_size(self) -> int:
        return sum(self.process_on_nodes)

    def _bundle(self) -> dict[str, float]:
        bundle = {"CPU": float(self.cpus_per_worker)}
        if self.use_gpu:
            bundle["GPU"] = 1.0
        return bundle

    def _check_capacity(self) -> None:
        total, available = ray.cluster_resources(), ray.available_resources()
        asks = {"CPU": self.world_size * self.cpus_per_worker}
        if self.use_gpu:
            asks["GPU"] = float(self.world_size)
        for resource, need in asks.items():
            have = available.get(resource, 0.0)
            if need > have + 1e-9:
                raise ResourceError(
                    f"resource pool '{self.name_prefix}' needs {need:g} {resource} "
                    f"({self.world_size} workers x {self.cpus_per_worker if resource == 'CPU' else 1:g} {resource} "
                    f"each) but Ray has {have:g} {resource} available ({total.get(resource, 0.0):g} in the cluster)"
                )

    def _target_nodes(self) -> list[str | None]:
        """The Ray node for each pool node: any node (None) for one node without labels; otherwise distinct alive nodes
        with the labels whose total resources hold that node's ranks, the largest first (`ResourceError` if too few)."""
        if len(self.process_on_nodes) == 1 and not self.node_labels:
            return [None]
        alive = [n for n in ray.nodes() if n.get("Alive")]
        matching = [n for n in alive if carries(n, self.node_labels)]
        matching.sort(key=lambda n: (-n["Resources"].get("GPU", 0.0), -n["Resources"].get("CPU", 0.0)))
        targets: list[str | None] = []
        used: set[str] = set()
        for count in self.process_on_nodes:
            need = {r: amount * count for r, amount in self._bundle().items()}
            fit = next(
                (
                    n
                    for n in matching
                    if n["NodeID"] not in used
                    and all(n["Resources"].get(r, 0.0) >= amount - 1e-9 for r, amount in need.items())
                ),
                None,
            )
            if fit is None:
                raise ResourceError(
                    f"resource pool '{self.name_prefix}' needs {len(self.process_on_nodes)} distinct node(s) with "
                    f"labels {self.node_labels or '{}'}, node i holding process_on_nodes[i] = {self.process_on_nodes} "
                    f"ranks of {self._bundle()}; found {len(targets)}. The cluster's alive nodes: "
                    f"{describe(alive, self._bundle())}"
                )
            used.add(fit["NodeID"])
            targets.append(fit["NodeID"])
        return targets

    def get_placement_groups(self) -> list[PlacementGroup]:
        """One STRICT_PACK placement group per node, created (and checked) on first use."""
        if self._pgs is not None:
            return self._pgs
        self._check_capacity()
        targets = self._target_nodes()
        pgs = []
        for node, (count, target) in enumerate(zip(self.process_on_nodes, targets)):
            bundles = [self._bundle() for _ in range(count)]
            pg = placement_group(
                bundles,
                strategy="STRICT_PACK",
                name=f"{self.name_prefix}_{node}_{uuid.uuid4().hex[:8]}",
                _soft_target_node_id=target,
                bundle_label_selector=[dict(self.node_labels)] * count if self.node_labels else None,
            )
            try:
                ray.get(pg.ready(), timeout=self.placement_timeout_s)
            except GetTimeoutError:
                remove_placement_group(pg)
                for made in pgs:
                    remove_placement_group(made)
                raise ResourceError(
                    f"resource pool '{self.name_prefix}': node {node} could not place {count} bundles of "
                    f"{self._bundle()} within {self.placement_timeout_s:g}s (no single node has that much free; "
                    f"available: {ray.available_resources()})"
                ) from None
            pgs.append(pg)
        self.node_ids = [placement_group_table(pg)["bundles_to_node_id"][0] for pg in pgs]
        if len(set(self.node_ids)) < len(self.node_ids):  # the soft target was not kept: a node was busy
            for made in pgs:
                remove_placement_group(made)
            raise ResourceError(
                f"resource pool '{self.name_prefix}': its {len(pgs)} nodes' bundles landed on Ray nodes "
                f"{[n[:8] for n in self.node_ids]}, not {len(pgs)} distinct ones (a node lacked free "
                f"resources; available: {ray.available_resources()})"
            )
        self._pgs = pgs
        return pgs

    def release(self) -> None:
        """Give the reserved bundles back to Ray."""
        for pg in self._pgs or []:
            remove_placement_group(pg)
        self._pgs = None
        self.node_ids = []


class RayClassWithInitArgs:
    """A worker class with the arguments its constructor gets on every rank."""

    def __init__(self, cls: type, *args: Any, **kwargs: Any):
        self.cls, self.args, self.kwargs = cls, args, kwargs


class WorkerGroupFuture:
    """Pending results of one group call; `get` gathers them by the dispatch mode."""

    def __init__(self, group: "RayWorkerGroup", method: str, mode: Dispatch, refs: list, pad: int):
        self.group, self.method, self.mode, self.refs, self.pad = group, method, mode, refs, pad

    def get(self) -> Any:
        results = []
        for rank, ref in enumerate(self.refs):
            try:
                results.append(ray.get(ref))
            except RayTaskError as exc:
                raise WorkerError(
                    f"{self.group.cls_name}.{self.method} failed on rank {rank} of {self.group.world_size}:\n{exc}"
                ) from None
            except RayError as exc:  # the actor died: killed, crashed, or stopped by Ray's memory monitor
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                raise WorkerError(
                    f"{self.group.cls_name} rank {rank} of {self.group.world_size} died during {self.method}: "
                    f"{type(exc).__name__}: {first}"
                ) from None
        return collect(self.mode, results, self.pad)


class RayWorkerGroup:
    """One Ray actor per rank of ``resource_pool``, running ``ray_cls_with_init``.

    Every method of the worker class decorated with ``@register`` is available
    on the group under the same name; ``env_vars`` are set in every rank.
    ``concurrency_groups`` (name -> threads) lets methods registered with one of
    those names run beside the actor's other calls; without it every call waits
    for the one before.
    """

    def __init__(
        self,
        resource_pool: RayResourcePool,
        ray_cls_with_init: RayClassWithInitArgs,
        name_prefix: str | None = None,
        env_vars: dict[str, str] | None = None,
        concurrency_groups: dict[str, int] | None = None,
    ):
        self.resource_pool = resource_pool
        self.cls_name = ray_cls_with_init.cls.__name__
        self.world_size = resource_pool.world_size
        self.concurrency_groups = dict(concurrency_groups or {})
        self._method_group: dict[str, str] = {}  # method -> the concurrency group its calls run in
        self._modes: dict[str, Dispatch] = {}  # method -> its registered dispatch mode
        self._actors: list = []
        self._start(ray_cls_with_init, name_prefix or self.cls_name, env_vars or {})
        self._bind_methods(ray_cls_with_init.cls)

    def _start(self, spec: RayClassWithInitArgs, name_prefix: str, env_vars: dict[str, str]) -> None:
        pool = self.resource_pool
        share = 1.0 / pool.max_colocate_count
        remote_cls = (
            ray.remote(concurrency_groups=self.concurrency_groups)(spec.cls)
            if self.concurrency_groups
            else ray.remote(spec.cls)
        )
        master_addr, master_port = None, None
        rank = 0
        for pg in pool.get_placement_groups():
            for bundle_index in range(pg.bundle_count):
                env = {
                    **env_vars,
                    "RANK": str(rank),
                    "WORLD_SIZE": str(self.world_size),
                    "LOCAL_RANK": str(bundle_index),
                    "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled"),
                }
                if master_addr is not None:
                    env.update(MASTER_ADDR=master_addr, MASTER_PORT=str(master_port))
                options = {
                    "num_cpus": pool.cpus_per_worker * share,
                    "num_gpus": share if pool.use_gpu else 0,
                    "scheduling_strategy": PlacementGroupSchedulingStrategy(
                        placement_group=pg, placement_group_bundle_index=bundle_index
                    ),
                    "runtime_env": {"env_vars": env},
                    "name": f"{name_prefix}_{rank}_{os.getpid()}_{id(self)}",
                }
                actor = remote_cls.options(**options).remote(*spec.args, **spec.kwargs)
                if rank == 0:
                    master_addr, master_port = ray.get(actor.__ray_call__.remote(_claim_master))
                self._actors.append(actor)
                rank += 1

    def _bind_methods(self, cls: type) -> None:
        for name in dir(cls):
            fn = getattr(cls, name, None)
            spec = getattr(fn, DISPATCH_ATTR, None)
            if spec is None:
                continue
            if hasattr(RayWorkerGroup, name):
                raise ValueError(f"{cls.__name__}.{name} clashes with a RayWorkerGroup attribute; rename the method")
            if spec.get("concurrency_group") in self.concurrency_groups:
                self._method_group[name] = spec["concurrency_group"]
            self._modes[name] = spec["mode"]
            setattr(self, name, self._group_method(name, spec["mode"], spec["blocking"]))

    def _group_method(self, name: str, mode: Dispatch, blocking: bool):
        def call(*args: Any, **kwargs: Any) -> Any:
            future = self.execute(name, mode, *args, **kwargs)
            return future.get() if blocking else future

        call.__name__ = name
        return call

    def start(self, method: str, *args: Any, **kwargs: Any) -> WorkerGroupFuture:
        """Start the registered ``method`` on the ranks, dispatched as registered, without waiting, even where
        the method blocks when called: ``.get()`` on the future waits and raises what a rank raised."""
        return self.execute(method, self._modes[method], *args, **kwargs)

    def execute(self, method: str, mode: Dispatch, *args: Any, **kwargs: Any) -> WorkerGroupFuture:
        """Start ``method`` on the ranks as ``mode`` says; returns a future."""
        per_args, per_kwargs, pad = split_args(mode, self.world_size, args, kwargs)
        group = self._method_group.get(method)
        handles = [getattr(actor, method) for actor in self._actors]
        if group is not None:
            handles = [h.options(concurrency_group=group) for h in handles]
        refs = [h.remote(*a, **k) for h, a, k in zip(handles, per_args, per_kwargs)]
        return WorkerGroupFuture(self, method, mode, refs, pad)

    def pids(self) -> list[int]:
        """The process id of each rank's actor (for logs, and for fault drills that kill one)."""
        return ray.get([actor.__ray_call__.remote(_pid) for actor in self._actors])

    def node_ids(self) -> list[str]:
        """The Ray node each rank runs on, asked from inside the rank."""
        return ray.get([actor.__ray_call__.remote(_node_id) for actor in self._actors])

    def shutdown(self) -> None:
        """Stop every rank (calling its ``shutdown`` method first when it has one)."""
        for actor in self._actors:
            try:
                ray.get(actor.__ray_call__.remote(_shutdown_hook), timeout=60)
            except Exception:  # the actor may already be dead; killing it is all that is left
                pass
            ray.kill(actor)
        self._actors = []


def _claim_master(worker: Any) -> tuple[str, int]:
    """Runs inside rank 0: pick this node's address and a free port for the process group."""
    addr = ray.util.get_node_ip_address()
    port = free_port()
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = addr, str(port)
    if hasattr(worker, "master_addr"):
        worker.master_addr, worker.master_port = addr, port
    return addr, port


def _pid(worker: Any) -> int:
    return os.getpid()


def _node_id(worker: Any) -> str:
    return ray.get_runtime_context().get_node_id()


def _shutdown_hook(worker: Any) -> None:
    hook = getattr(worker, "shutdown", None)
    if callable(hook):
        hook()
