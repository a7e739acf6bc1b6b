"""The PPO update loop without Ray: gradient accumulation is exact, and the policy moves the right way."""

import pytest
import torch
from grad_capture import update_capturing_grads
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import AutoModelForCausalLM

from verl.utils.batch import packed_proto
from verl.utils.fsdp_utils import build_optimizer, build_scheduler
from verl.workers.actor import PPOActor
from verl.workers.config import ActorConfig, OptimConfig

PLAIN = {"temperature": 1.0, "top_p": 1.0, "top_k": -1}  # the unfiltered, untempered distribution


def make_actor(path: str, **overrides) -> PPOActor:
    torch.manual_seed(0)
    module = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    cfg = ActorConfig(
        **{
            "ppo_mini_batch_size": 4,
            "ppo_micro_batch_size_per_gpu": 4,
            "use_dynamic_bsz": False,
            "mixed_precision": "float32",
            "shuffle": False,
            "grad_clip": 1e9,
            "optim": OptimConfig(lr=1e-3, weight_decay=0.0),
            **overrides,
        }
    )
    opt = build_optimizer(module, cfg.optim)
    return PPOActor(module, opt, build_scheduler(opt, cfg.optim), cfg, "cpu", cfg.mixed_precision)


def batch():
    # two prompts, responses of different lengths; row 2 has an observation gap (mask 0) in its response
    prompts = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10]]
    responses = [[11, 12, 13, 14], [15], [16, 17, 18], [19, 20]]
    masks = [[1, 1, 1, 1], [1], [1, 0, 1], [1, 1]]
    d = packed_proto(prompts, responses, response_masks=masks, pad_id=2)
    d.batch["advantages"] = (
        torch.tensor([[1.0, 1, 1, 1], [-1.0, 0, 0, 0], [0.5, 0, 0.5, 0], [2.0, -2, 0, 0]]) * d.batch["response_mask"]
    )
    return d


def grads_of_one_update(actor: PPOActor, data) -> dict[str, torch.Tensor]:
    lp = actor.compute_log_prob(data, sampling=PLAIN, with_entropy=False, micro_batch_rows=4, max_tokens=None)[
        "log_probs"
    ]
    data.batch["old_log_probs"] = lp
    return update_capturing_grads(actor, data, PLAIN)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_micro_batching_matches_one_big_batch(tiny_model_path, mode):
    full, m_full = grads_of_one_update(make_actor(tiny_model_path, loss_agg_mode=mode), batch())
    micro, m_micro = grads_of_one_update(
        make_actor(tiny_model_path, loss_agg_mode=mode, ppo_micro_batch_size_per_gpu=1), batch()
    )
    dyn, _ = grads_of_one_update(
        make_actor(tiny_model_path, loss_agg_mode=mode, use_dynamic_bsz=True, ppo_max_token_len_per_gpu=10), batch()
    )
    for k in full:
        # fp32 sums in another order: on AVX512-BF16 boxes single elements differ by up to ~5e-6
        torch.testing.assert_close(micro[k], full[k], atol=2e-5, rtol=1e-4)
        torch.testing.assert_close(dyn[k], full[k], atol=2e-5, rtol=1e-4)
    assert m_micro["actor/pg_loss"] == pytest.approx(m_full["actor/pg_loss"], abs=1e-6)
    assert m_micro["actor/grad_norm"] == pytest.approx(m_full["actor/grad_norm"], rel=1e-4)


def test_first_step_loss_is_minus_mean_advantage(tiny_model_path):
    # ratio = 1 at the first step, so the token-mean loss is -mean_m(A):
    # A over mask = [1,1,1,1, -1, 0.5,0.5, 2,-2] -> sum 4, 9 tokens
    _, metrics = grads_of_one_update(make_actor(tiny_model_path), batch())
    assert metrics["actor/pg_loss"] == pytest.approx(-4.0 / 9.0, abs=1e-6)
    assert metrics["actor/pg_clipfrac"] == 0.0
    assert metrics["actor/ppo_kl"] == pytest.approx(0.0, abs=1e-7)
    assert metrics["actor/lr"] == 1e-3


