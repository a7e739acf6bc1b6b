"""The gateway's HTTP surface through the real ``openai`` client and raw HTTP: routes, sessions, the sampling
rule, every error with its literal payload, and random bodies that must never get a 5xx."""

from __future__ import annotations

import json
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest
from agent_helpers import PLAIN
from gateway_helpers import EOT, ReplayGenerator

from openmanus_rl.gateway.config import GatewayConfig
from openmanus_rl.gateway.render import ChatRenderer
from openmanus_rl.gateway.server import Gateway
from openmanus_rl.gateway.session import Policy, Session
from verl.protocol import DataProto

USER = [{"role": "user", "content": "hi"}]


class Capped(ReplayGenerator):
    """Answers every prompt with "ok" and the end-of-turn token, cut to ``max_tokens`` (finish "length")."""

    def __init__(self, tokenizer, block: threading.Event | None = None) -> None:
        super().__init__([(tokenizer.encode("ok END more", add_special_tokens=False) + [EOT], "stop")], block)

    def generate_sequences(self, data: DataProto) -> DataProto:
        out = super().generate_sequences(data)
        cap = int(data.meta_info["max_tokens"])
        nt = out.non_tensor_batch
        for i in range(len(out)):
            if len(nt["response_ids"][i]) > cap:
                nt["response_ids"][i], nt["finish_reason"][i] = nt["response_ids"][i][:cap], "length"
                nt["response_log_probs"][i] = nt["response_log_probs"][i][:cap]
        return out


class Served:
    """A gateway with one open session per `open` call, on a `Capped` generator."""

    def __init__(self, tokenizer, do_sample: bool = True, block: threading.Event | None = None, **limits) -> None:
        self.gateway = Gateway(max_body_bytes=4096)
        self.generator = Capped(tokenizer, block)
        config = GatewayConfig(
            program="gateway_helpers:silent_episode",
            sampling=PLAIN,
            **{"max_prompt_length": 256, "max_response_length": 16, "max_trajectory_length": 512, **limits},
        )
        self.policy = Policy(
            ChatRenderer(tokenizer), self.gateway.dispatcher(self.generator), config, do_sample, "policy"
        )

    def open(self) -> tuple[Session, str]:
        session_id, key = self.gateway.new_id()
        session = Session(session_id, key, self.policy, f"1:0:{session_id}:0", 0)
        return session, self.gateway.add(session)

    def client(self, base_url: str, key: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=base_url, api_key=key, max_retries=0)


@pytest.fixture
def served(tokenizer):
    s = Served(tokenizer)
    yield s
    s.gateway.close()


def error(status: int, message: str, code: str | None, param: str | None = None) -> tuple[int, dict]:
    return status, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def failing(call) -> tuple[int, dict]:
    with pytest.raises(openai.APIStatusError) as info:
        call()
    return info.value.status_code, info.value.response.json()


def test_a_session_answers_on_its_path_and_by_its_key(served):
    session, base_url = served.open()
    by_path = served.client(base_url, session.key)
    by_key = served.client(f"{served.gateway.url}/v1", session.key)
    assert [m.id for m in by_path.models.list()] == ["policy"] == [m.id for m in by_key.models.list()]
    reply = by_key.chat.completions.create(model="anything", messages=USER)
    assert reply.model_dump(exclude={"created"}) == {
        "id": f"chatcmpl-{session.id}-0",
        "object": "chat.completion",
        "model": "policy",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {
                    "role": "assistant",
                    "content": "ok END more",
                    "refusal": None,
                    "annotations": None,
                    "audio": None,
                    "function_call": None,
                    "tool_calls": None,
                },
            }
        ],
        "usage": {
            "prompt_tokens": 31,
            "completion_tokens": 4,
            "total_tokens": 35,
            "completion_tokens_details": None,
            "prompt_tokens_details": None,
        },
        "service_tier": None,
        "system_fingerprint": None,
        "metadata": None,
        "moderation": None,
        "gateway": {
            "session": session.id,
            "call": 0,
            "sample": 0,
            "ignored": [],
            "sampling": {
                "temperature": 1.0,
                "top_p": 1.0,
                "top_k": -1,
                "do_sample": True,
                "max_tokens": 16,
                "seed": session.calls[0].seed,
            },
        },
    }
    assert session.calls[0].response_ids == served.generator.replies[0][0]


