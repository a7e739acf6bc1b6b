"""`AgentConfig`: every knob of the rollout loop, constructible from a plain dict (``AgentConfig(**cfg)``).

Token budget (stated policy): the first prompt holds at most
``max_prompt_length`` tokens (its observation is cut to fit); the rest of a
trajectory (model turns and observation turns) holds at most
``B - max_prompt_length`` tokens, where ``B`` is ``max_trajectory_length``, or,
when that is None, the env's own ``EnvSpec.max_trajectory_length``
(`trajectory_budget`), so every row's response fits a response width
``T <= max over the run's envs of B - P`` (`response_budget`).  A new turn starts
only if its observation turn plus a full model turn (``max_response_length``
tokens and a possible appended end-of-turn token) fit in what is left;
otherwise the episode stops there and is marked truncated.  Each observation
is cut to ``max_obs_length`` tokens (the agent's own invalid-action feedback is not).

Step-wise mode (``history_window = k > 0``, for GiGPO-style training): each
turn is generated from the first prompt plus the exact tokens of the last
``k`` turns (model turn and the observation after it), and becomes its own
training row (that context as the prompt, the turn as the response).  The
budget then bounds each context: a turn starts only if its context plus a
full model turn fit in ``max_trajectory_length``.

Rollout mode (``rollout_mode``): ``async`` (each trajectory goes on to its
next turn as soon as its own reply and observation are back; needs a
generator with ``submit_generation`` / ``poll_generation``, like the rollout
worker) or ``sync`` (every turn is one batched generation call for all
running trajectories).  Both give the same per-trajectory token layout,
records and seeds.  ``max_in_flight`` = k > 0 (async only) runs at most k
trajectories at once, starting the next as soon as one finishes: a large
batch without waiting at each chunk's slowest episode, and with no more
sequences in the engine (and its KV cache) than k.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from verl.utils.node_labels import is_label_selector
from verl.utils.typed_config import defaults_from, handed
from verl.workers.rollout.base import Sampling

ROLLOUT_MODES = ("async", "sync")


def _plain(value: Any) -> Any:
    """OmegaConf containers (and any mapping / sequence) as plain dicts and lists."""
    if isinstance(value, Mapping) or (hasattr(value, "items") and hasattr(value, "keys")):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return [_plain(v) for v in value]
    return value


@dataclass
@defaults_from("ppo_trainer", "agent")
class AgentConfig:
    """The ``agent`` section of ``ppo_trainer.yaml``, typed; its defaults are the YAML's values. Its sampling is
    no key of the section: whoever builds the agent hands it in (`sampling`; in training the rollout engine's,
    ``actor_rollout_ref.rollout``)."""

    env_name: str  # one env, or several comma-separated ("babyai,webshop"; quote it in a Hydra
    # override: agent.env_name='babyai,webshop'): each row goes to the env its data_source names
    env_server_base: str
    env_ports: list[int]  # k envs: k equal runs, one per env, in order; [] when env_servers lists every env
    env_servers: dict[str, list[str]] | None  # env -> server URLs on any host (never started or restarted by us)
    max_turns: int | None  # None: each env's own cap (EnvSpec.max_turns); an int caps every env
    max_prompt_length: int
    max_response_length: int  # per model turn
    max_obs_length: int  # per observation
    max_trajectory_length: int | None  # prompt + all turns; None: each env's own budget (EnvSpec.max_trajectory_length)
    n: int  # rollouts per task (the GRPO group)
    action_format: str  # "react" | "xml" | "tool_call" (a registered `ActionTemplate`)
    concurrency: int  # threads for env calls
    request_timeout_s: float
    episode_timeout_s: float  # an agent program's episode (the gateway) running longer is a failed trajectory
    env_retries: int  # retries of a connection error / 5xx
    env_retry_backoff_s: float
    env_cooldown_s: float  # how long an unavailable server is skipped
    manage_servers: bool  # the trainer starts the env servers on env_ports and restarts any that dies or hangs
    server_nodes: dict[str, str] | None  # Ray node labels of the nodes that run the managed servers; None: this machine
    server_max_restarts: int  # failed restarts in a row before a server is given up (the run then stops)
    server_hang_s: float  # a server silent on its health check this long, or with an env call in flight
    # longer than this and request_timeout_s, is hung: killed and restarted
    reward_components: dict[str, Any]
    seed: int
    write_viewer: bool  # with an output_dir: an HTML viewer page beside each step's JSONL
    history_window: int  # 0: one row per trajectory; k > 0: step-wise, one row per turn, last k turns as context
    rollout_mode: str  # "async": no turn barrier between trajectories; "sync": one batched call per turn
    max_in_flight: int  # async: trajectories running at once, the next starting as one finishes; 0: all at once
    progress_every_s: float  # print "[rollout] k/n trajectories finished ..." this often; 0: never
    sampling: Sampling | None = handed(default=None)  # what every generation request carries; None: not handed in

    def __post_init__(self) -> None:
        self.env_ports = _plain(self.env_ports)
        if isinstance(self.env_ports, int):
            self.env_ports = [self.env_ports]
        self.reward_components = _plain(self.reward_components)
        self.env_servers = _plain(self.env_servers)
        self.server_nodes = _plain(self.server_nodes)

    @property
    def handed_sampling(self) -> Sampling:
        """`sampling`; ValueError when it was not handed in (the agent has no sampling of its own)."""
        if self.sampling is None:
            raise ValueError(
                "AgentConfig.sampling is not set: hand the agent its sampling (in training, the rollout engine's: "
                "actor_rollout_ref.rollout)"
            )
        return self.sampling

    @property
    def temperature(self) -> float:
        """The handed `sampling`'s (as `top_p` and `top_k`): what each generation request carries."""
        return self.handed_sampling.temperature

    @property
    def top_p(self) -> float:
        return self.handed_sampling.top_p

    @property
    def top_k(self) -> int:
        return self.handed_sampling.top_k

    @property
    def env_names(self) -> list[str]:
        """The envs of ``env_name``, in order."""
        return [name.strip() for name in self.env_name.split(",")]

    def ports_by_env(self) -> dict[str, list[int]]:
        """Each env's server ports: ``env_ports`` cut into one equal run per env, in ``env_names`` order."""
        names = self.env_names
        per_env = len(self.env_ports) // len(names)
        return {name: self.env_ports[i * per_env : (i + 1) * per_env] for i, name in enumerate(names)}

    @property
    def listed_servers(self) -> dict[str, list[str]]:
        """``env_servers`` as a dict (``{}`` when null), each URL without a trailing slash."""
        return {name: [url.rstrip("/") for url in urls] for name, urls in (self.env_servers or {}).items()}

    def servers_by_env(self) -> dict[str, list[str]]:
        """Each env's server URLs: its local ports on ``env_server_base`` (`ports_by_env`), then its ``env_servers``."""
        base = self.env_server_base.rstrip("/")
        listed = self.listed_servers
        return {
            name: [f"{base}:{port}" for port in ports] + listed.get(name, [])
            for name, ports in self.ports_by_env().items()
        }

    def turn_cap(self, env: str) -> int:
        """Model turns an episode of ``env`` may take: ``max_turns``,
        or the env's ``EnvSpec.max_turns`` when it is None."""
        from openmanus_rl.envs.specs import get_env_spec

        return get_env_spec(env).turn_cap(self.max_turns)

    def trajectory_budget(self, env: str) -> int:
        """Tokens a trajectory of ``env`` may hold, prompt included: ``max_trajectory_length``, or the env's
        ``EnvSpec.max_trajectory_length`` when it is None."""
        from openmanus_rl.envs.specs import get_env_spec

        return get_env_spec(env).token_budget(self.max_trajectory_length)

    @property
    def longest_trajectory(self) -> int:
        """The largest `trajectory_budget` over the run's envs: what the engine's context must hold."""
        return max(self.trajectory_budget(env) for env in self.env_names)

    @property
    def response_budget(self) -> int:
        """Tokens a trajectory may hold after its prompt, in the run's most generous env (the response width)."""
        return self.longest_trajectory - self.max_prompt_length

    def validate(self, where: str = "agent") -> None:
        """Raise ValueError naming the first bad field (``where``: the config section, for `from_dict`)."""
        from openmanus_rl.envs.specs import get_env_spec
        from openmanus_rl.rewards import RewardComposer

        from .templates import get_action_template

        names = self.env_names
        if not all(names) or len(set(names)) != len(names):
            raise ValueError(
                f"env_name must name one env or several distinct envs separated by commas, got {self.env_name!r}"
            )
        specs = [get_env_spec(name) for name in names]
        template = get_action_template(self.action_format)
        self._validate_env_servers()
        every_env_listed = set(names) <= set(self.env_servers or {})
        if (
            not isinstance(self.env_ports, list)
            or not (self.env_ports or every_env_listed)
            or not all(isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536 for p in self.env_ports)
        ):
            raise ValueError(
                f"env_ports must be a non-empty list of ports (1..65535; [] only when env_servers lists "
                f"every env), got {self.env_ports!r}"
            )
        if len(set(self.env_ports)) != len(self.env_ports):
            raise ValueError(f"env_ports lists a port twice: {self.env_ports!r}")
        if len(self.env_ports) % len(names):
            raise ValueError(
                f"env_ports must list the same number of ports for each of the {len(names)} envs "
                f"{names} (the first run of ports serves the first env, and so on), "
                f"got {len(self.env_ports)} ports"
            )
        if not self.env_server_base.startswith(("http://", "https://")):
            raise ValueError(f"env_server_base must start with http:// or https://, got {self.env_server_base!r}")
        for name, urls in self.servers_by_env().items():
            if twice := sorted({url for url in urls if urls.count(url) > 1}):
                raise ValueError(f"{name} server {twice[0]} is listed twice (env_server_base + env_ports, env_servers)")
        if self.manage_servers and self.env_server_base.rstrip("/") != "http://127.0.0.1":
            raise ValueError(
                f"manage_servers starts the servers on this machine (http://127.0.0.1), "
                f"but env_server_base is {self.env_server_base!r}"
            )
        if not is_label_selector(self.server_nodes):
            raise ValueError(
                f"server_nodes maps Ray node label names to string values (quote them), got {self.server_nodes!r}"
            )
        if self.server_nodes and not self.manage_servers:
            raise ValueError(
                f"server_nodes={self.server_nodes} says where the run starts its env servers: set "
                f"manage_servers=true (servers listed in env_servers are never started by the run)"
            )
        for name in ("max_turns", "max_prompt_length", "max_response_length", "max_obs_length", "n", "concurrency"):
            value = getattr(self, name)
            if name == "max_turns" and value is None:
                continue  # each env's own cap
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                allowed = " (or null: each env's own cap)" if name == "max_turns" else ""
                raise ValueError(f"{name} must be an int >= 1{allowed}, got {value!r}")
        if self.max_trajectory_length is not None and (
            not isinstance(self.max_trajectory_length, int) or isinstance(self.max_trajectory_length, bool)
        ):
            raise ValueError(
                f"max_trajectory_length must be an int (or null: each env's own budget), "
                f"got {self.max_trajectory_length!r}"
            )
        least = self.max_prompt_length + self.max_response_length + 1
        for name in names:
            budget = self.trajectory_budget(name)
            if budget < least:
                source = (
                    "max_trajectory_length"
                    if self.max_trajectory_length is not None
                    else f"{name}'s own max_trajectory_length (EnvSpec)"
                )
                raise ValueError(
                    f"{source} ({budget}) must leave room after max_prompt_length ({self.max_prompt_length}) for one "
                    f"model turn of max_response_length ({self.max_response_length}) plus its end-of-turn token: "
                    f"at least {least}"
                )
        if not isinstance(self.history_window, int) or isinstance(self.history_window, bool) or self.history_window < 0:
            raise ValueError(f"history_window must be an int >= 0 (0: trajectory mode), got {self.history_window!r}")
        if self.rollout_mode not in ROLLOUT_MODES:
            raise ValueError(f"rollout_mode must be one of {list(ROLLOUT_MODES)}, got {self.rollout_mode!r}")
        if not isinstance(self.max_in_flight, int) or isinstance(self.max_in_flight, bool) or self.max_in_flight < 0:
            raise ValueError(
                f"max_in_flight must be an int >= 0 (0: every trajectory at once), got {self.max_in_flight!r}"
            )
        if not isinstance(self.progress_every_s, (int, float)) or self.progress_every_s < 0:
            raise ValueError(
                f"progress_every_s must be a number >= 0 (0: no progress lines), got {self.progress_every_s!r}"
            )
        if self.max_in_flight and self.rollout_mode != "async":
            raise ValueError(
                f"max_in_flight={self.max_in_flight} applies to the async rollout (each trajectory on its "
                f"own), not rollout_mode={self.rollout_mode!r}: set it to 0 or use rollout_mode=async"
            )
        if not isinstance(self.server_max_restarts, int) or self.server_max_restarts < 0 or self.server_hang_s <= 0:
            raise ValueError(
                f"server_max_restarts must be an int >= 0 and server_hang_s > 0, "
                f"got {self.server_max_restarts!r} and {self.server_hang_s!r}"
            )
        if (
            self.request_timeout_s <= 0
            or self.env_retries < 0
            or self.env_retry_backoff_s < 0
            or self.env_cooldown_s < 0
        ):
            raise ValueError("request_timeout_s must be > 0 and env_retries, env_retry_backoff_s, env_cooldown_s >= 0")
        if not isinstance(self.reward_components, dict):
            raise ValueError(
                f"reward_components must be a mapping name -> weight or options, got {self.reward_components!r}"
            )
        for spec in specs:
            RewardComposer.from_config(self.reward_components, spec.name, [template.format_pattern])

    def _validate_env_servers(self) -> None:
        """Raise ValueError naming the first malformed ``env_servers`` entry."""
        if self.env_servers is None:
            return
        if not isinstance(self.env_servers, dict):
            raise ValueError(
                f"env_servers must map env names to lists of server URLs "
                f"({{webshop: [http://10.0.0.5:36001]}}), got {self.env_servers!r}"
            )
        for name, urls in self.env_servers.items():
            if name not in self.env_names:
                raise ValueError(f"env_servers.{name}: {name!r} is not an env of env_name {self.env_name!r}")
            if not isinstance(urls, list) or not urls:
                raise ValueError(f"env_servers.{name} must be a non-empty list of server URLs, got {urls!r}")
            for url in urls:
                if not _is_server_url(url):
                    raise ValueError(
                        f"env_servers.{name}: {url!r} is not a server URL "
                        f"(http:// or https://, a host, an optional port: http://10.0.0.5:36001)"
                    )


def _is_server_url(url: Any) -> bool:
    """Whether ``url`` is ``http(s)://host[:port][/path]``."""
    if not isinstance(url, str):
        return False
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0  # .port raises ValueError on a port out of range
    except ValueError:
        return False
    return (
        port_ok and parts.scheme in ("http", "https") and bool(parts.hostname) and not (parts.query or parts.fragment)
    )
