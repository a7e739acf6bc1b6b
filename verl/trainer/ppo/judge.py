"""An LLM judge as the reward (``reward_model.kind=judge``): each episode read through a rubric, asked over the
OpenAI chat-completions API.

The episode is the row's real tokens decoded (special tokens dropped) and put in the rubric's
``{episode}``. The score (``judge.answer``):

    yes_probability:  p = sum_{t in Y} e^{lp_t} / (sum_{t in Y} e^{lp_t} + sum_{t in N} e^{lp_t})
                      over the first reply token's top log-probs (20 asked for, at temperature 1: the
                      model's own distribution), Y the tokens that read "yes" and N "no" (case and
                      surrounding space ignored); neither among them: a nonsense answer
    number:           the first number in the reply (greedy), which must lie in [0, 1]

Calls run ``max_concurrency`` at a time, each bounded by ``timeout_s`` and retried ``retries`` times on a
connection error, a timeout or a 5xx (backoff 0.5 s, doubling); a 4xx, a nonsense answer or the retries
spent fail the episode, with the reason. Every answered question is cached by the sha256 of its request
body: asked again (the same episode text) it is not sent. The endpoint is ``judge.base_url`` (its key from
the environment variable ``judge.api_key_env``), or a `ServedJudge` the run starts, watches and restarts.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import string
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import requests
import torch

from verl.protocol import DataProto
from verl.workers.config import JudgeConfig, JudgeServeConfig

DEFAULT_RUBRIC = Path(__file__).resolve().parents[1] / "config" / "judge_rubric.txt"
TOP_LOGPROBS = 20
BACKOFF_S = 0.5
START_TIMEOUT_S = 600.0  # a served judge's engine start (model load, KV cache) takes well under this
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)")


class JudgeError(RuntimeError):
    """One episode could not be judged; the message says why."""


class JudgeUnavailable(RuntimeError):
    """The served judge could not be brought back."""


def load_rubric(path: str | None) -> str:
    """The rubric template (``path``, or the default one); ValueError unless its only placeholder is ``{episode}``."""
    file = Path(path) if path else DEFAULT_RUBRIC
    if not file.is_file():
        raise ValueError(f"the rubric {file} does not exist")
    text = file.read_text()
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError as exc:
        raise ValueError(
            f"the rubric {file} is not a valid template ({exc}); write literal braces as {{{{ and }}}}"
        ) from None
    if fields != {"episode"}:
        raise ValueError(
            f"the rubric {file} must hold the placeholder {{episode}} and no other; it holds {sorted(fields) or 'none'}"
        )
    return text


def yes_probability(top: list[dict]) -> float:
    """``P(yes) / (P(yes) + P(no))`` over OpenAI ``top_logprobs`` entries (``token``, ``logprob``); `JudgeError` when
    neither word is among them."""
    yes = sum(math.exp(e["logprob"]) for e in top if e["token"].strip().lower() == "yes")
    no = sum(math.exp(e["logprob"]) for e in top if e["token"].strip().lower() == "no")
    if yes + no == 0:
        raise JudgeError(f"nonsense answer: neither yes nor no among the top tokens {[e['token'] for e in top][:8]}")
    return yes / (yes + no)


def first_number(text: str) -> float:
    """The first number in ``text``, in [0, 1]; `JudgeError` otherwise."""
    match = NUMBER.search(text)
    if match is None:
        raise JudgeError(f"nonsense answer: no number in {text[:80]!r}")
    value = float(match.group())
    if not 0.0 <= value <= 1.0:
        raise JudgeError(f"the answer {value} is outside [0, 1]")
    return value


def endpoint_model(base_url: str, api_key: str | None, timeout_s: float) -> str:
    """The first model ``GET {base_url}/models`` lists; `JudgeError` when the endpoint does not answer."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = requests.get(f"{base_url.rstrip('/')}/models", headers=headers, timeout=timeout_s)
        response.raise_for_status()
        return str(response.json()["data"][0]["id"])
    except (requests.RequestException, ValueError, KeyError, IndexError) as exc:
        raise JudgeError(f"the judge endpoint {base_url} does not answer GET /models: {exc}") from None


