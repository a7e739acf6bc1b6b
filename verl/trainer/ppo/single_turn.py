"""`SingleTurnRollout`: one generation per prompt for verl-format datasets (no environment server).

Input ``tasks``: a `DataProto` whose non-tensors are the dataset columns; ``prompt`` (chat messages,
a list or numpy array of ``{"role", "content"}`` dicts) is required, ``data_source``, ``ability``,
``reward_model`` (with ``ground_truth``), ``extra_info`` and any other column are carried along.

Output, ``len(tasks) * n`` rows (the copies of a row adjacent, sharing one fresh ``uid``):

* tensors: ``prompts``, ``responses``, ``input_ids``, ``attention_mask``, ``position_ids``,
  ``response_mask`` (1 on every generated token; `verl.utils.batch.pack_sequences`) and
  ``rollout_log_probs`` (the engine's log-probs, 0 on padding); no ``token_level_scores``:
  the reward path scores each response with the function registered for its ``data_source``;
* non-tensors: every dataset column unchanged, plus ``uid``, ``task_id`` (``extra_info["index"]``
  when present, else the row's position), ``seed``, ``failed`` (False), ``status`` (``done``, or
  ``truncated`` when stopped by length), ``num_turns`` (1), ``success`` (None: the reward path decides),
  ``env_reward`` (0.0);
* ``meta_info["metrics"]``: ``rollout/*`` counts and ``timing_s/*``.

Conventions of the multi-turn agent: the exact sampled ids are kept (never re-tokenised), copy
``c`` of a row at step ``global_step`` is seeded with ``trajectory_seed(seed, global_step, task, c)``, ``task``
naming the row by ``extra_info["index"]`` or else by its prompt (never by its place in the batch),
and the end-of-turn (eos) token is a stop token; a response ends at its first end-of-turn token.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from verl.protocol import DataProto
from verl.trainer.ppo.rollout import RolloutPlugin
from verl.utils.batch import pack_sequences
from verl.utils.jsonl import write_jsonl
from verl.utils.seeding import task_keys, trajectory_seed
from verl.utils.yaml_defaults import yaml_value
from verl.workers.rollout.base import Sampling

GENERATED_COLUMNS = ("uid", "task_id", "seed", "failed", "status", "num_turns", "success", "env_reward")


def _objects(values: list[Any]) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        arr[i] = value
    return arr


def _messages(prompt: Any, row: int) -> list[dict[str, Any]]:
    """A row's chat messages as plain dicts (parquet gives a numpy array of dicts, with None for absent keys)."""
    if not isinstance(prompt, (list, tuple, np.ndarray)) or not all(isinstance(m, Mapping) for m in prompt):
        raise TypeError(f"row {row}: 'prompt' must be a list of chat messages (dicts), got {type(prompt).__name__}")
    return [{k: v for k, v in m.items() if v is not None} for m in prompt]


def _task_name(prompt: Any, extra_info: Any) -> str:
    """What names a row for its seeds: ``index:<extra_info["index"]>``, else ``prompt:<digest of the prompt>``."""
    if isinstance(extra_info, Mapping) and extra_info.get("index") is not None:
        return f"index:{extra_info['index']}"
    text = json.dumps(prompt, sort_keys=True, default=str)
    return "prompt:" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _task_id(extra_info: Any, row: int) -> Any:
    if isinstance(extra_info, Mapping) and extra_info.get("index") is not None:
        return extra_info["index"]
    return row