def test_the_run_sampling_always_applies_and_the_response_says_so(served):
    session, base_url = served.open()
    c = served.client(base_url, session.key)
    raw = c.chat.completions.with_raw_response.create(
        model="p", messages=USER, temperature=0.2, top_p=0.5, seed=7, max_tokens=2, extra_body={"top_k": 5}
    )
    assert raw.headers["x-gateway-sampling"] == "run; ignored=temperature,top_p,top_k,seed"
    body = raw.parse()
    assert body.gateway["ignored"] == ["temperature", "top_p", "top_k", "seed"]
    assert (body.choices[0].finish_reason, body.choices[0].message.content) == ("length", "ok END")
    assert served.generator.metas[0] == {
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "max_tokens": 2,
        "stop_token_ids": [EOT],
        "stop": [],
        "do_sample": True,
    }
    agreeing = c.chat.completions.with_raw_response.create(
        model="p", messages=USER, temperature=1.0, top_p=1.0, max_completion_tokens=500, stop=["END"]
    )
    assert agreeing.headers["x-gateway-sampling"] == "run"
    assert agreeing.parse().choices[0].message.content == "ok "  # cut at the stop string; the ids are kept whole
    assert served.generator.metas[1]["max_tokens"] == 16 and served.generator.metas[1]["stop"] == ["END"]
    assert session.calls[1].response_ids == served.generator.replies[0][0]


def test_greedy_validation_reports_temperature_zero(tokenizer):
    s = Served(tokenizer, do_sample=False)
    try:
        session, base_url = s.open()
        raw = s.client(base_url, session.key).chat.completions.with_raw_response.create(
            model="p", messages=USER, temperature=0
        )
        assert raw.headers["x-gateway-sampling"] == "run"
        assert raw.parse().gateway["sampling"]["temperature"] == 0.0 and s.generator.metas[0]["do_sample"] is False
    finally:
        s.gateway.close()


def test_every_error_is_an_openai_error_object(served):
    session, base_url = served.open()
    c = served.client(base_url, session.key)
    create = lambda **kw: c.chat.completions.create(model="p", **{"messages": USER, **kw})  # noqa: E731
    assert failing(lambda: served.client(f"{served.gateway.url}/v1", "gw-wrong").models.list()) == error(
        401, "unknown API key: send your episode's key as 'Authorization: Bearer <key>'", "invalid_api_key"
    )
    assert failing(lambda: served.client(base_url, "gw-wrong").models.list()) == error(
        401, "unknown API key: send your episode's key as 'Authorization: Bearer <key>'", "invalid_api_key"
    )
    assert failing(lambda: served.client(f"{served.gateway.url}/sessions/nope/v1", session.key).models.list()) == error(
        404, "no session 'nope': each episode's base URL names its session", "session_not_found"
    )
    assert failing(lambda: create(stream=True)) == error(
        400,
        "streaming is not supported: send stream=false (each call is answered whole)",
        "unsupported_parameter",
        "stream",
    )
    assert failing(lambda: create(n=2)) == error(
        400, "n must be 1 (one reply per call), got 2", "unsupported_parameter", "n"
    )
    assert failing(lambda: create(messages=[{"role": "robot", "content": "x"}])) == error(
        400,
        "messages.0.role: Input should be 'system', 'developer', 'user', 'assistant' or 'tool'",
        "invalid_value",
        "messages.0.role",
    )
    assert failing(lambda: create(messages=[])) == error(
        400, "messages: List should have at least 1 item after validation, not 0", "invalid_value", "messages"
    )
    assert failing(lambda: create(messages=[{"role": "user"}])) == error(
        400, "messages.0: a user message needs content", "invalid_value", "messages.0.content"
    )
    assert failing(lambda: create(max_tokens=0)) == error(
        400, "max_tokens: Input should be greater than or equal to 1", "invalid_value", "max_tokens"
    )
    bad_call = {
        "role": "assistant",
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "add", "arguments": "[1]"}}],
    }
    assert failing(lambda: create(messages=USER + [bad_call])) == error(
        400,
        "messages.1.tool_calls.0.function.arguments: the arguments must be a JSON object",
        "invalid_value",
        "messages.1.tool_calls.0.function.arguments",
    )
    long = [{"role": "user", "content": "word " * 300}]
    assert failing(lambda: create(messages=long)) == error(
        400, "the prompt is 331 tokens, above max_prompt_length=256", "context_length_exceeded", "messages"
    )
    assert failing(lambda: create(messages=[{"role": "user", "content": "x" * 5000}])) == error(
        413, "the body is larger than 4096 bytes", "body_too_large"
    )
    http = httpx.Client(base_url=base_url, headers={"authorization": f"Bearer {session.key}"})
    response = http.post("/chat/completions", content=b"{not json")
    assert (response.status_code, response.json()) == error(
        400,
        "the body is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        "invalid_json",
    )
    response = http.post("/chat/completions", json=[1])
    assert (response.status_code, response.json()) == error(
        400, "the body must be a JSON object, got list", "invalid_body"
    )
    response = http.get("/chat/completions")
    assert (response.status_code, response.json()) == error(
        405, f"GET /sessions/{session.id}/v1/chat/completions: Method Not Allowed", "method_not_allowed"
    )
    response = http.get(f"{served.gateway.url}/v2/models")
    assert (response.status_code, response.json()) == error(404, "GET /v2/models: Not Found", "not_found")
    session.close()
    assert failing(lambda: create()) == error(
        404, f"session {session.id} is closed: its episode ended", "session_closed"
    )
    served.gateway.remove(session)
    assert failing(lambda: create()) == error(
        404, f"no session '{session.id}': each episode's base URL names its session", "session_not_found"
    )


