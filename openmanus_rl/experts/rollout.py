"""Playing experts: as the agent's generator (demonstrations) and directly over HTTP (their success rate).

* `ExpertGenerator` has the rollout worker's ``generate_sequences(DataProto)
  -> DataProto`` interface, so `OpenManusAgent` runs unchanged with an expert
  in place of the model: the agent builds prompts, truncates observations and
  lays out tokens with its own code, and its output batch is the SFT sample.
  Each request row is answered by the expert of its trajectory, found by the
  row's ``seed``: the agent sends turn ``t`` of a trajectory with
  ``turn_seed(s, t)``, so a row with seed ``x`` continues the trajectory that
  was answered with seed ``turn_seed(x', 1) == x`` on the previous turn, and a
  seed seen for the first time starts a new trajectory (a fresh expert, reset
  with that seed).  The expert reads the last observation out of the decoded
  prompt: exactly the (possibly truncated) text the model would see.  With
  several envs (``env_name="babyai,webshop"``, a mixed-env agent) a new
  trajectory gets the expert of the env whose instructions open its prompt.  The
  reply is the template-formatted text, tokenised, plus the end-of-turn token,
  with log-probs 0 and finish reason ``"stop"``.
* `evaluate_expert` plays tasks of a split over HTTP with `EnvClient` (no
  agent, no tokenizer unless ``max_obs_length`` asks for the agent's
  observation cut) and reports success rate and mean env reward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from agentgym.spec import load_object
from openmanus_rl.agent.chat import ChatFormat
from openmanus_rl.agent.openmanus_agent import turn_seed
from openmanus_rl.agent.output import objects, success
from openmanus_rl.agent.templates import get_action_template
from openmanus_rl.agent.trajectory import Trajectory
from openmanus_rl.envs import ENV_SPECS, EnvClient, EnvSpec, RetryPolicy, get_env_spec
from verl.protocol import DataProto

from .registry import Expert, get_expert, reply

FIRST_OBSERVATION_MARKER = "\n\nObservation:\n"  # `openmanus_agent.first_user_text` puts the observation after it


def split_task_ids(env_name: str, split: str) -> Sequence[int]:
    """The env task ids of ``split`` ("train", "dev" or "test"): those of the task list its spec names."""
    spec = get_env_spec(env_name)
    if not spec.tasks:
        raise ValueError(
            f"env {env_name!r} has no task list; envs with one: "
            f"{sorted(name for name, s in ENV_SPECS.items() if s.tasks)}"
        )
    return [task_id for task_id, _ in load_object(spec.tasks)(split)]


def last_observation(chat: ChatFormat, prompt_ids: list[int], first_turn: bool) -> str:
    """The last observation in a generation context, as the model sees it.

    On the first turn it is what follows the agent's ``"Observation:"`` line in the one user message; later, the
    content of the last user turn (between the chat template's observation head and tail).
    """

    def decode(ids: list[int]) -> str:
        return chat.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    text = decode(prompt_ids)
    tail = decode(chat.turn_tail_ids)
    if text.endswith(tail):
        text = text[: -len(tail)]
    if first_turn:
        at = text.find(FIRST_OBSERVATION_MARKER)
        if at < 0:
            raise ValueError("the first prompt has no 'Observation:' line; is it the agent's prompt?")
        return text[at + len(FIRST_OBSERVATION_MARKER) :]
    head = decode(chat.turn_head_ids)
    at = text.rfind(head)
    if at < 0:
        raise ValueError("no observation turn in this generation context")
    return text[at + len(head) :]


@dataclass
class ExpertTurn:
    observation: str
    reply: str
    action: str


class ExpertGenerator:
    """A stand-in for the rollout worker that answers every prompt with an expert's reply (see the module
    docstring).  ``expert_kwargs`` go to `get_expert`; ``episodes`` maps each trajectory's first seed to its
    turns (observation, reply, action), for inspection."""

    def __init__(
        self, tokenizer: Any, env_name: str, action_format: str, expert_kwargs: Mapping[str, Any] | None = None
    ) -> None:
        self.chat = ChatFormat(tokenizer)
        self.specs = {name.strip(): get_env_spec(name.strip()) for name in env_name.split(",")}
        self.template = get_action_template(action_format)
        self.env_name = env_name
        self.expert_kwargs = dict(expert_kwargs or {})
        self._waiting: dict[int, tuple[int, Expert, EnvSpec]] = {}  # next turn's seed -> (first seed, expert, env)
        self.episodes: dict[int, list[ExpertTurn]] = {}

    def reset(self) -> None:
        """Forget every trajectory (a new rollout may reuse seeds)."""
        self._waiting.clear()
        self.episodes.clear()

    def _env_of(self, prompt_text: str) -> EnvSpec:
        """The env whose instructions the first prompt holds (the only env, with one)."""
        if len(self.specs) == 1:
            return next(iter(self.specs.values()))
        for spec in self.specs.values():
            if spec.instructions in prompt_text:
                return spec
        raise ValueError(f"a first prompt holds the instructions of none of the envs {sorted(self.specs)}")

    def _expert_for(self, seed: int, prompt_ids: list[int]) -> tuple[int, Expert, EnvSpec, bool]:
        if seed in self._waiting:
            first, expert, spec = self._waiting.pop(seed)
            return first, expert, spec, False
        spec = self._env_of(self.chat.tokenizer.decode(prompt_ids))
        expert = get_expert(spec.name, **self.expert_kwargs)
        expert.reset(seed=seed)
        self.episodes[seed] = []
        return seed, expert, spec, True

    def reply_ids(self, reply: str, max_tokens: int) -> list[int]:
        ids = self.chat.encode(reply) + [self.chat.eot_id]
        if len(ids) > max_tokens:
            raise ValueError(
                f"the expert reply takes {len(ids)} tokens with its end-of-turn token, above "
                f"max_response_length={max_tokens}: {reply!r}"
            )
        return ids

    def generate_sequences(self, request: DataProto) -> DataProto:
        nt = request.non_tensor_batch
        max_tokens = int(request.meta_info.get("max_tokens", 1 << 30))
        out_ids: list[list[int]] = []
        for prompt, seed in zip(nt["prompt_ids"], nt["seed"]):
            ids = [int(x) for x in prompt]
            first, expert, spec, new = self._expert_for(int(seed), ids)
            observation = last_observation(self.chat, ids, first_turn=new)
            text = reply(expert, observation, self.template, spec)
            out_ids.append(self.reply_ids(text, max_tokens))
            self.episodes[first].append(ExpertTurn(observation, text, self.template.parse(text, spec).action or ""))
            self._waiting[turn_seed(int(seed), 1)] = (first, expert, spec)
        return DataProto.from_dict(
            non_tensors={
                "response_ids": objects(out_ids),
                "response_log_probs": objects([[0.0] * len(ids) for ids in out_ids]),
                "finish_reason": objects(["stop"] * len(out_ids)),
            }
        )


@dataclass
class ExpertScore:
    """An expert's results on ``task_ids``: per task its env reward, success and number of actions."""

    env_name: str
    split: str
    task_ids: list[int]
    rewards: list[float] = field(default_factory=list)
    successes: list[bool] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.rewards)

    @property
    def success_rate(self) -> float:
        return sum(self.successes) / self.n if self.n else 0.0

    @property
    def mean_reward(self) -> float:
        return sum(self.rewards) / self.n if self.n else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "env_name": self.env_name,
            "split": self.split,
            "n": self.n,
            "success_rate": self.success_rate,
            "mean_reward": self.mean_reward,
            "mean_steps": sum(self.steps) / self.n if self.n else 0.0,
        }


