"""Env servers on other Ray nodes, supervised there: ``agent.server_nodes``.

    supervisors = remote_supervisors("webshop", [36001, 36002], {"role": "env"}, log_dir, "http://127.0.0.1")

`remote_supervisors` deals an env's ports round-robin to the alive Ray nodes that carry the labels and starts, on
each such node, one `ServerHost` actor (pinned there) that runs a `ServerSupervisor` for its ports: the same start,
health checks, hang detection, back-off and give-up as a local supervisor, run next to the servers. Each server binds
every interface and answers at ``http://<node ip>:<port>``. `RemoteSupervisor` is the driver's handle on one host,
with the supervisor's interface (`SupervisorGroup` holds it like a local one). The agent knows each server by its
configured URL (``agent.env_server_base`` + port); the handle records in the driver's address book (`ADDRESSES`)
where that URL answers, at start and again whenever a restart there moved a server to another port (read at each
`wait_ready` and `metrics` call, so before every training step). A host that is gone (its node died) is a `problem`:
the trainer checkpoints and stops. Each node writes its servers' logs under ``log_dir`` on its own disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl.utils.node_labels import carries, describe

from .addresses import ADDRESSES, ServerAddresses
from .supervisor import ServerSupervisor, _say

CLOSE_TIMEOUT_S = 60.0


class ServerHost:
    """Runs inside a Ray actor on one node: a `ServerSupervisor` for ``ports`` there, binding every interface."""

    def __init__(self, env: str, ports: list[int], log_dir: str, policy: dict[str, float]) -> None:
        import ray

        self.node_ip = ray.util.get_node_ip_address()
        self.addresses = ServerAddresses()  # moves on this node; the driver reads them through `moves`
        self.supervisor = ServerSupervisor(
            env, ports, Path(log_dir), addresses=self.addresses, host="0.0.0.0", advertise=self.node_ip, **policy
        )

    def start(self) -> list[str]:
        """Start the servers (each healthy, or `RuntimeError`); where each answers, in port order (a server whose
        port was taken starts on a free one)."""
        self.supervisor.start()
        return self.moves()

    def moves(self) -> list[str]:
        """Where each server answers now, in port order (its URL as started unless a restart moved it)."""
        return [self.addresses.resolve(home) for home in self.supervisor.homes()]

    def pids(self) -> list[int]:
        return self.supervisor.pids()

    def wait_ready(self, timeout_s: float) -> str | None:
        return self.supervisor.wait_ready(timeout_s)

    def problem(self) -> str | None:
        return self.supervisor.problem()

    def metrics(self) -> dict[str, float]:
        return self.supervisor.metrics()

    def close(self) -> None:
        self.supervisor.close()


class RemoteSupervisor:
    """The driver's handle on a `ServerHost` on Ray node ``node_id``: `ServerSupervisor`'s interface.

    ``configured`` are the URLs the agent knows the servers by (one per port); ``policy`` the supervisor's
    keyword arguments (``max_restarts``, ``hang_s``, ``stuck_request_s``, ...).
    """

    def __init__(
        self,
        env: str,
        ports: list[int],
        node_id: str,
        log_dir: Path,
        configured: list[str],
        policy: dict[str, float],
        addresses: ServerAddresses = ADDRESSES,
    ) -> None:
        if len(configured) != len(ports):
            raise ValueError(f"{len(ports)} ports but {len(configured)} configured URLs")
        self.env, self.ports, self.node_id, self.log_dir = env, list(ports), node_id, log_dir
        self.configured, self.policy, self.addresses = list(configured), dict(policy), addresses
        self._actor: Any = None
        self._gone: str | None = None

    def start(self) -> "RemoteSupervisor":
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        host = ray.remote(ServerHost).options(
            num_cpus=0, max_concurrency=4, scheduling_strategy=NodeAffinitySchedulingStrategy(self.node_id, soft=False)
        )
        self._actor = host.remote(self.env, self.ports, str(self.log_dir), self.policy)
        try:
            urls = ray.get(self._actor.start.remote())
        except ray.exceptions.RayError as exc:
            self.close()
            raise RuntimeError(
                f"{self.env} servers on Ray node {self.node_id[:8]} did not start: {_summary(exc)}"
            ) from None
        for configured, url in zip(self.configured, urls):
            self.addresses.move(configured, url)
            _say(f"{self.env} server {configured} runs on Ray node {self.node_id[:8]} at {url}")
        return self

    def _call(self, method: str, *args: Any) -> Any:
        """``method`` on the host; a host that is gone sets `problem` and gives None."""
        import ray

        if self._gone is not None:
            return None
        try:
            return ray.get(getattr(self._actor, method).remote(*args))
        except ray.exceptions.RayError as exc:
            self._gone = (
                f"the {self.env} server host on Ray node {self.node_id[:8]} (ports {self.ports}) is gone: "
                f"{_summary(exc)}"
            )
            return None

    def _follow_moves(self) -> None:
        urls = self._call("moves")
        for configured, url in zip(self.configured, urls or []):
            self.addresses.move(configured, url)

    def wait_ready(self, timeout_s: float) -> str | None:
        problem = self._call("wait_ready", timeout_s)
        self._follow_moves()
        return self._gone or problem

    def problem(self) -> str | None:
        problem = self._call("problem")
        return self._gone or problem

    def metrics(self) -> dict[str, float]:
        self._follow_moves()
        return self._call("metrics") or {}

    def pids(self) -> list[int]:
        return self._call("pids") or []

    def close(self) -> None:
        import ray

        if self._actor is None:
            return
        try:
            ray.get(self._actor.close.remote(), timeout=CLOSE_TIMEOUT_S)
        except Exception:  # the host may be gone already: killing it is all that is left
            pass
        ray.kill(self._actor)
        self._actor = None
        for configured in self.configured:
            self.addresses.forget(configured)


def remote_supervisors(
    env: str,
    ports: list[int],
    labels: dict[str, str],
    log_dir: Path,
    base_url: str,
    policy: dict[str, float],
    addresses: ServerAddresses = ADDRESSES,
) -> list[RemoteSupervisor]:
    """One `RemoteSupervisor` per alive Ray node carrying ``labels`` (node order as Ray lists them), the ports dealt
    round-robin; nodes left without a port get none. `ValueError` naming the nodes when none carries the labels."""
    import ray

    alive = [n for n in ray.nodes() if n.get("Alive")]
    nodes = [n["NodeID"] for n in alive if carries(n, labels)]
    if not nodes:
        raise ValueError(
            f"agent.server_nodes {labels}: no alive Ray node carries these labels (nodes: {describe(alive)})"
        )
    dealt = {node: [port for i, port in enumerate(ports) if i % len(nodes) == k] for k, node in enumerate(nodes)}
    base = base_url.rstrip("/")
    return [
        RemoteSupervisor(env, node_ports, node, log_dir, [f"{base}:{port}" for port in node_ports], policy, addresses)
        for node, node_ports in dealt.items()
        if node_ports
    ]


def _summary(exc: BaseException) -> str:
    """The error's type and its last line (a Ray task error ends with the remote exception's message)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[-1] if text else ''}"
