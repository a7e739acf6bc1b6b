"""The trainer scores tokens under the distribution the engine sampled from (temperature, top-k, top-p),
and truncated importance sampling (TIS) reweights the policy loss by min(exp(old - rollout), cap).

Hand-made logits are logs of round probabilities, so softmax gives those probabilities back and every
filter decision can be checked by hand: cumulative sums run from the smallest probability, and top-p
drops the tokens whose cumulative sum is <= 1 - top_p (the largest token is always kept).
"""

import math

import pytest
import torch
from grad_capture import update_capturing_grads
from test_actor_update import batch
from test_actor_update import make_actor as make_update_actor

from verl import core_algos
from verl.protocol import DataProto
from verl.utils.batch import packed_proto
from verl.utils.torch_functional import FILTERED_LOGIT, filter_logits, logprobs_from_logits
from verl.workers.actor import PPOActor
from verl.workers.rollout.base import Sampling
from verl.workers.token_logprobs import scoring_sampling

pytestmark = pytest.mark.in_process_engine

PLAIN = {"temperature": 1.0, "top_p": 1.0, "top_k": -1}  # the unfiltered, untempered distribution
LN2 = math.log(2.0)


def logits_of(*probs: float) -> torch.Tensor:
    return torch.tensor(probs, dtype=torch.float64).log().float()


def kept(filtered: torch.Tensor) -> list[int]:
    return (filtered != FILTERED_LOGIT).nonzero().flatten().tolist()


# ----------------------------------------------------------------------------- filter_logits by hand

# token:        0    1    2    3
FOUR = logits_of(0.3, 0.1, 0.4, 0.2)
# ascending: t1 0.1, t3 0.2, t0 0.3, t2 0.4 -> cumulative 0.1, 0.3, 0.6, 1.0

# token:        0     1    2    3    4
FIVE = logits_of(0.05, 0.3, 0.1, 0.4, 0.15)


def test_top_k_only():
    # k = 2: the two largest are t2 (0.4) and t0 (0.3)
    out = filter_logits(FOUR, top_k=2)
    assert kept(out) == [0, 2]
    assert out[[1, 3]].tolist() == [FILTERED_LOGIT, FILTERED_LOGIT]
    assert torch.equal(out[[0, 2]], FOUR[[0, 2]])  # kept logits are untouched
    # ties with the k-th largest survive: logits [1, 2, 2, 0], k = 1 -> k-th largest is 2, both 2s stay
    assert kept(filter_logits(torch.tensor([1.0, 2.0, 2.0, 0.0]), top_k=1)) == [1, 2]
    # k = 3 keeps t2, t0, t3
    assert kept(filter_logits(FOUR, top_k=3)) == [0, 2, 3]


def test_top_p_only():
    # p = 0.8 -> drop cumulative <= 0.2: only t1 (0.1); t3's cumulative 0.3 > 0.2 stays
    assert kept(filter_logits(FOUR, top_p=0.8)) == [0, 2, 3]
    # p = 0.65 -> drop cumulative <= 0.35: t1 (0.1) and t3 (0.3)
    assert kept(filter_logits(FOUR, top_p=0.65)) == [0, 2]
    # p = 0.3 -> drop cumulative <= 0.7: t1, t3, t0 (0.6); t2 is the largest and always stays
    assert kept(filter_logits(FOUR, top_p=0.3)) == [2]
    # p = 0 -> every cumulative sum is <= 1, yet the largest token is kept
    assert kept(filter_logits(FOUR, top_p=0.0)) == [2]


def test_top_k_then_top_p_renormalises_after_top_k():
    # top-p alone at 0.8 on FIVE: ascending t0 0.05, t2 0.1, t4 0.15, t1 0.3, t3 0.4
    # -> cumulative 0.05, 0.15, 0.30, 0.60, 1.0; drop <= 0.2: t0, t2 -> t4 stays
    assert kept(filter_logits(FIVE, top_p=0.8)) == [1, 3, 4]
    # top-k 3 first keeps t3 0.4, t1 0.3, t4 0.15 (mass 0.85), renormalised:
    # t4 0.15/0.85 = 0.17647, t1 0.3/0.85 = 0.35294, t3 0.4/0.85 = 0.47059
    # -> cumulative 0.17647, 0.52941, 1.0; drop <= 0.2: t4 -> only t1, t3 stay
    out = filter_logits(FIVE, top_k=3, top_p=0.8)
    assert kept(out) == [1, 3]
    # the log-probs the trainer then scores are those of the renormalised pair: 0.3/0.7 and 0.4/0.7
    lp = logprobs_from_logits(out.expand(2, 5), torch.tensor([1, 3]))
    torch.testing.assert_close(lp, torch.tensor([math.log(3 / 7), math.log(4 / 7)]), atol=1e-6, rtol=0)


