"""The multi-turn agent as the trainer's rollout
(``data.rollout=agent``, registered as a ``verl.rollouts`` entry point).

The engine hands over the whole config; the agent reads its ``agent`` section
(`AgentConfig`), is handed the rollout engine's sampling (``actor_rollout_ref.rollout``,
the run's one setting), and checks that its env servers answer before any worker starts. With
``agent.manage_servers`` it starts those servers itself, supervised
(`ServerSupervisor`: restarted when they die, stop answering for
``agent.server_hang_s``, or leave an env request in flight for the larger of
that, ``agent.request_timeout_s`` and the env's ``reset_timeout_s``; on a free port when another
process took theirs, which the agent's client pools follow through the
driver's `ADDRESSES`), logging under ``<output_dir>/env_logs``. Servers listed in
``agent.env_servers`` (any host) are never started or restarted: the preflight
names every one that does not answer, and the trainer waits on them
(`ServerWatch`), stopping with each URL's last error once none of an env's
servers answers. With ``agent.server_nodes`` (Ray node labels) the managed
servers run on the Ray nodes carrying those labels instead, each node's
supervised by an actor there (`openmanus_rl.envs.server_host`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl.trainer.ppo.rollout import RolloutPlugin
from verl.utils.typed_config import ConfigError, from_dict

from ..envs.pool import check_servers
from ..envs.remote import ServerWatch, silent_servers
from ..envs.server_host import remote_supervisors
from ..envs.supervisor import ServerSupervisor, SupervisorGroup
from .config import AgentConfig
from .openmanus_agent import OpenManusAgent


def agent_config(cfg: Any, n: int) -> AgentConfig:
    """The ``agent`` section with ``n`` rollouts per task, handed the rollout engine's sampling."""
    return AgentConfig(**{**cfg.agent, "n": n}, sampling=cfg.actor_rollout_ref.rollout.sampling)


def _build(cfg: Any, tokenizer: Any, generator: Any, n: int) -> OpenManusAgent:
    return OpenManusAgent(tokenizer, generator, agent_config(cfg, n))


def _validate(cfg: Any) -> None:
    """Types and keys of the ``agent`` section, `AgentConfig.validate`, then: the engine's context holds the
    longest trajectory budget."""
    agent = from_dict(AgentConfig, cfg.agent, "agent")
    rollout = cfg.actor_rollout_ref.rollout
    if agent.longest_trajectory > rollout.max_model_len:
        source = (
            "agent.max_trajectory_length"
            if agent.max_trajectory_length is not None
            else "the budget of "
            + " / ".join(f"{env} ({agent.trajectory_budget(env)})" for env in agent.env_names)
            + " (agent.max_trajectory_length: null takes each env's EnvSpec.max_trajectory_length)"
        )
        raise ConfigError(
            f"{source} allows trajectories of {agent.longest_trajectory} tokens, more than the engine's "
            f"context actor_rollout_ref.rollout.max_model_len={rollout.max_model_len}: raise "
            f"max_model_len or set agent.max_trajectory_length"
        )


def _preflight(cfg: Any) -> None:
    """`ConfigError` naming the first local server, or every ``env_servers`` URL, that does not answer."""
    agent = AgentConfig(**cfg.agent)
    try:
        for ports in agent.ports_by_env().values():
            check_servers(agent.env_server_base, ports)
    except ConnectionError as exc:
        raise ConfigError(str(exc)) from None
    listed = [url for urls in agent.listed_servers.values() for url in urls]
    if silent := silent_servers(listed):
        raise ConfigError(
            f'agent.env_servers: {len(silent)} of {len(listed)} servers do not answer GET / with "ok": '
            + "; ".join(f"{url} ({why})" for url, why in silent.items())
            + ". Start them on their hosts (the run never starts a listed server) or drop them from the list"
        )


def stuck_request_s(agent: AgentConfig, env: str) -> float:
    """How old an env call may get before its server counts as hung: the larger of ``server_hang_s``, the
    request timeout and the env's ``reset_timeout_s`` (a queue of resets is not a hang)."""
    from ..envs.specs import get_env_spec

    return max(agent.server_hang_s, agent.request_timeout_s, get_env_spec(env).reset_timeout_s or 0.0)


def _start(cfg: Any, output_dir: Path) -> SupervisorGroup | None:
    """The supervised local servers (``manage_servers``) and the watch on the envs with ``env_servers``, or None."""
    agent = AgentConfig(**cfg.agent)
    supervisors: list = []
    for env, ports in agent.ports_by_env().items() if agent.manage_servers else ():
        if not ports:
            continue
        policy = {
            "max_restarts": agent.server_max_restarts,
            "hang_s": agent.server_hang_s,
            "stuck_request_s": stuck_request_s(agent, env),
        }
        if agent.server_nodes:
            try:
                supervisors += remote_supervisors(
                    env, ports, agent.server_nodes, output_dir / "env_logs", agent.env_server_base, policy
                )
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        else:
            supervisors.append(ServerSupervisor(env, ports, output_dir / "env_logs", **policy))
    watched = {env: urls for env, urls in agent.servers_by_env().items() if env in agent.listed_servers}
    if not supervisors and not watched:
        return None
    group = SupervisorGroup(supervisors, ServerWatch(watched) if watched else None)
    try:
        return group.start()
    except RuntimeError as exc:
        raise ConfigError(f"could not start the {agent.env_name} servers: {exc}") from None


PLUGIN = RolloutPlugin(
    build=_build,
    validate=_validate,
    preflight=_preflight,
    start=_start,
    response_budget=lambda cfg: AgentConfig(**cfg.agent).response_budget,
)
