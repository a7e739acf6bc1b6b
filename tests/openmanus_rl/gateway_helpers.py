"""Agent programs (loaded by ``gateway_helpers:<name>``), test generators and a row reader for the gateway tests."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import openai

from verl.protocol import DataProto

EOT = 2
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
        },
    }
]
LATE_CALLS: list[str] = []  # what a timed-out episode's call after its deadline got
ASYNC_EVENTS: list[str] = []  # what the async sleeping program saw: "called", then "cancelled" or "woke"


def log_probs_for(call: int, n: int) -> list[float]:
    """Distinct log-probs, exact in float32: call c, token j -> -(c * 16 + j + 1) / 64."""
    return [-(call * 16 + j + 1) / 64 for j in range(n)]


def row(out, b: int) -> tuple[list[int], list[int], list[int], list[float]]:
    """Row ``b`` without padding: prompt, response, response mask, rollout log-probs."""
    prompt = out.batch["prompts"][b][out.batch["attention_mask"][b, : out.batch["prompts"].shape[1]] == 1].tolist()
    length = int(out.batch["attention_mask"][b, out.batch["prompts"].shape[1] :].sum())
    return (
        prompt,
        out.batch["responses"][b, :length].tolist(),
        out.batch["response_mask"][b, :length].tolist(),
        out.batch["rollout_log_probs"][b, :length].tolist(),
    )


class ReplayGenerator:
    """``generate_sequences`` answering its k-th prompt (over all calls) with ``replies[k]``: ``(ids, finish_reason)``
    and `log_probs_for` ``(k, len(ids))``.  Records each prompt, seed and meta_info in order."""

    def __init__(self, replies: list[tuple[list[int], str]], block: threading.Event | None = None) -> None:
        self.replies, self.block = list(replies), block
        self.prompts: list[list[int]] = []
        self.seeds: list[int] = []
        self.metas: list[dict[str, Any]] = []

    def answer(self, prompt: list[int], seed: int, meta: dict[str, Any]) -> tuple[list[int], list[float], str]:
        k = len(self.prompts)
        self.prompts.append(list(prompt))
        self.seeds.append(seed)
        self.metas.append(meta)
        ids, reason = self.replies[k % len(self.replies)]
        return list(ids), log_probs_for(k, len(ids)), reason

    def generate_sequences(self, data: DataProto) -> DataProto:
        if self.block is not None:
            self.block.wait()
        nt = data.non_tensor_batch
        rows = [self.answer(list(p), int(s), dict(data.meta_info)) for p, s in zip(nt["prompt_ids"], nt["seed"])]
        return DataProto.from_dict(
            non_tensors={
                "response_ids": [r[0] for r in rows],
                "response_log_probs": [r[1] for r in rows],
                "finish_reason": [r[2] for r in rows],
            }
        )


class StreamingReplayGenerator(ReplayGenerator):
    """A `ReplayGenerator` that streams: each poll answers every request submitted since the last one."""

    def __init__(self, replies: list[tuple[list[int], str]]) -> None:
        super().__init__(replies)
        self.queue: list[tuple[str, list[int], int, dict[str, Any]]] = []
        self.routes: list[int] = []

    def submit_generation(self, data: DataProto) -> DataProto:
        nt = data.non_tensor_batch
        self.queue += [
            (str(r), list(p), int(s), dict(data.meta_info))
            for r, p, s in zip(nt["request_id"], nt["prompt_ids"], nt["seed"])
        ]
        self.routes += [int(r) for r in nt["route"]]
        return DataProto()

    def poll_generation(self, max_wait_s: float = 0.0) -> DataProto:
        rows, self.queue = self.queue, []
        answers = [self.answer(p, s, m) for _, p, s, m in rows]
        return DataProto.from_dict(
            non_tensors={
                "request_id": [r for r, *_ in rows],
                "response_ids": [a[0] for a in answers],
                "response_log_probs": [a[1] for a in answers],
                "finish_reason": [a[2] for a in answers],
            }
        )

    def cancel_generation(self) -> None:
        self.queue = []


def client(base_url: str, api_key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)


def ask(c: openai.OpenAI, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    reply = c.chat.completions.create(model="policy", messages=messages, **kwargs)
    messages.append(reply.choices[0].message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}))
    return reply


# ---------------------------------------------------------------- programs
def tool_episode(task: dict, base_url: str, api_key: str) -> dict:
    """Three calls: two tool calls answered by tool messages, then the answer."""
    c, messages = client(base_url, api_key), [{"role": "user", "content": task["prompt"][0]["content"]}]
    for result in ("3", "7"):
        reply = ask(c, messages, tools=TOOLS)
        messages.append({"role": "tool", "tool_call_id": reply.choices[0].message.tool_calls[0].id, "content": result})
    answer = ask(c, messages, tools=TOOLS).choices[0].message.content
    return {"reward": 0.75, "info": {"success": True, "answer": answer}}


def chat_episode(task: dict, base_url: str, api_key: str) -> float:
    """A user turn per entry of ``extra_info["turns"]``, each answered once."""
    c, messages = client(base_url, api_key), []
    for turn in task["extra_info"]["turns"]:
        messages.append({"role": "user", "content": turn})
        ask(c, messages)
    return 0.5


def rewriting_episode(task: dict, base_url: str, api_key: str) -> float:
    """Two calls; before the second the agent replaces its first reply with a summary (a prefix break)."""
    c, messages = client(base_url, api_key), [{"role": "user", "content": "Plan the trip."}]
    ask(c, messages)
    messages[-1] = {"role": "assistant", "content": "(summary of the plan)"}
    messages.append({"role": "user", "content": "Go on."})
    ask(c, messages)
    return 1.0


def raw_echo_episode(task: dict, base_url: str, api_key: str) -> float:
    """Two calls with tools; the agent sends its first reply back as the raw text ``extra_info["raw"]``."""
    c, messages = client(base_url, api_key), [{"role": "user", "content": "Add 1."}]
    ask(c, messages, tools=TOOLS)
    messages[-1] = {"role": "assistant", "content": task["extra_info"]["raw"]}
    messages.append({"role": "tool", "content": "1"})
    ask(c, messages, tools=TOOLS)
    return 1.0


async def async_chat_episode(task: dict, base_url: str, api_key: str) -> float:
    """`chat_episode` written as agent frameworks write it: ``openai.AsyncOpenAI``, awaited calls."""
    c, messages = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0), []
    for turn in task["extra_info"]["turns"]:
        messages.append({"role": "user", "content": turn})
        reply = await c.chat.completions.create(model="policy", messages=messages)
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
    await c.close()
    return 0.5


async def async_sleeping_episode(task: dict, base_url: str, api_key: str) -> float:
    """One awaited call, then an await past the episode's time limit (recorded in `ASYNC_EVENTS`)."""
    c = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    await c.chat.completions.create(model="policy", messages=[{"role": "user", "content": "hi"}])
    ASYNC_EVENTS.append("called")
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        ASYNC_EVENTS.append("cancelled")
        raise
    ASYNC_EVENTS.append("woke")
    return 1.0


