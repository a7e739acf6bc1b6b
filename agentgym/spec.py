"""`EnvSpec`: everything about one environment that is not its server code, declared in ``agentgym/<env>/spec.toml``.

A spec file's keys are the fields below (`load_spec` reads it: lists become tuples, an unknown or missing key is an
error naming the file); its ``[[tools]]`` tables are the tools, each with ``name``, ``description``, ``action``
and ``[tools.properties.<argument>]`` JSON-schema tables (`agentgym.tools.EnvTool`).

* Wire details, for clients: ``family`` "A" names the env ``env_idx`` and
  ``/create`` answers a bare int; "B" names it ``id`` and answers ``{"id": n}``.
  ``prefix`` goes before every route. ``reset_field`` is the body key that carries
  the task id on ``/reset`` (with ``reset_extra`` added). An observation is read
  from the first answer key of ``observation_keys`` present
  (``reset_observation_keys`` for ``/reset``, joined with blank lines when
  several are present).
* What the model is told: ``instructions`` (task and action grammar, written
  for this project). ``action_pattern`` is a regex a bare reply (without an
  action marker) must fully match to be taken as an action. An env with
  ``accepts_answer`` takes a final answer; ``answer_template`` turns it into
  the env's action.  ``tools``: the env's actions as function tools (`agentgym.tools.EnvTool`), for the
  agent's ``tool_call`` action format; each tool writes the action string its call stands for.
* ``max_turns``: the agent's turn cap for this env when the run does not set
  one (``agent.max_turns: null``): enough for the expert's episodes on the
  train tasks, so that demonstrations and RL episodes are not cut short.
* ``max_trajectory_length``: the agent's token budget for one trajectory of this
  env (first prompt plus every turn after it) when the run does not set one
  (``agent.max_trajectory_length: null``), chosen so that the budget cuts at most
  5% of the expert's episodes (``scripts/budget_cuts.py`` measures it).
* ``demos_keep``: which expert episodes the warm start learns from: ``successful``
  ones, or ``progress``: every episode that scored above 0, for an env whose
  expert rarely finishes inside the turn cap (SciWorld: gold paths average 64
  actions, the cap is 20), where a cut episode is still a correct start.
* ``warm_start_sft``: SFT overrides (``key=value`` of ``verl/trainer/config/sft_trainer.yaml``) this env's
  warm start trains with, unless the run's own ``sft.*`` overrides set the same key (a warm start of several
  envs takes the ones they all declare). WebShop's demonstrations learn in one epoch at lr 2e-4 what two
  epochs at 1e-4 teach, in half the time; FrozenLake's do not (docs/performance.md, "One SFT epoch").
* ``reset_timeout_s``: how long a ``/reset`` may take on a busy server, for
  an env whose reset does real work one request at a time (ALFWorld loads its
  game, 1-2 s, one at a time per server: 32 episodes starting at once queue for
  up to a minute).  The client waits the larger of this and its request
  timeout for ``/reset``, and the trainer's supervisor does not take a queue of
  resets for a hung server.  None: the request timeout alone.
* The success rule: the episode's reward (the last step's ``reward_key``
  value) is at least ``success_reward``; ``reward_scale`` maps it to 0..1.
* ``replays``: the same task and the same actions give the same observations (every env
  here seeds its tasks), so an episode a crash interrupted resumes by replaying its journaled
  actions into a fresh env (`openmanus_rl.agent.journal`); False: such an episode starts over.
* ``probe_actions``: a few actions for benchmarks and load tests (``scripts/bench_env.py``), a mix of moves the
  env takes and words it must refuse.
* ``reward_score``: the reward module (by name, `verl.utils.reward_score`)
  that scores this env's rows; by default ``episode``, the episode's composed reward.
* Where the rest lives, as dotted paths loaded only when needed (so a spec
  loads without the env's heavy extra): ``app``, the module that serves the
  env (``DEFAULT_PORT``, ``add_arguments(parser)``, ``app_from_args(args)``);
  ``tasks``, ``"module:function"`` giving ``[(task id, instruction)]`` for a
  split (``train``, ``dev`` or ``test``, described by ``splits``); ``expert``,
  ``"module:factory"`` of the scripted expert that writes demonstrations.
  ``None`` where the env has no such piece yet.  ``extra``: the optional
  dependency set (``pyproject.toml``) the server needs beyond the base
  install, which ``scripts/setup.sh`` installs when asked (``OPENMANUS_EXTRAS``).
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping

from .tools import EnvTool

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib


@dataclass(frozen=True)
class EnvSpec:
    name: str
    family: Literal["A", "B"]
    reset_field: str
    instructions: str
    action_pattern: str = r".+"
    prefix: str = ""
    reset_extra: Mapping[str, Any] = field(default_factory=dict)
    observation_keys: tuple[str, ...] = ("observation", "state")
    reset_observation_keys: tuple[str, ...] | None = None
    reward_key: str = "reward"
    success_reward: float = 1.0
    reward_scale: float = 1.0
    accepts_answer: bool = False
    answer_template: str = "{}"
    tools: tuple[EnvTool, ...] = ()
    max_turns: int = 8
    max_trajectory_length: int = 3072
    demos_keep: Literal["successful", "progress"] = "successful"
    warm_start_sft: tuple[str, ...] = ()
    reset_timeout_s: float | None = None
    probe_actions: tuple[str, ...] = ()
    reward_score: str = "episode"
    replays: bool = True
    app: str | None = None
    tasks: str | None = None
    splits: str = ""
    expert: str | None = None
    extra: str | None = None

    @property
    def id_field(self) -> str:
        return "env_idx" if self.family == "A" else "id"

    def turn_cap(self, max_turns: int | None) -> int:
        """Model turns an episode may take: the run's ``max_turns`` (``agent.max_turns``), or this env's own cap
        when it is None."""
        return self.max_turns if max_turns is None else max_turns

    def token_budget(self, max_trajectory_length: int | None) -> int:
        """Tokens a trajectory may hold, prompt included: the run's ``max_trajectory_length``, or this env's own
        budget when it is None."""
        return self.max_trajectory_length if max_trajectory_length is None else max_trajectory_length


def load_spec(path: Path) -> EnvSpec:
    """The `EnvSpec` that the TOML file ``path`` declares (see the module docstring); ValueError naming the file
    and the problem for a file that is not TOML, an unknown or missing key, or a tool that does not hold together."""
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from None
    fields = dataclasses.fields(EnvSpec)
    unknown = sorted(set(data) - {f.name for f in fields})
    missing = [f.name for f in fields if f.name not in data and f.default is f.default_factory is dataclasses.MISSING]
    if unknown or missing:
        raise ValueError(f"{path}: unknown keys {unknown}, missing keys {missing}")
    try:
        tools = tuple(EnvTool(**tool) for tool in data.pop("tools", []))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: a [[tools]] table: {exc}") from None
    values = {key: tuple(value) if isinstance(value, list) else value for key, value in data.items()}
    return EnvSpec(**values, tools=tools)


def load_object(path: str) -> Any:
    """``"package.module:attribute"`` -> that attribute; ``"package.module"`` -> the module."""
    module, _, attribute = path.partition(":")
    obj = importlib.import_module(module)
    return getattr(obj, attribute) if attribute else obj