def test_positive_advantage_raises_log_prob(tiny_model_path):
    actor = make_actor(tiny_model_path, ppo_epochs=4, optim=OptimConfig(lr=1e-2, weight_decay=0.0))
    d = packed_proto([[1, 2, 3]] * 4, [[30, 31, 32]] * 4, pad_id=2)
    d.batch["advantages"] = torch.ones(4, 3)
    before = actor.compute_log_prob(d, PLAIN, False, 4, None)["log_probs"]
    d.batch["old_log_probs"] = before
    actor.update_policy(d, PLAIN)
    after = actor.compute_log_prob(d, PLAIN, False, 4, None)["log_probs"]
    assert (after - before)[0].min() > 0.05, (before[0], after[0])


def test_padding_columns_do_not_change_log_probs(tiny_model_path):
    actor = make_actor(tiny_model_path)
    narrow = packed_proto([[1, 2, 3]], [[11, 12]], pad_id=2)
    wide = packed_proto([[1, 2, 3]], [[11, 12]], pad_id=2, prompt_width=6, response_width=5)
    a = actor.compute_log_prob(narrow, PLAIN, False, 4, None)["log_probs"]
    b = actor.compute_log_prob(wide, PLAIN, False, 4, None)["log_probs"]
    torch.testing.assert_close(b[:, :2], a)
    assert b[:, 2:].abs().sum() == 0


def test_log_probs_at_learned_positions_only(tiny_model_path):
    # column 1 is an observation in both rows, column 2 in row 0 only: 0 there whatever the batching;
    # every learned position equals a plain full-vocabulary forward
    actor = make_actor(tiny_model_path)
    prompts, responses = [[1, 2, 3], [4, 5]], [[11, 12, 13, 14], [15, 16, 17]]
    masks = [[1, 0, 0, 1], [1, 0, 1]]
    d = packed_proto(prompts, responses, response_masks=masks, pad_id=2)
    together = actor.compute_log_prob(d, PLAIN, True, 4, None)
    alone = actor.compute_log_prob(d, PLAIN, True, 1, None)  # one row per micro-batch: other columns reach the head
    scored = d.batch["response_mask"].bool()
    with torch.no_grad():
        for i, (p, r) in enumerate(zip(prompts, responses)):
            logp = torch.log_softmax(actor.module(input_ids=torch.tensor([p + r])).logits[0].float(), dim=-1)
            for t, token in enumerate(r):
                want = logp[len(p) - 1 + t, token] if scored[i, t] else torch.tensor(0.0)
                torch.testing.assert_close(together["log_probs"][i, t], want, atol=1e-5, rtol=0)
    torch.testing.assert_close(alone["log_probs"], together["log_probs"], atol=1e-5, rtol=0)
    assert together["entropys"][~scored].abs().sum() == 0 and (together["entropys"][scored] > 0).all()


@pytest.mark.parametrize("entropy_coeff", [0.0, 0.01])
def test_lm_head_in_chunks_gives_the_same_numbers_and_gradients(tiny_model_path, entropy_coeff):
    # 9 learned tokens through the head 2 at a time (5 chunks, the last one short) vs all at once
    whole = make_actor(tiny_model_path, logit_chunk_tokens=512, entropy_coeff=entropy_coeff)
    chunked = make_actor(tiny_model_path, logit_chunk_tokens=2, entropy_coeff=entropy_coeff)
    a = whole.compute_log_prob(batch(), PLAIN, True, 4, None)
    b = chunked.compute_log_prob(batch(), PLAIN, True, 4, None)
    torch.testing.assert_close(b["log_probs"], a["log_probs"], atol=1e-6, rtol=0)
    # entropies near 11 nats are sums over the vocabulary whose order follows the chunk's shape:
    # fp32 rounding, 1e-6 relative
    torch.testing.assert_close(b["entropys"], a["entropys"], atol=1e-6, rtol=2e-6)
    g_whole, m_whole = grads_of_one_update(whole, batch())
    g_chunked, m_chunked = grads_of_one_update(chunked, batch())
    for k in (
        g_whole
    ):  # the head's gradient is summed chunk by chunk: the order of the sum differs (AVX2 kernels: up to 4.4e-6)
        torch.testing.assert_close(g_chunked[k], g_whole[k], atol=2e-5, rtol=1e-5)
    assert m_chunked["actor/entropy"] == pytest.approx(m_whole["actor/entropy"], rel=2e-6)
    assert m_chunked["actor/pg_loss"] == pytest.approx(m_whole["actor/pg_loss"], abs=1e-7)