def test_keep_rescues_a_filtered_token():
    # t4 is dropped by top-p after top-k (above); as a sampled token it stays scorable
    out = filter_logits(FIVE, top_k=3, top_p=0.8, keep=torch.tensor(4))
    assert kept(out) == [1, 3, 4]
    assert out[4] == FIVE[4]
    # t0 is dropped already by top-k; keep rescues it too
    assert kept(filter_logits(FIVE, top_k=3, top_p=0.8, keep=torch.tensor(0))) == [0, 1, 3]
    # keep of a token that is kept anyway changes nothing
    assert torch.equal(
        filter_logits(FIVE, top_k=3, top_p=0.8, keep=torch.tensor(3)), filter_logits(FIVE, top_k=3, top_p=0.8)
    )


def test_batched_rows_are_filtered_independently():
    # (B=2, T=2, V=4) with keep of shape (B, T), top-p 0.65 (drop cumulative <= 0.35) at every position
    logits = torch.stack([torch.stack([FOUR, FIVE[:4]]), torch.stack([FOUR.flip(0), FOUR])])
    keep = torch.tensor([[1, 3], [0, 2]])
    out = filter_logits(logits, top_p=0.65, keep=keep)
    # (0, 0) FOUR: kept {0, 2} (test_top_p_only), plus the sampled t1
    assert kept(out[0, 0]) == [0, 1, 2]
    # (0, 1) FIVE[:4] = [0.05, 0.3, 0.1, 0.4] / 0.85 = [0.0588, 0.3529, 0.1176, 0.4706]:
    # ascending t0, t2, t1, t3 -> cumulative 0.0588, 0.1765, 0.5294, 1.0 -> drop t0, t2; sampled t3 was kept anyway
    assert kept(out[0, 1]) == [1, 3]
    # (1, 0) FOUR flipped = [0.2, 0.4, 0.1, 0.3]: ascending t2, t0, t3, t1 -> 0.1, 0.3, 0.6, 1.0
    # -> drop t2, t0; t0 sampled
    assert kept(out[1, 0]) == [0, 1, 3]
    # (1, 1) FOUR again, sampled t2: {0, 2}
    assert kept(out[1, 1]) == [0, 2]


def test_no_filter_returns_the_same_tensor():
    for kwargs in ({}, {"top_k": -1, "top_p": 1.0}, {"top_k": 0}, {"top_k": 4}, {"top_k": 10, "top_p": 1.0}):
        assert filter_logits(FOUR, **kwargs) is FOUR, kwargs  # k >= vocab filters nothing either
    assert filter_logits(FOUR, top_k=4, keep=torch.tensor(1)) is FOUR


@pytest.mark.slow  # importing vLLM takes ~10 s
def test_filter_matches_vllm_pytorch_sampler():
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

    g = torch.Generator().manual_seed(0)
    for top_k, top_p in ((20, 1.0), (1, 1.0), (-1, 0.9), (-1, 0.5), (20, 0.9), (5, 0.7), (200, 0.95)):
        logits = torch.randn(16, 256, generator=g) * 3
        ours = filter_logits(logits, top_k, top_p) != FILTERED_LOGIT
        k = torch.full((16,), top_k, dtype=torch.long) if top_k > 0 else None
        p = torch.full((16,), top_p, dtype=torch.float32) if top_p < 1 else None
        for cpu_sync in (False, True):
            theirs = apply_top_k_top_p_pytorch(logits.clone(), k, p, allow_cpu_sync=cpu_sync).isfinite()
            assert torch.equal(ours, theirs), (top_k, top_p, cpu_sync)
        assert ours.sum(-1).min() >= 1


# ----------------------------------------------------------------------------- truncated importance sampling


