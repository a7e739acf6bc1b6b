"""An agent program's own demonstrations: the WebShop expert answering the example agent's calls through the gateway
(`openmanus_rl.gateway.demonstrations.ProgramExpert`, ``scripts/make_sft_data.py --program``)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from demo_helpers import loss_spans, sft_argv
from script_modules import load_script

from examples.webshop_openai_agent import SYSTEM
from openmanus_rl.agent.chat import ChatFormat
from openmanus_rl.agent.tool_calls import TOOL_CALL, read_call
from openmanus_rl.gateway.demonstrations import ProgramExpert, message_heads
from verl.protocol import DataProto

REPO = Path(__file__).resolve().parents[2]
PROGRAM = "examples.webshop_openai_agent:play"
FIRST_PAGE = (
    "WebShop [SEP] Instruction: [SEP] i need a red ceramic mug, and price lower than 20.00 dollars [SEP] Search"
)
RESULTS = (
    "Back to Search [SEP] Page 1 (Total results: 1) [SEP] Next > [SEP] B000000001 [SEP] Red Ceramic Mug [SEP] $9.99"
)


def prompt(tokenizer, *messages: tuple[str, str]) -> list[int]:
    text = tokenizer.apply_chat_template(
        [{"role": r, "content": c} for r, c in messages], add_generation_prompt=True, tokenize=False
    )
    return tokenizer.encode(text, add_special_tokens=False)


def call(expert: ProgramExpert, ids: list[int], max_tokens: int = 96) -> tuple[list[int], str]:
    out = expert.generate_sequences(
        DataProto.from_dict(non_tensors={"prompt_ids": [ids], "seed": [0]}, meta_info={"max_tokens": max_tokens})
    ).non_tensor_batch
    return list(out["response_ids"][0]), out["finish_reason"][0]


def test_the_observation_is_the_last_user_or_tool_message(tokenizer):
    assert message_heads(ChatFormat(tokenizer)) == ["<|im_start|>user\n", "<|im_start|>tool\n"]
    expert = ProgramExpert(tokenizer, "webshop")
    assert expert.observation(prompt(tokenizer, ("system", SYSTEM), ("user", FIRST_PAGE))) == FIRST_PAGE
    assert (
        expert.observation(
            prompt(tokenizer, ("system", SYSTEM), ("user", FIRST_PAGE), ("assistant", "a"), ("tool", RESULTS))
        )
        == RESULTS
    )


def test_the_reply_is_the_experts_tool_call_and_a_new_prompt_a_new_episode(tokenizer):
    expert = ProgramExpert(tokenizer, "webshop")
    first = prompt(tokenizer, ("system", SYSTEM), ("user", FIRST_PAGE))
    ids, reason = call(expert, first)
    assert reason == "stop" and ids[-1] == ChatFormat(tokenizer).eot_id
    text = tokenizer.decode(ids[:-1])
    assert (
        text
        == "I search for the product the instruction describes.\n"
        + '<tool_call>{"name": "search", "arguments": {"query": "red ceramic mug"}}</tool_call>'
    )
    assert expert.episodes == [["search[red ceramic mug]"]]
    # the same conversation, one tool result later: the same episode
    later = (
        first
        + ids
        + tokenizer.encode(
            "\n<|im_start|>tool\n" + RESULTS + "<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False
        )
    )
    call(expert, later)
    assert expert.episodes == [["search[red ceramic mug]", "click[B000000001]"]]
    # a prompt that does not extend the last call's: a new episode, a fresh expert; a short budget cuts the reply
    ids, reason = call(expert, first, max_tokens=5)
    assert (len(ids), reason) == (5, "length")
    assert expert.episodes[-1] == ["search[red ceramic mug]"] and len(expert.episodes) == 2


@pytest.mark.slow
def test_demonstrations_are_the_programs_conversations(server, tokenizer, tmp_path):
    out = tmp_path / "demos.parquet"
    stats = load_script("make_sft_data").main(sft_argv(server, out, "--n", "4", "--program", PROGRAM))
    rows = pd.read_parquet(out)
    assert (stats["played"], stats["env_failures"], stats["kept"]) == (4, 0, 4)
    assert list(rows.task_id) == [700, 701, 702, 703] and set(rows.action_format) == {"tool_call"}
    assert list(rows.success) == [r == 1.0 for r in rows.env_reward]
    eot = ChatFormat(tokenizer).eot_id
    for sample in rows.itertuples():
        assert SYSTEM in tokenizer.decode(list(sample.input_ids))  # the program's own system prompt, not the agent's
        spans = loss_spans(list(sample.input_ids), list(sample.loss_mask))
        assert len(spans) == sample.num_turns and all(span[-1] == eot for span in spans)
        calls = [read_call(TOOL_CALL.search(tokenizer.decode(span[:-1])).group(1)) for span in spans]
        assert calls[0][0] == "search" and all(name in ("search", "click") for name, _ in calls)
        if sample.success:
            assert calls[-1] == ("click", {"target": "Buy Now"})
    print(json.dumps(stats))
