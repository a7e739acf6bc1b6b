"""`SingleTurnRollout`: verl-format rows in, one generation per sample out.

Scripted-generator tests pin the layout (cut at end-of-turn, statuses, log-probs, metrics,
request settings); the engine tests drive an in-process HF rollout worker on the tiny model.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoTokenizer

from openmanus_rl.agent import trajectory_seed
from verl.protocol import DataProto
from verl.trainer.ppo.single_turn import SingleTurnRollout, _task_name
from verl.workers.rollout.base import Sampling

pytestmark = pytest.mark.in_process_engine

EOT = 2  # <|im_end|> in the SmolLM2 tokenizer
COLUMNS = ("data_source", "prompt", "ability", "reward_model", "extra_info", "notes")
PLAIN = Sampling(temperature=1.0, top_p=1.0, top_k=-1)  # the model's own distribution


def rows(k: int, **overrides: list[Any]) -> DataProto:
    """``k`` dataset rows in verl's format, plus an extra column ``notes``."""
    columns = {
        "data_source": [f"source{i}" for i in range(k)],
        "prompt": [
            [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": f"Question {i}: 2 + {i}?"}]
            for i in range(k)
        ],
        "ability": ["math"] * k,
        "reward_model": [{"style": "rule", "ground_truth": {"target": 2 + i, "numbers": [2, i]}} for i in range(k)],
        "extra_info": [{"split": "test"} for _ in range(k)],
        "notes": [f"note {i}" for i in range(k)],
    }
    columns.update(overrides)
    return DataProto.from_dict(non_tensors=columns)


class Recorder:
    """Wraps a generator (or a ``reply(prompt_ids, seed) -> (ids, reason)`` script) and keeps each request and reply."""

    def __init__(self, inner: Any = None, script: Callable[[list[int], int], tuple[list[int], str]] | None = None):
        self.inner, self.script = inner, script
        self.requests: list[DataProto] = []
        self.replies: list[DataProto] = []

    def generate_sequences(self, data: DataProto) -> DataProto:
        self.requests.append(data)
        if self.inner is not None:
            reply = self.inner.generate_sequences(data)
        else:
            outs = [
                self.script(list(p), int(s))
                for p, s in zip(data.non_tensor_batch["prompt_ids"], data.non_tensor_batch["seed"])
            ]
            ids = np.empty(len(outs), dtype=object)
            lps = np.empty(len(outs), dtype=object)
            for i, (tokens, _) in enumerate(outs):
                ids[i], lps[i] = tokens, [-0.5 - 0.25 * j for j in range(len(tokens))]
            reply = DataProto.from_dict(
                non_tensors={
                    "response_ids": ids,
                    "response_log_probs": lps,
                    "finish_reason": [reason for _, reason in outs],
                }
            )
        self.replies.append(reply)
        return reply


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path: str) -> Any:
    return AutoTokenizer.from_pretrained(tiny_model_path)


def template_ids(tokenizer: Any, messages: Any) -> list[int]:
    return list(
        tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True, return_dict=False)
    )


