"""The gateway on the real vLLM engine (in-process rollout worker, tiny random model): a two-call conversation
through the ``openai`` client keeps exactly the ids and log-probs the engine returned."""

import pytest
from agent_helpers import PLAIN, task_batch
from engine_helpers import Recording

from openmanus_rl.gateway import GatewayConfig, GatewayRollout

pytestmark = [pytest.mark.slow, pytest.mark.in_process_engine]


def test_two_calls_on_vllm_keep_the_engine_tokens(tokenizer, vllm_engine):
    generator = Recording(vllm_engine)
    config = GatewayConfig(
        program="gateway_helpers:chat_episode",
        sampling=PLAIN,
        n=2,
        concurrency=2,
        max_prompt_length=256,
        max_response_length=12,
        max_trajectory_length=512,
    )
    with GatewayRollout(tokenizer, generator, config) as rollout:
        out = rollout.run_llm_loop(task_batch([0], extra_info=[{"index": 0, "turns": ["Say hi.", "Again."]}]))

    assert len(out) == 2 and not any(out.non_tensor_batch["failed"]) and len(generator.samples) == 4
    P = out.batch["prompts"].shape[1]
    for b in range(2):
        pad = int((out.batch["attention_mask"][b, :P] == 0).sum())
        prompt = out.batch["prompts"][b, pad:].tolist()
        length = int(out.batch["attention_mask"][b, P:].sum())
        sequence = prompt + out.batch["responses"][b, :length].tolist()
        mask = out.batch["response_mask"][b, :length].tolist()
        # the engine calls this row is made of: each one's prompt is a prefix of the row, its sampled ids follow
        calls = {
            len(p): (ids, lps)
            for p, ids, lps, _ in generator.samples
            if sequence[: len(p)] == p and sequence[len(p) : len(p) + len(ids)] == ids
        }
        assert sorted(calls)[0] == len(prompt) and len(calls) == 2, b
        for start, (ids, lps) in calls.items():
            span = slice(start - len(prompt), start - len(prompt) + len(ids))
            assert mask[span] == [1] * len(ids)
            assert out.batch["rollout_log_probs"][b, span].tolist() == pytest.approx(lps, abs=1e-6)
        assert sum(mask) == sum(len(ids) for ids, _ in calls.values())