def raising_episode(task: dict, base_url: str, api_key: str) -> float:
    ask(client(base_url, api_key), [{"role": "user", "content": "hi"}])
    raise ValueError("boom")


def sleeping_episode(task: dict, base_url: str, api_key: str) -> float:
    """One call, then past the episode's time limit, then one more call (its error goes to `LATE_CALLS`)."""
    c = client(base_url, api_key)
    ask(c, [{"role": "user", "content": "hi"}])
    time.sleep(1.5)
    try:
        ask(c, [{"role": "user", "content": "again"}])
    except openai.APIStatusError as exc:
        LATE_CALLS.append(f"{exc.status_code} {exc.response.json()['error']['code']}")
    return 1.0


def unscored_episode(task: dict, base_url: str, api_key: str) -> None:
    """One call; the reward module scores the reply."""
    ask(client(base_url, api_key), [{"role": "user", "content": "What is 6 times 7?"}])


def bad_return_episode(task: dict, base_url: str, api_key: str) -> str:
    ask(client(base_url, api_key), [{"role": "user", "content": "hi"}])
    return "yes"


def silent_episode(task: dict, base_url: str, api_key: str) -> float:
    return 1.0


def countdown_episode(task: dict, base_url: str, api_key: str) -> None:
    """The row's prompt, then a request to check the answer; the countdown module scores the last reply."""
    c, messages = client(base_url, api_key), [dict(m) for m in task["prompt"]]
    ask(c, messages, max_tokens=8)
    messages.append({"role": "user", "content": "Check it and give the final answer."})
    ask(c, messages)