def test_truncated_is_weights_by_hand():
    old = torch.tensor([[-1.0, -1.0, -1.0, -1.0, 0.0]], requires_grad=True)
    # old - rollout = 0, ln 2, -ln 2, ln 4, 30 -> exp = 1, 2, 0.5, 4, e^20 (log-ratio clamped at 20) -> capped at 3
    rollout = torch.tensor([[-1.0, -1.0 - LN2, -1.0 + LN2, -1.0 - 2 * LN2, -30.0]])
    w = core_algos.truncated_is_weights(old, rollout, cap=3.0)
    torch.testing.assert_close(w, torch.tensor([[1.0, 2.0, 0.5, 3.0, 3.0]]), atol=1e-6, rtol=0)
    assert not w.requires_grad  # a constant in the loss
    assert core_algos.truncated_is_weights(old, rollout, cap=10.0)[0, 3].item() == pytest.approx(4.0, rel=1e-6)


def test_policy_loss_with_token_weights_at_ratio_one():
    # ratio 1 (log_prob = old): every per-token loss is -A, weighted: loss = -sum(w * A * m) / sum(m)
    old = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -1.2, -4.0]])
    A = torch.tensor([[1.0, -2.0, 0.5], [3.0, 1.0, 0.0]])
    m = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    w = torch.tensor([[1.0, 2.0, 0.5], [3.0, 1.0, 9.0]])  # 9 sits on a masked token: it must not count
    lp = old.clone().requires_grad_(True)
    loss, clipfrac, kl, _ = core_algos.compute_policy_loss(old, lp, A, m, cliprange=0.2, token_weights=w)
    # w*A on the mask: 1, -4, 0.25, 9, 1 -> sum 7.25 over 5 tokens
    assert loss.item() == pytest.approx(-7.25 / 5, abs=1e-6)
    assert clipfrac.item() == 0.0 and kl.item() == 0.0
    unweighted, *_ = core_algos.compute_policy_loss(old, old, A, m, cliprange=0.2)
    assert unweighted.item() == pytest.approx(-(1 - 2 + 0.5 + 3 + 1) / 5, abs=1e-6)  # -0.7
    loss.backward()
    # d loss / d lp_t = -w_t * A_t * ratio_t * m_t / 5
    torch.testing.assert_close(lp.grad, -w * A * m / 5)


def test_policy_loss_weights_apply_after_the_clips():
    # token 1: A = 1, ratio 1.5 -> l1 = -1.5, l2 = -1.2 (clipped at 1.2) -> max = -1.2, times w = 2 -> -2.4
    # token 2: A = -1, ratio 5 -> l1 = 5, l2 = 1.2 -> c1 = 5; dual clip: min(3 * 1, 5) = 3, times w = 0.5 -> 1.5
    old = torch.zeros(1, 2)
    lp = torch.tensor([[math.log(1.5), math.log(5.0)]])
    A = torch.tensor([[1.0, -1.0]])
    w = torch.tensor([[2.0, 0.5]])
    loss, clipfrac, _, lower = core_algos.compute_policy_loss(
        old, lp, A, torch.ones(1, 2), cliprange=0.2, token_weights=w
    )
    assert loss.item() == pytest.approx((-2.4 + 1.5) / 2, abs=1e-6)  # -0.45
    assert clipfrac.item() == 0.5  # l2 > l1 on token 1 only (-1.2 > -1.5; token 2 has 1.2 < 5)
    assert lower.item() == 0.5  # the dual clip bound on token 2


# ----------------------------------------------------------------------------- TIS in the PPO update


def make_actor(path: str, **overrides) -> PPOActor:
    """`test_actor_update`'s actor in micro-batches of 2 rows by a token budget (the YAML's default)."""
    return make_update_actor(path, ppo_micro_batch_size_per_gpu=2, use_dynamic_bsz=True, **overrides)