# ----------------------------------------------------------------------------- scripted generator
def test_layout_with_scripted_replies(tokenizer: Any, tmp_path) -> None:
    replies = {
        0: ([11, 12, EOT, 13, 14], "length"),  # an end-of-turn inside: cut after it, done
        1: ([21, 22, 23, 24, 25, 26], "length"),  # stopped by length: truncated
        2: ([31, EOT], "stop"),
    }
    calls = []

    def script(prompt_ids: list[int], seed: int) -> tuple[list[int], str]:
        calls.append(seed)
        return replies[len(calls) - 1]

    gen = Recorder(script=script)
    rollout = SingleTurnRollout(
        tokenizer,
        gen,
        Sampling(temperature=0.7, top_p=0.9, top_k=5),
        n=1,
        max_prompt_length=64,
        max_response_length=6,
        seed=3,
    )
    tasks = rows(3, extra_info=[{"split": "test", "index": 40}, {"split": "test"}, {"index": 42}])
    out = rollout.run_llm_loop(tasks, global_step=5, output_dir=str(tmp_path))

    request = gen.requests[0]
    assert request.meta_info == {
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 5,
        "max_tokens": 6,
        "stop_token_ids": [EOT],
        "do_sample": True,
    }
    unnamed = _task_name(tasks.non_tensor_batch["prompt"][1], {"split": "test"})
    assert unnamed.startswith("prompt:") and len(unnamed) == len("prompt:") + 16
    assert list(request.non_tensor_batch["seed"]) == [
        trajectory_seed(3, 5, key, 0) for key in ("index:40", unnamed, "index:42")
    ]
    pad = tokenizer.pad_token_id
    assert out.batch["responses"].tolist() == [
        [11, 12, EOT, pad, pad, pad],
        [21, 22, 23, 24, 25, 26],
        [31, EOT, pad, pad, pad, pad],
    ]
    assert out.batch["response_mask"].tolist() == [[1, 1, 1, 0, 0, 0], [1] * 6, [1, 1, 0, 0, 0, 0]]
    assert out.batch["rollout_log_probs"].tolist() == [
        [-0.5, -0.75, -1.0, 0, 0, 0],
        [-0.5, -0.75, -1.0, -1.25, -1.5, -1.75],
        [-0.5, -0.75, 0, 0, 0, 0],
    ]
    assert out.batch["rollout_log_probs"].dtype == torch.float32
    assert "token_level_scores" not in out.batch
    nt = out.non_tensor_batch
    assert list(nt["status"]) == ["done", "truncated", "done"]
    assert list(nt["task_id"]) == [40, 1, 42]
    assert list(nt["seed"]) == list(request.non_tensor_batch["seed"])
    assert list(nt["failed"]) == [False] * 3 and list(nt["success"]) == [None] * 3
    assert list(nt["num_turns"]) == [1] * 3 and list(nt["env_reward"]) == [0.0] * 3
    assert len(set(nt["uid"])) == 3
    metrics = out.meta_info["metrics"]
    expected = {
        "rollout/trajectories": 3.0,
        "rollout/generated_tokens": 11.0,
        "rollout/response_length/mean": 11 / 3,
        "rollout/truncated_trajectories": 1.0,
    }
    assert {k: metrics[k] for k in expected} == expected
    assert 0 <= metrics["timing_s/generation"] <= metrics["timing_s/rollout_total"]

    records = [json.loads(line) for line in (tmp_path / "step_5.jsonl").read_text().splitlines()]
    assert [r["uid"] for r in records] == list(nt["uid"])
    assert [r["data_source"] for r in records] == ["source0", "source1", "source2"]
    assert records[0]["prompt"] == tokenizer.apply_chat_template(
        tasks.non_tensor_batch["prompt"][0], add_generation_prompt=True, tokenize=False
    )
    assert records[2]["response"] == tokenizer.decode([31])


def test_parquet_rows_and_greedy_copies(tokenizer: Any, tmp_path) -> None:
    """Parquet gives numpy arrays of dicts for ``prompt`` and lists; do_sample=False samples each row once."""
    path = tmp_path / "rows.parquet"
    pd.DataFrame({k: list(v) for k, v in rows(2).non_tensor_batch.items()}).to_parquet(path)
    frame = pd.read_parquet(path)
    tasks = DataProto.from_dict(non_tensors={c: frame[c].to_numpy() for c in frame.columns})
    assert isinstance(tasks.non_tensor_batch["prompt"][0], np.ndarray)
    gen = Recorder(script=lambda ids, seed: ([7, EOT], "stop"))
    rollout = SingleTurnRollout(tokenizer, gen, PLAIN, n=4, max_response_length=8)
    out = rollout.run_llm_loop(tasks, do_sample=False)
    assert len(out) == 2 and gen.requests[0].meta_info["do_sample"] is False
    for b in range(2):
        prompt = out.batch["prompts"][b][
            out.batch["attention_mask"][b, : out.batch["prompts"].shape[1]].bool()
        ].tolist()
        assert prompt == template_ids(tokenizer, tasks.non_tensor_batch["prompt"][b])
        assert out.non_tensor_batch["prompt"][b] is tasks.non_tensor_batch["prompt"][b]
        assert list(out.non_tensor_batch["reward_model"][b]["ground_truth"]["numbers"]) == [2, b]


def test_errors(tokenizer: Any) -> None:
    gen = Recorder(script=lambda ids, seed: ([7] * 9, "length"))
    too_long = rows(2, prompt=[[{"role": "user", "content": "hi"}], [{"role": "user", "content": "word " * 60}]])
    length = len(template_ids(tokenizer, too_long.non_tensor_batch["prompt"][1]))
    with pytest.raises(ValueError, match=rf"^row 1: prompt is {length} tokens, above max_prompt_length=40$"):
        SingleTurnRollout(tokenizer, gen, PLAIN, max_prompt_length=40).run_llm_loop(too_long)
    assert gen.requests == []
    with pytest.raises(RuntimeError, match="generator returned 9 tokens and 9 log-probs"):
        SingleTurnRollout(tokenizer, gen, PLAIN, max_response_length=8).run_llm_loop(rows(1))
    with pytest.raises(ValueError, match=r"dataset columns \['uid'\] clash"):
        SingleTurnRollout(tokenizer, gen, PLAIN).run_llm_loop(rows(1, uid=["u"]))
    with pytest.raises(ValueError, match="non-tensor 'prompt' column"):
        SingleTurnRollout(tokenizer, gen, PLAIN).run_llm_loop(DataProto.from_dict(non_tensors={"data_source": ["x"]}))


