"""End to end: the real vLLM engine (in-process rollout worker, tiny random model) rolling out WebShop tasks."""

import json

import pytest
import torch
from agent_helpers import SMALL_AGENT, task_batch
from engine_helpers import Recording

from openmanus_rl.agent import OpenManusAgent
from verl.trainer.ppo.reward import RewardManager

pytestmark = [pytest.mark.slow, pytest.mark.in_process_engine]

HEAD, TAIL, EOT = [198, 1, 4093, 198], [2, 198, 1, 520, 9531, 198], 2


CONFIG = {
    **SMALL_AGENT,
    "reward_components": {"goal": 1.0, "format": 0.1, "length": {"weight": 0.1, "max_length": 40}},
}


def runs(mask):
    """(start, end) of each run of 1s."""
    out, start = [], None
    for i, m in enumerate(mask + [0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            out.append((start, i))
            start = None
    return out


def test_vllm_webshop_rollout_is_training_ready(tokenizer, vllm_engine, webshop_server, shop, tmp_path):
    generator = Recording(vllm_engine)
    with OpenManusAgent(tokenizer, generator, {**CONFIG, "env_ports": [webshop_server.port]}) as agent:
        out = agent.run_llm_loop(task_batch([0, 1, 2]), output_dir=str(tmp_path), global_step=1)
        samples = {}  # prompt ids -> what the engine sampled for them (the n=2 copies share their first prompt)
        for prompt, ids, lps, reason in generator.samples:
            samples.setdefault(tuple(prompt), []).append((ids, lps, reason))
        again = agent.run_llm_loop(task_batch([0, 1, 2]), global_step=1)
        RewardManager(tokenizer, "episode")(out)
        greedy = agent.run_llm_loop(task_batch([4]), global_step=1, do_sample=False)

    b, nt = out.batch, out.non_tensor_batch
    assert len(out) == 6 and not any(nt["failed"])
    assert list(nt["task_id"]) == [0, 0, 1, 1, 2, 2]
    assert nt["uid"][0] == nt["uid"][1] != nt["uid"][2] == nt["uid"][3] != nt["uid"][4]
    for i in range(6):  # the env was reset to the row's task
        goal = shop.goal(nt["task_id"][i])
        assert nt["trajectory"][i][0]["text"] == f"WebShop [SEP] Instruction: [SEP] {goal.instruction} [SEP] Search"
    P, T = b["prompts"].shape[1], b["responses"].shape[1]
    assert P <= 512 and T <= 768 - P
    assert torch.equal(b["input_ids"], torch.cat([b["prompts"], b["responses"]], 1))
    for i in range(6):
        prompt_mask, response_mask = b["attention_mask"][i, :P].tolist(), b["attention_mask"][i, P:].tolist()
        pad, length = prompt_mask.count(0), response_mask.count(1)
        assert prompt_mask == [0] * pad + [1] * (P - pad) and response_mask == [1] * length + [0] * (T - length)
        prompt, response = b["prompts"][i, pad:].tolist(), b["responses"][i, :length].tolist()
        mask = b["response_mask"][i, :length].tolist()
        assert b["response_mask"][i, length:].sum() == 0
        model_runs = runs(mask)
        assert len(model_runs) == nt["num_turns"][i]
        for start, end in model_runs:  # token-in/token-out: each model turn is exactly what the engine sampled there
            ids, lps, reason = next(c for c in samples[tuple(prompt + response[:start])] if c[0] == response[start:end])
            assert b["rollout_log_probs"][i, start:end].tolist() == pytest.approx(lps)
            assert response[end - 1] == EOT or (reason == "length" and response[end] == EOT and mask[end] == 0)
        gaps = [(end, nxt) for (_, end), (nxt, _) in zip(model_runs, model_runs[1:])]
        for end, nxt in gaps:  # between model turns: [appended <|im_end|>] + head + observation + tail, mask 0
            gap = response[end + (response[end] == EOT and response[end - 1] != EOT) : nxt]
            assert gap[:4] == HEAD and gap[-6:] == TAIL
        assert (b["rollout_log_probs"][i] * (1 - b["response_mask"][i])).abs().sum() == 0
        total = sum(nt["reward_breakdown"][i].values())
        assert nt["reward_total"][i] == pytest.approx(total)
        scores = b["token_level_scores"][i]
        assert scores[model_runs[-1][1] - 1].item() == pytest.approx(total)  # last_token allocation
        assert scores.abs().sum().item() == pytest.approx(abs(total))
    m = out.meta_info["metrics"]
    for key in (
        "env/success_rate",
        "env/reward/mean",
        "env/turns/mean",
        "env/invalid_action_rate",
        "env/errors",
        "env/failed_trajectories",
        "reward/goal/mean",
        "reward/format/mean",
        "reward/length/mean",
        "timing_s/generation",
        "timing_s/env",
        "timing_s/rollout_total",
        "rollout/generated_tokens",
        "rollout/truncated_trajectories",
    ):
        assert isinstance(m[key], float), key
    assert m["rollout/generated_tokens"] == float(b["response_mask"].sum())
    assert m["timing_s/generation"] > 0 and m["timing_s/env"] > 0

    # per-trajectory seeds make sampling reproducible; greedy copies of one task agree
    assert torch.equal(again.batch["responses"], b["responses"])
    assert greedy.batch["responses"][0].tolist() == greedy.batch["responses"][1].tolist()

    records = [json.loads(line) for line in (tmp_path / "rollouts" / "step_000001.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in records] == [0, 0, 1, 1, 2, 2]
    assert sum(s["tokens"] for s in records[0]["segments"]) == int(b["attention_mask"][0, P:].sum())
    assert (tmp_path / "rollouts" / "step_000001.html").read_text().count('"task_id": 2') == 2