def evaluate_expert(
    env_name: str,
    split: str,
    n: int,
    server_url: str,
    expert_kwargs: Mapping[str, Any] | None = None,
    max_turns: int | None = None,
    task_ids: list[int] | None = None,
    max_obs_length: int | None = None,
    tokenizer: Any = None,
    request_timeout_s: float = 30.0,
) -> ExpertScore:
    """Play the first ``n`` tasks of ``split`` (or ``task_ids``) with the env's expert against the server at
    ``server_url`` (``http://host:port``), at most ``max_turns`` actions an episode (default: the env's cap,
    ``EnvSpec.max_turns``).

    Success is the agent's rule (`openmanus_rl.agent.output.success`: the last step's reward at least the spec's
    ``success_reward``, the episode's reward being its last step's).  With ``max_obs_length`` (and the model's
    ``tokenizer``) the expert sees each observation cut as the agent cuts it.  Each episode's expert is reset with
    the task id as its seed.
    """
    spec = get_env_spec(env_name)
    max_turns = spec.turn_cap(max_turns)
    ids = list(task_ids) if task_ids is not None else list(split_task_ids(env_name, split)[:n])
    chat = ChatFormat(tokenizer) if max_obs_length is not None else None
    if max_obs_length is not None and tokenizer is None:
        raise ValueError("max_obs_length needs the model's tokenizer")

    def seen(observation: str) -> str:
        if chat is None:
            return observation
        obs_ids, _ = chat.truncate(observation, max_obs_length)  # type: ignore[arg-type]
        return chat.tokenizer.decode(obs_ids)

    score = ExpertScore(env_name, split, ids)
    expert = get_expert(env_name, **dict(expert_kwargs or {}))
    client = EnvClient(spec, server_url.rstrip("/"), RetryPolicy(request_timeout_s, 2, 0.2))
    client.create()
    try:
        for task_id in ids:
            expert.reset(seed=task_id)
            trajectory = Trajectory(0, 0, f"expert-{task_id}", task_id, env_name, task_id)
            observation = client.reset(task_id)
            steps = 0
            for steps in range(1, max_turns + 1):  # noqa: B007 - steps is read after the loop
                result = client.step(expert.act(seen(observation)))
                trajectory.step_rewards.append(result.reward)
                observation = result.observation
                if result.done:
                    trajectory.status = "done"
                    break
            score.rewards.append(trajectory.env_reward)
            score.successes.append(success(trajectory, spec))
            score.steps.append(steps)
    finally:
        client.close()
    return score