def test_tis_update_reports_the_capped_weight_mean(tiny_model_path):
    cap = 1.5
    actor = make_actor(tiny_model_path, tis_cap=cap)
    d = batch()
    old = actor.compute_log_prob(d, PLAIN, False, 4, None)["log_probs"]
    d.batch["old_log_probs"] = old
    # rollout = old - ln 2 -> w = 2 -> capped at 1.5 on row 0 cols 0, 1 and on the masked token (row 2, col 1);
    # rollout = old + ln 2 -> w = 0.5 on row 3 col 1; every other token w = 1
    shift = torch.zeros_like(old)
    shift[0, 0] = shift[0, 1] = shift[2, 1] = -LN2
    shift[3, 1] = LN2
    d.batch["rollout_log_probs"] = old + shift
    w = torch.tensor([[cap, cap, 1, 1], [1, 1, 1, 1], [1, cap, 1, 1], [1, 0.5, 1, 1]])
    m = d.batch["response_mask"].float()
    tis_grads, metrics = update_capturing_grads(actor, d, PLAIN)  # one mini-batch of 4 rows in two micro-batches of 2
    # masked mean over the 9 response tokens: (1.5 + 1.5 + 1 + 1) + 1 + (1 + 1) + (1 + 0.5) = 9.5
    assert metrics["actor/tis_weight_mean"] == pytest.approx(9.5 / 9, abs=1e-5)
    assert float(core_algos.masked_mean(w, m)) == pytest.approx(9.5 / 9)
    # ratio 1: pg_loss = -mean_m(w * A) = -(1.5 + 1.5 + 1 + 1 - 1 + 0.5 + 0.5 + 2 - 0.5 * 2) / 9 = -6 / 9
    assert metrics["actor/pg_loss"] == pytest.approx(-6.0 / 9.0, abs=1e-5)

    # at ratio 1 no clip is active, so the weighted loss has the gradient of the plain loss with A * w
    plain = make_actor(tiny_model_path)
    d2 = batch()
    d2.batch["old_log_probs"] = old
    d2.batch["advantages"] = d2.batch["advantages"] * w
    plain_grads, m2 = update_capturing_grads(plain, d2, PLAIN)
    assert "actor/tis_weight_mean" not in m2
    assert m2["actor/pg_loss"] == pytest.approx(-6.0 / 9.0, abs=1e-5)
    for n, g in plain_grads.items():
        torch.testing.assert_close(tis_grads[n], g, atol=1e-6, rtol=1e-4)


def test_tis_needs_rollout_log_probs(tiny_model_path):
    actor = make_actor(tiny_model_path, tis_cap=2.0)
    d = batch()
    d.batch["old_log_probs"] = actor.compute_log_prob(d, PLAIN, False, 4, None)["log_probs"]
    with pytest.raises(KeyError, match="rollout_log_probs"):
        actor.update_policy(d, PLAIN)


# ----------------------------------------------------------------------------- engine vs trainer, like with like

SAMPLED = {"temperature": 0.7, "top_k": 20, "top_p": 0.9}


TEMPERATURE_ONLY = {"temperature": 0.7, "top_k": -1, "top_p": 1.0}


def sample_and_score(worker, sampling: dict, others: tuple[dict, ...] = (), max_tokens: int = 8):
    """Sample 4 rows (prompts of 5, 9, 3, 7 tokens: left padding differs) with ``sampling``; return the engine's
    log-probs, the trainer's under ``sampling`` and under each of ``others`` (all ``(B, T)``), and the response mask."""
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(10, 1000, (k,), generator=g).tolist() for k in (5, 9, 3, 7)]
    meta = {**sampling, "max_tokens": max_tokens}
    gen = worker.generate_sequences(
        DataProto.from_dict(non_tensors={"prompt_ids": prompts, "seed": [0, 1, 2, 3]}, meta_info=meta)
    )
    responses = [list(r) for r in gen.non_tensor_batch["response_ids"]]
    engine_lps = [list(r) for r in gen.non_tensor_batch["response_log_probs"]]
    assert all(len(r) == len(lp) > 0 for r, lp in zip(responses, engine_lps))
    data = packed_proto(prompts, responses, pad_id=2)
    engine = torch.zeros(data.batch["responses"].shape)
    for row, lps in enumerate(engine_lps):
        engine[row, : len(lps)] = torch.tensor(lps)
    scored = []
    for s in (sampling, *others):
        data.meta_info.update(s)
        scored.append(worker.compute_log_prob(data).batch["old_log_probs"])
    return engine, scored, data.batch["response_mask"].bool()


def check_like_with_like(worker):
    engine, (recomputed, raw, tempered), mask = sample_and_score(worker, SAMPLED, others=(PLAIN, TEMPERATURE_ONLY))
    diff = (recomputed - engine).abs()[mask]
    assert diff.max() <= 1e-4, diff
    # without the sampling settings, or with the temperature but no filter, the trainer scores another
    # distribution: the 1e-4 agreement above is not a coincidence of near-uniform logits
    assert (raw - engine).abs()[mask].mean() > 0.01
    assert (tempered - engine).abs()[mask].mean() > 0.01