class SingleTurnRollout:
    """Samples ``n`` responses per dataset row with ``generator`` (anything with
    ``generate_sequences(DataProto) -> DataProto``: the ActorRolloutRef worker group or an in-process worker),
    with ``sampling`` (in training, the rollout engine's). Unset limits and seed are ``ppo_trainer.yaml``'s."""

    def __init__(
        self,
        tokenizer: Any,
        generator: Any,
        sampling: Sampling,
        n: int = yaml_value("ppo_trainer", "agent.n"),
        max_prompt_length: int = yaml_value("ppo_trainer", "agent.max_prompt_length"),
        max_response_length: int = yaml_value("ppo_trainer", "agent.max_response_length"),
        seed: int = yaml_value("ppo_trainer", "trainer.seed"),
    ) -> None:
        if n < 1 or max_prompt_length < 1 or max_response_length < 1:
            raise ValueError(
                f"n={n}, max_prompt_length={max_prompt_length} and max_response_length="
                f"{max_response_length} must all be at least 1"
            )
        eot_id = tokenizer.convert_tokens_to_ids(tokenizer.eos_token) if tokenizer.eos_token else None
        if not isinstance(eot_id, int):
            raise ValueError("the tokenizer has no eos token to end a response")
        self.tokenizer, self.generator = tokenizer, generator
        self.n, self.max_prompt_length, self.max_response_length = n, max_prompt_length, max_response_length
        self.sampling, self.seed = sampling, seed
        self.eot_id = eot_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eot_id

    def prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        """The chat template with the assistant generation prompt, rendered then encoded once."""
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def run_llm_loop(
        self, tasks: DataProto, do_sample: bool = True, global_step: int = 0, output_dir: str | None = None
    ) -> DataProto:
        """Generate ``n`` responses per row (one, greedy, when ``do_sample`` is False); see the module docstring."""
        start = time.perf_counter()
        nt = tasks.non_tensor_batch
        if "prompt" not in nt:
            raise ValueError(f"tasks need a non-tensor 'prompt' column (chat messages); have {sorted(nt)}")
        clash = [c for c in GENERATED_COLUMNS if c in nt]
        if clash:
            raise ValueError(f"dataset columns {clash} clash with the columns the rollout adds")
        rows, n = len(tasks), self.n if do_sample else 1
        if rows == 0:
            raise ValueError("tasks is empty")
        prompts = []
        for row in range(rows):
            ids = self.prompt_ids(_messages(nt["prompt"][row], row))
            if len(ids) > self.max_prompt_length:
                raise ValueError(
                    f"row {row}: prompt is {len(ids)} tokens, above max_prompt_length={self.max_prompt_length}"
                )
            prompts.append(ids)
        order = [(row, copy) for row in range(rows) for copy in range(n)]
        sample_prompts = [prompts[row] for row, _ in order]
        extra = nt.get("extra_info")
        keys = task_keys(_task_name(nt["prompt"][row], None if extra is None else extra[row]) for row in range(rows))
        seeds = [trajectory_seed(self.seed, global_step, keys[row], copy) for row, copy in order]
        request = DataProto.from_dict(
            non_tensors={"prompt_ids": _objects(sample_prompts), "seed": _objects(seeds)},
            meta_info={
                **asdict(self.sampling),
                "max_tokens": self.max_response_length,
                "stop_token_ids": [self.eot_id],
                "do_sample": do_sample,
            },
        )
        gen_start = time.perf_counter()
        responses, log_probs, statuses = self._responses(self.generator.generate_sequences(request), len(order))
        generation = time.perf_counter() - gen_start

        tensors = pack_sequences(sample_prompts, responses, pad_id=self.pad_id)
        tensors["rollout_log_probs"] = torch.zeros(tensors["responses"].shape, dtype=torch.float32)
        for b, lps in enumerate(log_probs):
            tensors["rollout_log_probs"][b, : len(lps)] = torch.tensor(lps, dtype=torch.float32)
        uids = [str(uuid.uuid4()) for _ in range(rows)]
        non_tensors = {key: np.repeat(values, n, axis=0) for key, values in nt.items()}
        non_tensors.update(
            {
                "uid": _objects([uids[row] for row, _ in order]),
                "task_id": _objects([_task_id(None if extra is None else extra[row], row) for row, _ in order]),
                "seed": _objects(seeds),
                "failed": _objects([False] * len(order)),
                "status": _objects(statuses),
                "num_turns": _objects([1] * len(order)),
                "success": _objects([None] * len(order)),  # no env verdict: the reward path decides
                "env_reward": _objects([0.0] * len(order)),
            }
        )
        out = DataProto.from_dict(tensors, non_tensors)
        if output_dir is not None:
            self._write_records(out, sample_prompts, responses, output_dir, global_step)
        lengths = [len(r) for r in responses]
        out.meta_info["metrics"] = {
            "rollout/trajectories": float(len(order)),
            "rollout/generated_tokens": float(sum(lengths)),
            "rollout/response_length/mean": float(np.mean(lengths)),
            "rollout/prompt_length/mean": float(np.mean([len(p) for p in prompts])),
            "rollout/truncated_trajectories": float(statuses.count("truncated")),
            "timing_s/generation": generation,
            "timing_s/rollout_total": time.perf_counter() - start,
        }
        return out

    def _responses(self, reply: DataProto, expected: int) -> tuple[list[list[int]], list[list[float]], list[str]]:
        """Each reply's ids and log-probs, cut after the first end-of-turn token, and its status."""
        nt = reply.non_tensor_batch
        ids, log_probs, reasons = nt["response_ids"], nt["response_log_probs"], nt["finish_reason"]
        if not len(ids) == len(log_probs) == len(reasons) == expected:
            raise RuntimeError(f"generator answered {len(ids)} rows for {expected} prompts")
        responses, lps, statuses = [], [], []
        for i in range(expected):
            row_ids, row_lps = [int(x) for x in ids[i]], [float(x) for x in log_probs[i]]
            if len(row_ids) > self.max_response_length or len(row_lps) != len(row_ids):
                raise RuntimeError(
                    f"generator returned {len(row_ids)} tokens and {len(row_lps)} log-probs "
                    f"(max_tokens={self.max_response_length})"
                )
            stopped = str(reasons[i]) != "length"
            if self.eot_id in row_ids:
                end = row_ids.index(self.eot_id) + 1
                row_ids, row_lps, stopped = row_ids[:end], row_lps[:end], True
            responses.append(row_ids)
            lps.append(row_lps)
            statuses.append("done" if stopped else "truncated")
        return responses, lps, statuses

    def _write_records(
        self, out: DataProto, prompts: list[list[int]], responses: list[list[int]], output_dir: str, global_step: int
    ) -> None:
        nt = out.non_tensor_batch
        sources = nt["data_source"] if "data_source" in nt else [None] * len(out)
        records = [
            {
                "global_step": global_step,
                "uid": nt["uid"][b],
                "data_source": sources[b],
                "seed": nt["seed"][b],
                "status": nt["status"][b],
                "prompt": self.tokenizer.decode(p),
                "response": self.tokenizer.decode(r, skip_special_tokens=True),
            }
            for b, (p, r) in enumerate(zip(prompts, responses))
        ]
        write_jsonl(records, Path(output_dir) / f"step_{global_step}.jsonl")


def _build(cfg: Any, tokenizer: Any, generator: Any, n: int) -> SingleTurnRollout:
    """Limits from the ``agent`` section (``max_prompt_length``, ``max_response_length``),
    sampling from the rollout engine's."""
    a = cfg.agent
    return SingleTurnRollout(
        tokenizer,
        generator,
        cfg.actor_rollout_ref.rollout.sampling,
        n=n,
        max_prompt_length=int(a["max_prompt_length"]),
        max_response_length=int(a["max_response_length"]),
        seed=cfg.trainer.seed,
    )


def _validate(cfg: Any) -> None:
    for key in ("n", "max_prompt_length", "max_response_length"):
        value = cfg.agent.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{key} must be an int >= 1, got {value!r}")


PLUGIN = RolloutPlugin(
    build=_build, validate=_validate, response_budget=lambda cfg: int(cfg.agent["max_response_length"])
)
