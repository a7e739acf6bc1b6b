"""The judge the run serves: a real vLLM engine in a Ray actor behind the OpenAI-compatible endpoint. Its top
log-probs match a transformers forward of the same model, the judge's P(yes) is the hand computation on them, a
bad request is a 400, and a killed judge is restarted and answers again."""

import math

import pytest
import requests
import torch
from waiting import wait_until

from verl.trainer.ppo.judge import JudgeClient, ServedJudge
from verl.utils.typed_config import from_dict
from verl.workers.config import JudgeConfig

pytestmark = pytest.mark.slow

RUBRIC = "Grade this episode. {episode} Did it succeed?"


@pytest.fixture(scope="module")
def yes_no_model(tiny_model_path, tmp_path_factory) -> str:
    """The tiny Llama made to answer Yes (logit 2h) or No (logit h) before every other token (logit -h): attention
    and MLP outputs are zeroed, so the last hidden state is the last token's normed embedding, whose dimension d
    (h > 0 there) alone reaches the LM head. Untied head; fp32."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    model = LlamaForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32, tie_word_embeddings=False)
    yes, no = tok.encode("Yes", add_special_tokens=False), tok.encode("No", add_special_tokens=False)
    assert len(yes) == len(no) == 1
    last = tok.encode(
        tok.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False, add_generation_prompt=True),
        add_special_tokens=False,
    )[-1]
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        d = int(model.model.embed_tokens.weight[last].argmax())
        model.model.norm.weight.zero_()
        model.model.norm.weight[d] = 1.0
        head = torch.zeros_like(model.lm_head.weight)
        head[:, d] = -1.0
        head[yes[0], d], head[no[0], d] = 2.0, 1.0
        model.lm_head.weight.copy_(head)
    folder = tmp_path_factory.mktemp("yes_no_judge")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def expected_top(model_path: str, content: str, k: int) -> list[tuple[str, float]]:
    """The k most likely first reply tokens and their log-probs, by a transformers forward."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
    text = tok.apply_chat_template([{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    ids = torch.tensor([tok.encode(text, add_special_tokens=False)])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0, -1].float(), dim=-1)
    values, tokens = logp.topk(k)
    return [(tok.decode([int(t)]), float(v)) for t, v in zip(tokens, values)]


def test_the_served_judge_answers_exactly_and_comes_back_after_a_kill(ray_local, yes_no_model):
    serve = {
        "model_path": yes_no_model,
        "num_cpus": 1.0,
        "dtype": "float32",
        "kv_cache_gb": 0.25,
        "max_model_len": 512,
        "hang_s": 10.0,
        "max_restarts": 2,
    }
    cfg = from_dict(JudgeConfig, {"serve": serve, "rubric": None}, "reward_model.judge")
    served = ServedJudge(cfg.serve, "cpu")
    try:
        base = served.url
        assert requests.get(f"{base}/models", timeout=10).json()["data"][0]["id"] == yes_no_model
        content = RUBRIC.format(episode="the agent bought the red shoes")
        body = {
            "model": "judge",
            "messages": [{"role": "user", "content": content}],
            "max_tokens": 1,
            "temperature": 1.0,
            "logprobs": True,
            "top_logprobs": 3,
            "seed": 0,
        }
        response = requests.post(f"{base}/chat/completions", json=body, timeout=60)
        assert response.status_code == 200, response.text
        reply = response.json()
        top = reply["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        expected = expected_top(yes_no_model, content, 3)
        assert len(top) == 3 and [e["token"] for e in top[:2]] == [t for t, _ in expected[:2]] == ["Yes", "No"]
        assert [e["logprob"] for e in top[:2]] == pytest.approx([lp for _, lp in expected[:2]], abs=1e-4)
        assert reply["usage"]["completion_tokens"] == 1
        # the judge's score: P(yes) / (P(yes) + P(no)) from those log-probs
        judge = JudgeClient(cfg, base, "judge", None, RUBRIC)
        (score,), _ = judge.score(["the agent bought the red shoes"])
        p_yes, p_no = math.exp(expected[0][1]), math.exp(expected[1][1])
        assert score == pytest.approx(p_yes / (p_yes + p_no), abs=1e-4) and 0.5 < score < 1.0
        bad = requests.post(f"{base}/chat/completions", json={**body, "top_logprobs": 50}, timeout=10)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "top_logprobs"
        # killed: the next ensure_ready restarts it, and it answers again
        import ray

        ray.kill(served.actor, no_restart=True)
        # the kill is asynchronous: the process goes down shortly after
        wait_until(lambda: not served.healthy(), "the killed judge to stop answering", 30, poll_s=0.2)
        served.ensure_ready()
        assert served.restarts == 1 and served.healthy()
        judge.base_url = served.url
        judge._cache.clear()
        (again,), _ = judge.score(["the agent bought the red shoes"])
        assert again == pytest.approx(score, abs=1e-6)
    finally:
        served.close()