@pytest.fixture(scope="module")
def hf_worker(tiny_model_path):
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    cfg = {
        "model": {"path": tiny_model_path},
        "actor": {"mixed_precision": "float32", "ppo_mini_batch_size": 4},
        "rollout": {"name": "hf", "dtype": "float32"},
        "num_threads": 1,
    }
    worker = ActorRolloutRefWorker(cfg, role="actor_rollout")
    worker.init_model()
    yield worker
    worker.shutdown()


def test_hf_engine_log_probs_match_the_trainer_under_sampling(hf_worker):
    check_like_with_like(hf_worker)


@pytest.mark.parametrize("sampling", [TEMPERATURE_ONLY, {"temperature": 1.0, "top_k": -1, "top_p": 0.9}])
def test_hf_engine_without_top_k(hf_worker, sampling):
    # top_k -1 must mean no top-k in the engine too (HF's generation default would be 50)
    engine, (recomputed, raw), mask = sample_and_score(hf_worker, sampling, others=(PLAIN,))
    assert (recomputed - engine).abs()[mask].max() <= 1e-4
    assert (raw - engine).abs()[mask].mean() > 0.01


def test_a_call_without_its_sampling_is_refused(hf_worker):
    """The worker has no sampling of its own: each call names the key its ``meta_info`` lacks."""
    rows = packed_proto([[5, 6, 7]], [[8, 9]], pad_id=2)
    for missing in PLAIN:
        rows.meta_info = {key: value for key, value in PLAIN.items() if key != missing}
        with pytest.raises(
            ValueError,
            match=rf"^meta_info has no '{missing}': every generation and log-prob call carries its sampling "
            r"\(temperature, top_p, top_k; the trainer's: actor_rollout_ref.rollout\)$",
        ):
            hf_worker.compute_log_prob(rows)
    prompts = DataProto.from_dict(non_tensors={"prompt_ids": [[5, 6, 7]]}, meta_info={"do_sample": False})
    with pytest.raises(ValueError, match=r"^meta_info has no 'temperature'"):
        hf_worker.generate_sequences(prompts)


def test_greedy_generation_and_how_its_tokens_are_scored():
    """``do_sample=False`` generates at temperature 0; tokens sampled at temperature 0 are scored under the raw
    distribution (temperature 1), with the filters they were generated under."""
    sampled = Sampling(temperature=0.7, top_p=0.9, top_k=20)
    assert sampled.generated(True) == sampled and sampled.generated(False) == Sampling(0.0, 0.9, 20)
    assert scoring_sampling(sampled) == {"temperature": 0.7, "top_p": 0.9, "top_k": 20}
    assert scoring_sampling(sampled.generated(False)) == {"temperature": 1.0, "top_p": 0.9, "top_k": 20}


def test_tokens_sampled_at_temperature_zero_score_as_at_one(hf_worker):
    rows = packed_proto([[5, 6, 7], [10, 11]], [[8, 9], [12]], pad_id=2)
    rows.meta_info.update(PLAIN, temperature=0.0)
    greedy = hf_worker.compute_log_prob(rows).batch["old_log_probs"]
    rows.meta_info.update(PLAIN)
    assert torch.equal(greedy, hf_worker.compute_log_prob(rows).batch["old_log_probs"])


@pytest.mark.slow
def test_vllm_engine_log_probs_match_the_trainer_under_sampling(tiny_model_path):
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    cfg = {
        "model": {"path": tiny_model_path},
        "actor": {"mixed_precision": "float32", "ppo_mini_batch_size": 4},
        "rollout": {"name": "vllm", "dtype": "float32", "kv_cache_gb": 1, "max_model_len": 512},
        "num_threads": 1,
    }
    worker = ActorRolloutRefWorker(cfg, role="actor_rollout")
    worker.init_model()
    try:
        check_like_with_like(worker)
        engine, (recomputed,), mask = sample_and_score(worker, TEMPERATURE_ONLY)
        assert (recomputed - engine).abs()[mask].max() <= 1e-4
    finally:
        worker.shutdown()
