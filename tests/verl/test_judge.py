"""The LLM judge: answers read as scores (hand-computed), the rubric check, the client's retries, timeouts, cache and
failures against an endpoint scripted to misbehave, and the batch's scores on each row's last model token. The real
path (a vLLM judge served as a Ray actor, killed and restarted) is in ``test_judge_served.py``."""

import asyncio
import math

import pytest
import torch
from fastapi import FastAPI, Request
from trainer_runs import grpo_step_args

from verl.protocol import DataProto
from verl.trainer.ppo.judge import (
    Judge,
    JudgeClient,
    JudgeError,
    first_number,
    judge_failure_problem,
    load_rubric,
    yes_probability,
)
from verl.utils.http_server import BackgroundServer
from verl.utils.typed_config import from_dict
from verl.workers.config import JudgeConfig


def test_yes_probability_normalises_over_yes_and_no():
    top = [
        {"token": " Yes", "logprob": math.log(0.5)},
        {"token": "no", "logprob": math.log(0.2)},
        {"token": "YES", "logprob": math.log(0.1)},
        {"token": "maybe", "logprob": math.log(0.1)},
    ]
    assert yes_probability(top) == pytest.approx(0.6 / 0.8)
    with pytest.raises(JudgeError, match=r"nonsense answer: neither yes nor no among the top tokens \['maybe'\]"):
        yes_probability([{"token": "maybe", "logprob": 0.0}])


def test_first_number_must_lie_in_the_unit_interval():
    assert first_number("Score: 0.75 out of 1") == 0.75 and first_number(".5") == 0.5 and first_number("1") == 1.0
    with pytest.raises(JudgeError, match="outside"):
        first_number("7/10")
    with pytest.raises(JudgeError, match="no number"):
        first_number("excellent")


def test_the_rubric_needs_exactly_the_episode_placeholder(tmp_path):
    assert "{episode}" in load_rubric(None)
    (tmp_path / "none.txt").write_text("Was it good?")
    with pytest.raises(ValueError, match=r"must hold the placeholder \{episode\} and no other; it holds none"):
        load_rubric(str(tmp_path / "none.txt"))
    (tmp_path / "extra.txt").write_text("{episode} for {task}")
    with pytest.raises(ValueError, match=r"it holds \['episode', 'task'\]"):
        load_rubric(str(tmp_path / "extra.txt"))
    with pytest.raises(ValueError, match="does not exist"):
        load_rubric(str(tmp_path / "missing.txt"))


def test_a_step_stops_when_the_judge_fails_on_too_many_episodes():
    assert judge_failure_problem({0: "judge: down"}, 5, 0.2) is None  # 1 of 5 is not more than 0.2
    assert judge_failure_problem({0: "judge: down", 3: "judge: down", 4: "judge: slow"}, 5, 0.2) == (
        "the judge failed on 3 of 5 episodes (reward_model.judge.max_failed_fraction=0.2); "
        "most common error: judge: down"
    )


# ----------------------------------------------------------------------------- against a scripted endpoint


class ScriptedEndpoint:
    """An OpenAI-style endpoint that misbehaves on cue (a fault injector): the episode text says how. It answers
    yes with probability 0.8 (top log-probs), and counts the calls it got per cue."""

    def __init__(self):
        self.calls: dict[str, int] = {}
        app = FastAPI()

        @app.get("/v1/models")
        async def models():
            return {"object": "list", "data": [{"id": "scripted-judge"}]}

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            body = await request.json()
            text = body["messages"][0]["content"]
            cue = next((c for c in ("FLAKY", "DOWN", "SLOW", "NONSENSE", "BAD") if c in text), "OK")
            self.calls[cue] = self.calls.get(cue, 0) + 1
            if cue == "FLAKY" and self.calls[cue] == 1 or cue == "DOWN":
                from fastapi.responses import JSONResponse

                return JSONResponse({"error": {"message": "overloaded"}}, status_code=503)
            if cue == "BAD":
                from fastapi.responses import JSONResponse

                return JSONResponse({"error": {"message": "bad request"}}, status_code=400)
            if cue == "SLOW":
                await asyncio.sleep(1.5)
            top = (
                [{"token": "maybe", "logprob": 0.0}]
                if cue == "NONSENSE"
                else [{"token": "Yes", "logprob": math.log(0.8)}, {"token": "No", "logprob": math.log(0.2)}]
            )
            return {
                "choices": [
                    {
                        "message": {"role": "assistant", "content": "Yes"},
                        "logprobs": {"content": [{"token": "Yes", "logprob": top[0]["logprob"], "top_logprobs": top}]},
                    }
                ]
            }

        self.server = BackgroundServer(app, "scripted-judge")
        self.url = f"{self.server.url}/v1"


@pytest.fixture()
def endpoint():
    served = ScriptedEndpoint()
    yield served
    served.server.close()