class VocabMatmuls(TorchDispatchMode):
    """Counts the matmuls whose output has ``vocab`` columns: the LM head's forward, run again when recomputed."""

    def __init__(self, vocab: int):
        super().__init__()
        self.vocab, self.count = vocab, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if (
            func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default)
            and out.shape[-1] == self.vocab
        ):
            self.count += 1
        return out


def test_the_head_is_recomputed_in_the_backward_only_for_a_checkpointed_model(tiny_model_path):
    # 9 learned tokens, 2 per chunk: 5 head passes in the forward, 5 more in the backward when the model is checkpointed
    # (it keeps no activations, so the chunk's logits are not kept either); the same gradients both ways
    grads, counts = {}, {}
    for checkpointed in (False, True):
        actor = make_actor(tiny_model_path, logit_chunk_tokens=2)
        if checkpointed:
            actor.module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        data = batch()
        data.batch["old_log_probs"] = actor.compute_log_prob(data, PLAIN, False, 4, None)["log_probs"]
        with VocabMatmuls(actor.module.config.vocab_size) as counter:
            grads[checkpointed], _ = update_capturing_grads(actor, data, PLAIN)
        counts[checkpointed] = counter.count
    assert counts == {False: 5, True: 10}
    for k in grads[False]:
        torch.testing.assert_close(grads[True][k], grads[False][k], atol=1e-6, rtol=1e-5)


def test_a_batch_with_nothing_to_learn_scores_zero(tiny_model_path):
    # every row failed (mask all 0): one stand-in token keeps the forward alive, and every output is 0
    actor = make_actor(tiny_model_path)
    d = packed_proto([[1, 2], [3]], [[11, 12], [13]], response_masks=[[0, 0], [0]], pad_id=2)
    out = actor.compute_log_prob(d, PLAIN, True, 4, None)
    assert out["log_probs"].abs().sum() == 0 and out["entropys"].abs().sum() == 0


def test_without_old_log_probs_the_update_uses_its_own_detached_ones(tiny_model_path):
    # one optimiser step per batch: the old log-probs a separate pass would give are the update's own
    recomputed, m_recomputed = grads_of_one_update(make_actor(tiny_model_path), batch())
    data = batch()
    data.batch["rollout_log_probs"] = torch.zeros_like(
        data.batch["advantages"]
    )  # the engine's; here 0, so the gap is -log p
    reused, m_reused = update_capturing_grads(make_actor(tiny_model_path), data, PLAIN)
    for k in recomputed:
        torch.testing.assert_close(reused[k], recomputed[k], atol=1e-6, rtol=1e-5)
    assert m_reused["actor/pg_loss"] == pytest.approx(-4.0 / 9.0, abs=1e-6)  # ratio 1: -mean_m(A), as above
    assert m_reused["actor/ppo_kl"] == 0.0 and m_reused["actor/pg_clipfrac"] == 0.0
    assert m_reused["actor/pg_loss"] == pytest.approx(m_recomputed["actor/pg_loss"], abs=1e-7)
    lp, mask = -batch_log_probs(tiny_model_path), batch().batch["response_mask"].float()
    assert m_reused["rollout/logprob_diff_vs_trainer"] == pytest.approx(float((lp * mask).sum() / mask.sum()), rel=1e-5)


def batch_log_probs(path: str) -> torch.Tensor:
    return make_actor(path).compute_log_prob(
        batch(), sampling=PLAIN, with_entropy=False, micro_batch_rows=4, max_tokens=None
    )["log_probs"]


@pytest.mark.parametrize("overrides", [{"ppo_epochs": 2}, {"ppo_mini_batch_size": 2}])
def test_without_old_log_probs_more_than_one_optimiser_step_is_refused(tiny_model_path, overrides):
    with pytest.raises(ValueError, match=r"update_policy without old_log_probs needs one optimiser step per batch"):
        make_actor(tiny_model_path, **overrides).update_policy(batch(), PLAIN)