def judge_failure_problem(errors: dict[int, str], asked: int, limit: float) -> str | None:
    """Why a step must stop when the judge failed (``errors``: row -> reason) on more than ``limit`` of the ``asked``
    episodes (``reward_model.judge.max_failed_fraction``); None otherwise."""
    if not asked or len(errors) / asked <= limit:
        return None
    reasons = list(errors.values())
    common = max(set(reasons), key=reasons.count)
    return (
        f"the judge failed on {len(errors)} of {asked} episodes (reward_model.judge.max_failed_fraction={limit}); "
        f"most common error: {common[:500]}"
    )


class JudgeClient:
    """Asks one endpoint; thread-safe (its cache is locked)."""

    def __init__(self, cfg: JudgeConfig, base_url: str, model: str, api_key: str | None, rubric: str):
        self.cfg, self.base_url, self.model, self.rubric = cfg, base_url.rstrip("/"), model, rubric
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._cache: dict[str, float] = {}
        self._lock = threading.Lock()

    def request_body(self, episode: str) -> dict:
        content = self.rubric.format(episode=episode)
        body = {"model": self.model, "messages": [{"role": "user", "content": content}], "seed": 0}
        if self.cfg.answer == "yes_probability":
            body.update(max_tokens=1, temperature=1.0, logprobs=True, top_logprobs=TOP_LOGPROBS)
        else:
            body.update(max_tokens=self.cfg.max_tokens, temperature=0.0)
        return body

    def _post(self, body: dict) -> dict:
        """The response JSON; retried on connection errors, timeouts and 5xx; `JudgeError` when it cannot be had."""
        last = ""
        for attempt in range(self.cfg.retries + 1):
            if attempt:
                time.sleep(BACKOFF_S * 2 ** (attempt - 1))
            try:
                response = requests.post(
                    f"{self.base_url}/chat/completions", json=body, headers=self.headers, timeout=self.cfg.timeout_s
                )
            except requests.Timeout:
                last = f"timed out after {self.cfg.timeout_s:g} s"
                continue
            except requests.RequestException as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code >= 500:
                last = f"HTTP {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code >= 400:
                raise JudgeError(f"HTTP {response.status_code}: {response.text[:300]}")
            try:
                return response.json()
            except ValueError:
                raise JudgeError(f"the reply is not JSON: {response.text[:200]!r}") from None
        raise JudgeError(f"{self.cfg.retries + 1} attempt(s) failed; the last: {last}")

    def ask(self, episode: str) -> tuple[float, bool]:
        """The episode's score and whether it came from the cache; `JudgeError` when it cannot be judged."""
        body = self.request_body(episode)
        key = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        with self._lock:
            if key in self._cache:
                return self._cache[key], True
        reply = self._post(body)
        try:
            choice = reply["choices"][0]
            if self.cfg.answer == "yes_probability":
                score = yes_probability(choice["logprobs"]["content"][0]["top_logprobs"])
            else:
                score = first_number(choice["message"]["content"] or "")
        except (KeyError, IndexError, TypeError) as exc:
            raise JudgeError(
                f"the reply lacks {exc} (answer={self.cfg.answer} needs "
                f"{'logprobs with top_logprobs' if self.cfg.answer == 'yes_probability' else 'content'})"
            ) from None
        with self._lock:
            self._cache[key] = score
        return score, False

    def score(self, episodes: list[str]) -> tuple[list[float | str], dict[str, float]]:
        """Each episode's score, or the reason it failed (a str), in order; and ``reward_model/*`` call metrics."""
        latencies: list[float] = []
        hits = 0

        def one(episode: str) -> float | str:
            nonlocal hits
            start = time.perf_counter()
            try:
                score, cached = self.ask(episode)
            except JudgeError as exc:
                return str(exc)
            if cached:
                hits += 1
            else:
                latencies.append(time.perf_counter() - start)
            return score

        with ThreadPoolExecutor(self.cfg.max_concurrency, thread_name_prefix="judge") as pool:
            results = list(pool.map(one, episodes))
        metrics = {"reward_model/judge_calls": float(len(latencies)), "reward_model/cache_hits": float(hits)}
        if latencies:
            metrics["reward_model/latency_p50_s"] = float(np.percentile(latencies, 50))
            metrics["reward_model/latency_p95_s"] = float(np.percentile(latencies, 95))
        return results, metrics


