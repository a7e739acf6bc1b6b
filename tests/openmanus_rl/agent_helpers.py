"""Test doubles and builders for the agent tests: a scripted generator, dataset batches, the toy counter env."""

from __future__ import annotations

from typing import Any, Callable

from openmanus_rl.envs import EnvSpec, register_env
from verl.protocol import DataProto
from verl.workers.rollout.base import Sampling

PLAIN = Sampling(temperature=1.0, top_p=1.0, top_k=-1)  # the model's own distribution: what the tests' agents sample

Reply = tuple[list[int], str]  # sampled ids and finish reason


class ScriptedGenerator:
    """``generate_sequences`` answering each row with ``policy(prompt_ids, seed)``;
    every token gets log-prob ``log_prob``.

    ``calls`` records each call's rows (prompt ids, seeds) and meta_info; ``before_call(i)``
    runs before call ``i`` answers (fault injection).
    """

    def __init__(
        self,
        policy: Callable[[list[int], int], Reply],
        log_prob: float = -0.25,
        before_call: Callable[[int], None] | None = None,
    ) -> None:
        self.policy = policy
        self.log_prob = log_prob
        self.before_call = before_call
        self.calls: list[dict[str, Any]] = []

    def generate_sequences(self, data: DataProto) -> DataProto:
        prompts = [list(p) for p in data.non_tensor_batch["prompt_ids"]]
        seeds = [int(s) for s in data.non_tensor_batch["seed"]]
        self.calls.append({"prompts": prompts, "seeds": seeds, "meta_info": dict(data.meta_info)})
        if self.before_call is not None:
            self.before_call(len(self.calls) - 1)
        replies = [self.policy(p, s) for p, s in zip(prompts, seeds)]
        return DataProto.from_dict(
            non_tensors={
                "response_ids": [ids for ids, _ in replies],
                "response_log_probs": [[self.log_prob] * len(ids) for ids, _ in replies],
                "finish_reason": [reason for _, reason in replies],
            }
        )


def text_policy(tokenizer: Any, reply: Callable[[str], str], eot_id: int = 2) -> Callable[[list[int], int], Reply]:
    """A policy that reads the decoded prompt and answers ``reply(prompt_text)`` ending with the end-of-turn token."""

    def policy(prompt_ids: list[int], seed: int) -> Reply:
        return tokenizer.encode(reply(tokenizer.decode(prompt_ids)), add_special_tokens=False) + [eot_id], "stop"

    return policy


def task_batch(task_ids: list[int], data_source: str = "webshop", **extra: list[Any]) -> DataProto:
    """A batch shaped like the parquet dataset's rows."""
    return DataProto.from_dict(
        non_tensors={
            "data_source": [data_source] * len(task_ids),
            "extra_info": [{"index": i, "split": "test"} for i in task_ids],
            **extra,
        }
    )


class StreamingScriptedGenerator(ScriptedGenerator):
    """A `ScriptedGenerator` that also streams (``submit_generation`` / ``poll_generation`` /
    ``cancel_generation``): each poll answers every request submitted since the last one.
    ``submitted`` records ``(request_id, prompt ids, seed)`` in submission order."""

    def __init__(self, policy: Callable[[list[int], int], Reply], log_prob: float = -0.25) -> None:
        super().__init__(policy, log_prob)
        self.queue: list[tuple[str, list[int], int]] = []
        self.submitted: list[tuple[str, list[int], int]] = []
        self.meta_info: dict[str, Any] = {}
        self.cancelled = 0

    def submit_generation(self, data: DataProto) -> DataProto:
        nt = data.non_tensor_batch
        rows = [(str(r), list(p), int(s)) for r, p, s in zip(nt["request_id"], nt["prompt_ids"], nt["seed"])]
        self.queue += rows
        self.submitted += rows
        self.meta_info = dict(data.meta_info)
        return DataProto()

    def poll_generation(self, max_wait_s: float = 0.0) -> DataProto:
        rows, self.queue = self.queue, []
        replies = [self.policy(prompt, seed) for _, prompt, seed in rows]
        return DataProto.from_dict(
            non_tensors={
                "request_id": [r for r, _, _ in rows],
                "response_ids": [ids for ids, _ in replies],
                "response_log_probs": [[self.log_prob] * len(ids) for ids, _ in replies],
                "finish_reason": [reason for _, reason in replies],
            }
        )

    def cancel_generation(self) -> None:
        self.cancelled += 1
        self.queue = []


TOY_COUNTER = register_env(  # the env ``toy_server.py`` serves (the ``toy_server`` fixture)
    EnvSpec(
        name="toy-counter",
        family="B",
        reset_field="data_idx",
        instructions="Reach the target number by adding.",
        action_pattern=r"add \d+",
    ),
    replace=True,
)


def toy_counter_config(port: int, **overrides: Any) -> dict[str, Any]:
    """The agent's config on the toy counter server at ``port``: 5 turns, short replies and observations."""
    return {
        "env_name": "toy-counter",
        "env_ports": [port],
        "max_turns": 5,
        "max_prompt_length": 256,
        "max_response_length": 16,
        "max_obs_length": 32,
        "max_trajectory_length": 512,
        "sampling": PLAIN,
        **overrides,
    }


SMALL_AGENT = {  # the agent limits the tiny-engine rollout tests share: 2 samples, 3 turns, short replies
    "n": 2,
    "max_turns": 3,
    "max_response_length": 24,
    "max_obs_length": 64,
    "max_prompt_length": 512,
    "max_trajectory_length": 768,
    "sampling": PLAIN,
}