def test_a_call_past_the_token_budget_is_refused_and_marks_the_episode_truncated(tokenizer):
    s = Served(tokenizer, max_prompt_length=64, max_trajectory_length=84, max_response_length=8)
    try:
        session, base_url = s.open()
        c, messages = s.client(base_url, session.key), list(USER)
        reply = c.chat.completions.create(model="p", messages=messages)
        messages += [
            {"role": "assistant", "content": reply.choices[0].message.content},
            {"role": "user", "content": "and more words to read"},
        ]
        assert failing(lambda: c.chat.completions.create(model="p", messages=messages)) == error(
            400,
            "the conversation's 50 tokens leave no room for a reply: at most 20 tokens may follow its first "
            "prompt (max_trajectory_length - max_prompt_length)",
            "context_length_exceeded",
            "messages",
        )
        assert session.truncated and len(session.calls) == 1
    finally:
        s.gateway.close()


def test_a_second_call_while_one_is_out_is_refused(tokenizer):
    release = threading.Event()
    s = Served(tokenizer, block=release)
    try:
        session, base_url = s.open()
        c = s.client(base_url, session.key)
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(c.chat.completions.create, model="p", messages=USER)
            while not session._busy:
                threading.Event().wait(0.01)
            assert failing(lambda: c.chat.completions.create(model="p", messages=USER)) == error(
                409, f"session {session.id} is answering another call: send one call at a time", "session_busy"
            )
            release.set()
            assert first.result().choices[0].message.content == "ok END more"
    finally:
        release.set()
        s.gateway.close()


def _random_json(rng: random.Random, depth: int = 0):
    kinds = ["null", "bool", "int", "float", "str"] + (["list", "dict"] if depth < 3 else [])
    kind = rng.choice(kinds)
    if kind == "list":
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == "dict":
        keys = ["role", "content", "messages", "tools", "type", "function", "name", "arguments", "tool_calls", "x"]
        return {rng.choice(keys): _random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return {
        "null": None,
        "bool": rng.random() < 0.5,
        "int": rng.randint(-5, 10**6),
        "str": rng.choice(
            ["", "user", "assistant", "tool", "\u0000", "<|im_end|>", "<tool_call>{}</tool_call>", '{"a": 1}']
        ),
        "float": rng.choice([0.5, -1e308, 1e308, 3.0]),
    }[kind]


def _mutated(rng: random.Random) -> dict:
    body = {
        "model": "p",
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "add", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c", "content": "1"},
        ],
        "tools": [{"type": "function", "function": {"name": "add", "parameters": {}}}],
        "max_tokens": 4,
        "temperature": 0.7,
        "stop": ["x"],
        "tool_choice": "auto",
    }
    for _ in range(rng.randint(1, 3)):
        target = body
        path = rng.choice(
            [
                ["model"],
                ["messages"],
                ["messages", 0],
                ["messages", 1, "tool_calls", 0, "function"],
                ["messages", 2, "content"],
                ["tools", 0, "function", "name"],
                ["max_tokens"],
                ["stop"],
                ["tool_choice"],
                ["temperature"],
                ["n"],
                ["stream"],
                ["messages", 1, "role"],
            ]
        )
        try:
            for part in path[:-1]:
                target = target[part]
            target[path[-1]] = _random_json(rng)
        except (KeyError, IndexError, TypeError):
            continue
    return body


def test_random_and_malformed_bodies_never_get_a_server_error(served):
    rng = random.Random(1234)
    session, base_url = served.open()
    statuses = []
    with httpx.Client(base_url=base_url, headers={"authorization": f"Bearer {session.key}"}, timeout=30) as http:
        for i in range(300):
            kind = i % 3
            if kind == 0:
                content = bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
            elif kind == 1:
                content = json.dumps(_random_json(rng)).encode()
            else:
                content = json.dumps(_mutated(rng)).encode()
            response = http.post("/chat/completions", content=content)
            statuses.append(response.status_code)
            assert response.status_code < 500, (content, response.text)
            if response.status_code >= 400:
                assert set(response.json()["error"]) == {"message", "type", "param", "code"}
    assert 200 in statuses and 400 in statuses