class ServedJudge:
    """A `verl.workers.judge_server.JudgeServer` as a Ray actor on ``serve.num_cpus`` CPUs of its own; `ensure_ready`
    restarts it when it died or is silent on ``GET /health`` for ``serve.hang_s``, up to ``serve.max_restarts``
    failed restarts in a row."""

    def __init__(self, serve: JudgeServeConfig, device: str):
        self.serve, self.device = serve, device
        self.actor = None
        self.url = ""
        self.restarts = 0
        self._start()

    def _start(self) -> None:
        import ray

        from verl.workers.judge_server import JudgeServer

        s = self.serve
        engine = {"kv_cache_gb": s.kv_cache_gb, "max_model_len": s.max_model_len, "dtype": s.dtype}
        actor_cls = ray.remote(JudgeServer).options(
            num_cpus=s.num_cpus, num_gpus=s.num_gpus if self.device == "cuda" else 0, max_concurrency=4
        )
        self.actor = actor_cls.remote(s.model_path, engine, self.device, s.num_threads)
        try:
            self.url = ray.get(self.actor.url.remote(), timeout=START_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            raise JudgeUnavailable(
                f"the served judge did not start within {START_TIMEOUT_S:g} s (are its "
                f"{s.num_cpus} CPU(s) free? reward_model.judge.serve.num_cpus)"
            ) from None

    def healthy(self) -> bool:
        try:
            return requests.get(self.url.removesuffix("/v1") + "/health", timeout=self.serve.hang_s).ok
        except requests.RequestException:
            return False

    def ensure_ready(self) -> None:
        """Return once the judge answers; restart it if it does not (`JudgeUnavailable` past the restart limit)."""
        import ray

        failures = 0
        while not self.healthy():
            if failures >= self.serve.max_restarts:
                raise JudgeUnavailable(
                    f"the served judge ({self.serve.model_path}) did not come back after "
                    f"{failures} restart(s) (reward_model.judge.serve.max_restarts)"
                )
            print(f"[judge] the served judge at {self.url} does not answer: restarting it", flush=True)
            ray.kill(self.actor, no_restart=True)
            try:
                self._start()
            except Exception as exc:  # noqa: BLE001 - a failed start counts as a failed restart
                print(f"[judge] restart failed: {type(exc).__name__}: {exc}", flush=True)
            failures += 1
            self.restarts += 1

    def close(self) -> None:
        import ray

        if self.actor is not None:
            try:
                ray.get(self.actor.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - a dead or hung judge is killed below anyway
                pass
            ray.kill(self.actor, no_restart=True)
            self.actor = None


class Judge:
    """The trainer's judge: its endpoint (external or served) and client, and the batch's scores."""

    def __init__(self, cfg: JudgeConfig, device: str, tokenizer):
        self.cfg, self.tokenizer = cfg, tokenizer
        self.served = ServedJudge(cfg.serve, device) if cfg.base_url is None else None
        base_url = self.served.url if self.served is not None else cfg.base_url
        api_key = cfg.api_key()
        model = cfg.model or endpoint_model(base_url, api_key, cfg.timeout_s)
        self.client = JudgeClient(cfg, base_url, model, api_key, load_rubric(cfg.rubric))
        print(f"[judge] {model} at {base_url} ({'served by this run' if self.served else 'external'})", flush=True)

    def episode_text(self, batch: DataProto, row: int) -> str:
        mask = batch.batch["attention_mask"][row].bool()
        return self.tokenizer.decode(batch.batch["input_ids"][row][mask].tolist(), skip_special_tokens=True)

    def score(self, batch: DataProto) -> tuple[torch.Tensor, dict[int, str], dict[str, float]]:
        """``(B, T)`` scores with each live row's judge score on its last model token (NaN where it failed), the
        failed rows' reasons, and the call metrics."""
        if self.served is not None:
            self.served.ensure_ready()
        nt, mask = batch.non_tensor_batch, batch.batch["response_mask"]
        live = [i for i in range(len(batch)) if not bool(nt["failed"][i]) and mask[i].any()]
        results, metrics = self.client.score([self.episode_text(batch, i) for i in live])
        metrics["reward_model/judged"] = float(len(live))
        grid = torch.zeros(mask.shape, dtype=torch.float32)
        errors: dict[int, str] = {}
        for i, result in zip(live, results):
            last = int(mask[i].nonzero().flatten()[-1])
            if isinstance(result, str):
                grid[i, last] = float("nan")
                errors[i] = f"judge: {result}"
            else:
                grid[i, last] = result
        if self.served is not None:
            metrics["reward_model/judge_restarts"] = float(self.served.restarts)
        return grid, errors, metrics

    def close(self) -> None:
        if self.served is not None:
            self.served.close()