# ----------------------------------------------------------------------------- real engine
@pytest.fixture(scope="module")
def worker(tiny_model_path: str) -> Any:
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    w = ActorRolloutRefWorker(
        {"model": {"path": tiny_model_path}, "rollout": {"name": "hf", "dtype": "float32"}, "num_threads": 1},
        role="rollout",
    )
    w.init_model()
    yield w
    w.shutdown()


def test_engine_rollout(tokenizer: Any, worker: Any) -> None:
    gen = Recorder(worker)
    rollout = SingleTurnRollout(tokenizer, gen, PLAIN, n=3, max_prompt_length=128, max_response_length=12, seed=1)
    tasks = rows(2)
    out = rollout.run_llm_loop(tasks, global_step=2)
    nt, reply = out.non_tensor_batch, gen.replies[0].non_tensor_batch

    assert len(out) == 6
    assert [nt["uid"][b] for b in range(6)] == [nt["uid"][0]] * 3 + [nt["uid"][3]] * 3 and nt["uid"][0] != nt["uid"][3]
    for col in COLUMNS:  # every dataset column, literally, for each copy
        assert [nt[col][b] for b in range(6)] == [tasks.non_tensor_batch[col][b // 3] for b in range(6)], col
    assert [nt["reward_model"][b]["ground_truth"] for b in range(6)] == [{"target": 2, "numbers": [2, 0]}] * 3 + [
        {"target": 3, "numbers": [2, 1]}
    ] * 3
    assert list(nt["task_id"]) == [0, 0, 0, 1, 1, 1]
    keys = [_task_name(tasks.non_tensor_batch["prompt"][row], {"split": "test"}) for row in range(2)]
    assert list(nt["seed"]) == [trajectory_seed(1, 2, keys[row], copy) for row in range(2) for copy in range(3)]

    width = out.batch["prompts"].shape[1]
    for b in range(6):
        expected = template_ids(tokenizer, tasks.non_tensor_batch["prompt"][b // 3])
        assert out.batch["prompts"][b][out.batch["attention_mask"][b, :width].bool()].tolist() == expected
        assert list(gen.requests[0].non_tensor_batch["prompt_ids"][b]) == expected
        ids = [int(x) for x in reply["response_ids"][b]]
        ids = ids[: ids.index(EOT) + 1] if EOT in ids else ids
        assert out.batch["response_mask"][b].sum().item() == len(ids) > 0
        assert out.batch["responses"][b, : len(ids)].tolist() == ids  # the sampled ids, not re-tokenised
        assert torch.allclose(
            out.batch["rollout_log_probs"][b, : len(ids)], torch.tensor(reply["response_log_probs"][b][: len(ids)])
        )
        assert nt["status"][b] == ("done" if EOT in ids or reply["finish_reason"][b] == "stop" else "truncated")
    assert out.batch["input_ids"].tolist() == torch.cat([out.batch["prompts"], out.batch["responses"]], 1).tolist()
    assert out.meta_info["metrics"]["rollout/generated_tokens"] == out.batch["response_mask"].sum().item()

    again = rollout.run_llm_loop(tasks, global_step=2)
    assert torch.equal(again.batch["responses"], out.batch["responses"])  # same seeds, same samples
    assert set(again.non_tensor_batch["uid"]).isdisjoint(nt["uid"])  # fresh group ids per call
    other = rollout.run_llm_loop(tasks, global_step=3)
    assert not torch.equal(other.batch["responses"], out.batch["responses"])


def test_engine_greedy(tokenizer: Any, worker: Any) -> None:
    rollout = SingleTurnRollout(tokenizer, worker, PLAIN, n=3, max_response_length=10)
    first = rollout.run_llm_loop(rows(2), do_sample=False, global_step=0)
    second = rollout.run_llm_loop(rows(2), do_sample=False, global_step=7)  # other seeds: greedy ignores them
    assert len(first) == 2 and len(set(first.non_tensor_batch["uid"])) == 2
    assert torch.equal(first.batch["responses"], second.batch["responses"])