def client(url: str, **kw) -> JudgeClient:
    cfg = from_dict(JudgeConfig, {"base_url": url, "timeout_s": 0.5, "retries": 1, **kw}, "reward_model.judge")
    return JudgeClient(cfg, url, "scripted-judge", None, "Judge this: {episode}")


def test_retries_timeouts_nonsense_and_the_cache(endpoint):
    judge = client(
        endpoint.url, max_concurrency=1
    )  # one call at a time: the second "OK a" finds the first in the cache
    results, metrics = judge.score(["OK a", "FLAKY b", "DOWN c", "SLOW d", "NONSENSE e", "BAD f", "OK a"])
    assert results[0] == pytest.approx(0.8) and results[1] == pytest.approx(0.8)  # the 503 was retried
    assert results[2].startswith("2 attempt(s) failed; the last: HTTP 503")
    assert results[3] == "2 attempt(s) failed; the last: timed out after 0.5 s"
    assert results[4].startswith("nonsense answer") and results[5].startswith("HTTP 400")  # a 4xx is not retried
    assert results[6] == pytest.approx(0.8)
    assert endpoint.calls == {"OK": 1, "FLAKY": 2, "DOWN": 2, "SLOW": 2, "NONSENSE": 1, "BAD": 1}
    assert (
        metrics["reward_model/cache_hits"] == 1.0 and metrics["reward_model/judge_calls"] == 2.0
    )  # answered, not cached
    assert metrics["reward_model/latency_p95_s"] > 0


def test_an_endpoint_that_is_down_fails_every_episode():
    judge = client("http://127.0.0.1:9/v1")  # nothing listens on the discard port
    results, _ = judge.score(["a", "b"])
    assert all(r.startswith("2 attempt(s) failed; the last: ConnectionError") for r in results)


def test_the_batch_gets_each_score_on_its_last_model_token(endpoint, tiny_model_path):
    from transformers import AutoTokenizer

    cfg = from_dict(JudgeConfig, {"base_url": endpoint.url, "timeout_s": 5.0, "retries": 0}, "reward_model.judge")
    judge = Judge(cfg, "cpu", AutoTokenizer.from_pretrained(tiny_model_path))
    tok = judge.tokenizer
    rows = [tok.encode("OK one"), tok.encode("NONSENSE two"), tok.encode("OK three")]
    width = max(map(len, rows))
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    batch = DataProto.from_dict(
        {"input_ids": ids, "attention_mask": mask, "response_mask": mask.clone()}, {"failed": [False, False, True]}
    )
    grid, errors, metrics = judge.score(batch)
    assert grid[0, len(rows[0]) - 1].item() == pytest.approx(0.8) and grid[0].count_nonzero() == 1
    assert math.isnan(grid[1, len(rows[1]) - 1].item()) and errors[1].startswith("judge: nonsense answer")
    assert grid[2].count_nonzero() == 0 and metrics["reward_model/judged"] == 2.0  # a failed row is not asked


def test_the_trainer_config_checks_the_judge_before_any_work(tiny_model_path, countdown_data, tmp_path, endpoint):
    from verl.trainer.ppo.config import load_config
    from verl.utils.typed_config import ConfigError

    base = grpo_step_args(
        tiny_model_path, countdown_data, tmp_path, "single_turn", "reward_model.enable=true", "reward_model.kind=judge"
    )
    with pytest.raises(
        ConfigError, match=r"reward_model.judge.base_url: the judge endpoint http://127.0.0.1:9/v1 does not answer"
    ):
        load_config([*base, "reward_model.judge.base_url=http://127.0.0.1:9/v1"])
    with pytest.raises(ConfigError, match=r"reward_model.judge.serve.model_path='' is not a Hugging Face model folder"):
        load_config(base)
    (tmp_path / "rubric.txt").write_text("Was it good?")
    with pytest.raises(ConfigError, match=r"reward_model.judge.rubric: the rubric .* must hold the placeholder"):
        load_config(
            [*base, f"reward_model.judge.base_url={endpoint.url}", f"reward_model.judge.rubric={tmp_path}/rubric.txt"]
        )
    with pytest.raises(
        ConfigError, match="reward_model.judge.api_key_env='NO_SUCH_KEY_VAR': that environment variable is not set"
    ):
        load_config(
            [*base, f"reward_model.judge.base_url={endpoint.url}", "reward_model.judge.api_key_env=NO_SUCH_KEY_VAR"]
        )
    with pytest.raises(ConfigError, match="reward_model.per_turn: the judge scores whole episodes"):
        load_config([*base, f"reward_model.judge.base_url={endpoint.url}", "reward_model.per_turn=true"])
    assert (
        load_config([*base, f"reward_model.judge.base_url={endpoint.url}"]).reward_model.judge.base_url == endpoint.url
    )
