"""Tree packing (`verl.utils.prefix_tree`): the layout by hand, and every pass equal to the flat path's.

Equal means within fp32 round-off: the packed forward sums attention over other
key layouts, so single values differ in the last bits. The tolerances below
(log-probs, values and losses 1e-5; gradients 2e-5 absolute) are those of the
micro-batching tests, whose sums change order the same way; weights after one
AdamW step 1e-6 wherever the gradient is not itself round-off (`assert_same_adam_step`).
"""

import dataclasses
from functools import partial

import pytest
import torch
from grad_capture import capturing_grads, update_capturing_grads
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from verl.protocol import DataProto
from verl.trainer.sft_trainer import MASK_KEY, pack_samples, token_nll
from verl.utils.batch import packed_proto
from verl.utils.fsdp_utils import build_optimizer, build_scheduler
from verl.utils.lora import apply_lora
from verl.utils.prefix_tree import pack_rows, plan_tree_micro_batches, tree_size, use_tree_attention
from verl.utils.typed_config import ConfigError, from_dict
from verl.workers.actor import PPOActor
from verl.workers.config import ActorConfig, CriticConfig, OptimConfig
from verl.workers.critic import PPOCritic, ValueModel
from verl.workers.trainable import TrainableModule

PLAIN = {"temperature": 1.0, "top_p": 1.0, "top_k": -1}
SAMPLED = {"temperature": 0.7, "top_p": 0.9, "top_k": 50}
LLAMA = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def rows_proto(rows: list[list[int]]) -> DataProto:
    """Rows as whole sequences (prompt = all tokens), left-padded."""
    return packed_proto(rows, [[] for _ in rows], pad_id=0)


# ----------------------------------------------------------------- the layout, by hand
def test_pack_rows_serialises_the_tree_depth_first_with_branch_positions():
    # rows: a, a branch of a, a copy of a, an unrelated one, a's extension
    rows = [[1, 2, 3, 4], [1, 2, 5], [1, 2, 3, 4], [9], [1, 2, 3, 4, 6]]
    d = rows_proto(rows)
    tree = pack_rows(d.batch["input_ids"], d.batch["attention_mask"])
    # sorted: [1,2,3,4] x2, [1,2,3,4,6], [1,2,5], [9]; each adds what it does not share with its predecessor
    assert tree.input_ids.tolist() == [[1, 2, 3, 4, 6, 5, 9]]
    assert tree.position_ids.tolist() == [[0, 1, 2, 3, 4, 2, 0]]
    assert tree.parent.tolist() == [-1, 0, 1, 2, 3, 1, -1]
    assert (tree.tokens, tree.flat_tokens) == (7, 17)
    assert tree_size([torch.tensor(r).numpy() for r in rows]) == 7
    # the flat layout: 5 left-padded prompt columns and 1 (empty) response column; every real (row, column)
    # maps to its packed token
    assert tree.index.tolist() == [
        [-1, 0, 1, 2, 3, -1],
        [-1, -1, 0, 1, 5, -1],
        [-1, 0, 1, 2, 3, -1],
        [-1, -1, -1, -1, 6, -1],
        [0, 1, 2, 3, 4, -1],
    ]
    spans = [(s.start, s.end, None if s.keys is None else s.keys.tolist()) for s in tree.segments]
    assert spans == [(0, 4, None), (4, 5, [0, 1, 2, 3, 4]), (5, 6, [0, 1, 5]), (6, 7, None)]
    assert tree.segments[2].mask.tolist() == [[True, True, True]]


def test_micro_batches_are_subtrees_under_the_token_budget():
    rows = [[1, 2, 3, 4], [7, 8], [1, 2, 3, 5], [1, 2, 6, 6, 6], [7, 9]]
    d = rows_proto(rows)
    # sorted: [1,2,3,4] (4), [1,2,3,5] (+1), [1,2,6,6,6] (+3), [7,8] (2), [7,9] (+1)
    groups, sizes = plan_tree_micro_batches(d.batch["input_ids"], d.batch["attention_mask"], max_rows=2, max_tokens=8)
    assert [g.tolist() for g in groups] == [[0, 2, 3], [1, 4]] and sizes == [8, 3]
    groups, sizes = plan_tree_micro_batches(
        d.batch["input_ids"], d.batch["attention_mask"], max_rows=2, max_tokens=None
    )
    assert [g.tolist() for g in groups] == [[0, 2], [3, 1], [4]] and sizes == [5, 7, 2]
    groups, sizes = plan_tree_micro_batches(d.batch["input_ids"], d.batch["attention_mask"], max_rows=2, max_tokens=3)
    assert [g.tolist() for g in groups] == [[0], [2], [3], [1, 4]] and sizes == [
        4,
        4,
        5,
        3,
    ]  # a row over the budget goes alone
    empty = d[[]]
    assert plan_tree_micro_batches(empty.batch["input_ids"], empty.batch["attention_mask"], 2, 8) == ([], [])


def test_auto_packs_only_when_the_flat_path_runs_enough_more_tokens(tiny_model_path):
    model = TrainableModule(
        AutoModelForCausalLM.from_pretrained(tiny_model_path), None, None, "cpu", "float32", tree_packing="auto"
    )
    shared = rows_proto([[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 7]])  # flat 12 tokens, tree 7
    assert [mb.meta_info["tree_packed"] for _, mb in model.plan(shared, 4, None)] == [True]
    distinct = rows_proto([[1, 2, 3], [4, 5, 6]])  # flat 6, tree 6
    assert [mb.meta_info["tree_packed"] for _, mb in model.plan(distinct, 4, None)] == [False]
    assert model.take_token_counts("x") == {"perf/x_tokens_flat": 18.0, "perf/x_tokens_run": 13.0}


def test_auto_is_off_on_another_attention_and_on_refuses_it(tiny_model_path):
    eager = AutoModelForCausalLM.from_pretrained(tiny_model_path, attn_implementation="eager")
    assert TrainableModule(eager, None, None, "cpu", "float32", tree_packing="auto").tree_packing == "off"
    with pytest.raises(ValueError, match="tree packing runs on SDPA attention; this model uses 'eager'"):
        TrainableModule(eager, None, None, "cpu", "float32", tree_packing="on")
    with pytest.raises(ValueError, match="needs a transformers model"):
        TrainableModule(torch.nn.Linear(1, 1), None, None, "cpu", "float32", tree_packing="on")


def test_tree_packing_on_needs_sdpa_and_a_known_mode(tiny_model_path):
    with pytest.raises(ConfigError, match="tree_packing=on needs attn_implementation=sdpa"):
        from_dict(
            CriticConfig,
            {"model": {"path": tiny_model_path, "attn_implementation": "eager"}, "tree_packing": "on"},
            "critic",
        )
    with pytest.raises(ConfigError, match="tree_packing"):
        from_dict(CriticConfig, {"model": {"path": tiny_model_path}, "tree_packing": "yes"}, "critic")


# ----------------------------------------------------------------- the forward
@pytest.fixture(scope="module")
def gqa_model_path(tmp_path_factory):
    """A tiny Llama whose 4 query heads share 2 key/value heads, as SmolLM2's do (9 over 3)."""
    torch.manual_seed(1)
    cfg = LlamaConfig(
        vocab_size=64,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    path = tmp_path_factory.mktemp("gqa")
    LlamaForCausalLM(cfg).save_pretrained(path)
    return str(path)


@pytest.mark.parametrize("which", ["tiny", "gqa"])
def test_packed_forward_gives_every_row_its_flat_logits(tiny_model_path, gqa_model_path, which):
    path = tiny_model_path if which == "tiny" else gqa_model_path
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa").eval()
    use_tree_attention(model)  # padded batches still run transformers' SDPA with its mask
    d = packed_proto(
        [[1, 2, 3, 4], [1, 2, 3, 4], [9, 8], [1, 2, 3, 4]], [[5, 6, 7], [5, 6, 10, 11], [5], [12]], pad_id=0
    )
    b = d.batch
    with torch.no_grad():
        flat = model(
            input_ids=b["input_ids"], attention_mask=b["attention_mask"], position_ids=b["position_ids"]
        ).logits
        tree = pack_rows(b["input_ids"], b["attention_mask"])
        packed = model(**tree.model_inputs()).logits[0]
    real = b["attention_mask"].bool()
    assert tree.tokens == 13 and tree.flat_tokens == 23  # 1,2,3,4,5,6,7 + 10,11 + 12 + 9,8,5
    torch.testing.assert_close(packed[tree.index[real]], flat[real], atol=1e-5, rtol=1e-5)


def test_a_long_segment_after_a_short_prefix_runs_causally_over_its_path():
    d = rows_proto([[1, 2, 3], [1, 5, 6], [1, 7]])  # sorted: [1,2,3], [1,5,6] (prefix 1, own 2), [1,7] (1, 1)
    tree = pack_rows(d.batch["input_ids"], d.batch["attention_mask"], long_segment=2)
    spans = [(s.start, s.end, s.keys.tolist() if s.keys is not None else None) for s in tree.segments]
    assert spans == [(0, 3, None), (3, 5, [0, 3, 4]), (5, 6, [0, 5])]
    assert tree.segments[1].mask is None  # 2 tokens >= 2 after a prefix of 1 <= 2 / 2: the path, causally
    assert tree.segments[2].mask.tolist() == [[True, True]]  # 1 token < 2: masked
    default = pack_rows(d.batch["input_ids"], d.batch["attention_mask"])
    assert all(s.keys is None or s.mask is not None for s in default.segments)  # short segments keep the mask


def test_path_segments_give_the_flat_logits_and_gradients(gqa_model_path):
    """Segments run as causal paths, masked, and plain causal in one pack: logits and every weight's
    gradient equal the flat path's."""
    model = AutoModelForCausalLM.from_pretrained(gqa_model_path, dtype=torch.float32, attn_implementation="sdpa")
    use_tree_attention(model)
    rows = [[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 9, 10, 11, 12, 13], [1, 2, 3, 4, 5, 6, 7, 14], [20, 21, 22]]
    b = rows_proto(rows).batch
    real = b["attention_mask"].bool()
    weights = torch.randn(int(real.sum()), 64, generator=torch.Generator().manual_seed(0))

    def logits_and_grads(packed: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        model.zero_grad()
        if packed:
            tree = pack_rows(b["input_ids"], b["attention_mask"], long_segment=4)
            kinds = ["causal" if s.keys is None else "masked" if s.mask is not None else "path" for s in tree.segments]
            assert kinds == ["causal", "masked", "path", "causal"]  # [1..8], [14] after 7, [9..13] after 2, [20..22]
            logits = model(**tree.model_inputs()).logits[0][tree.index[real]]
        else:
            logits = model(
                input_ids=b["input_ids"], attention_mask=b["attention_mask"], position_ids=b["position_ids"]
            ).logits[real]
        (logits * weights).sum().backward()
        return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    flat_logits, flat_grads = logits_and_grads(False)
    tree_logits, tree_grads = logits_and_grads(True)
    torch.testing.assert_close(tree_logits, flat_logits, atol=1e-5, rtol=1e-5)
    for name, grad in flat_grads.items():
        torch.testing.assert_close(tree_grads[name], grad, atol=2e-5, rtol=1e-4, msg=name)


# ----------------------------------------------------------------- the actor
def make_actor(path: str, tree: str, lora: bool = False, **overrides) -> PPOActor:
    torch.manual_seed(0)
    module = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    if lora:
        apply_lora(module, 4, 8.0, LLAMA, seed=0)
        for name, p in module.named_parameters():  # B starts at 0; move it so the adapters shape the gradient
            if "lora_B" in name:
                torch.nn.init.normal_(p, std=0.02, generator=torch.Generator().manual_seed(3))
    if tree != "off":
        use_tree_attention(module)
    cfg = ActorConfig(
        **{
            "ppo_mini_batch_size": 6,
            "ppo_micro_batch_size_per_gpu": 6,
            "use_dynamic_bsz": False,
            "mixed_precision": "float32",
            "shuffle": False,
            "grad_clip": 1e9,
            "tree_packing": tree,
            "optim": OptimConfig(lr=1e-3, weight_decay=0.0),
            **overrides,
        }
    )
    opt = build_optimizer(module, cfg.optim)
    return PPOActor(module, opt, build_scheduler(opt, cfg.optim), cfg, "cpu", cfg.mixed_precision)


def grpo_group():
    """A group of 4 sharing its prompt (two with the same first action, one a copy, one a prefix of
    another), a row of another task and a row whose mask has an observation gap."""
    prompts = [[1, 2, 3], [1, 2, 3], [1, 2, 3], [4, 5], [1, 2, 3], [1, 2, 3]]
    responses = [[11, 12, 13, 14], [11, 12, 15], [11, 12, 13, 14], [16, 17], [11], [11, 12, 13, 14, 18]]
    masks = [[1, 1, 1, 1], [1, 1, 1], [1, 1, 1, 1], [1, 1], [1], [1, 0, 1, 1, 1]]
    adv = [
        [1.0, 1, 1, 1, 0],
        [-1.0, -1, -1, 0, 0],
        [0.5, 0.5, 0.5, 0.5, 0],
        [2.0, 2, 0, 0, 0],
        [-1.0, 0, 0, 0, 0],
        [0.3] * 5,
    ]
    return prompts, responses, masks, adv


def step_wise_rows():
    """GiGPO / per-turn rows: a later turn's prompt holds an earlier turn's response, learned in one row
    and context in the other."""
    prompts = [[1, 2, 3], [1, 2, 3, 11, 12, 21], [1, 2, 3, 11, 12, 21, 13, 22], [1, 2, 3]]
    responses = [[11, 12], [13], [14, 15], [11, 19]]
    masks = [[1, 1], [1], [1, 1], [1, 1]]
    adv = [[1.0, 1.0], [0.5, 0], [-0.5, -0.5], [-1.0, -1.0]]
    return prompts, responses, masks, adv


def edge_batch(kind: str):
    if kind == "one_row":
        return [[1, 2, 3]], [[4, 5, 6]], [[1, 1, 1]], [[1.0, -1.0, 0.5]]
    if kind == "no_shared_token":
        return (
            [[1, 2], [3, 4], [5]],
            [[6, 7], [8], [9, 10, 11]],
            [[1, 1], [1], [1, 1, 1]],
            [[1.0, 1, 0], [-1.0, 0, 0], [0.5, 0.5, 0.5]],
        )
    if kind == "identical_rows":
        return [[1, 2, 3]] * 3, [[4, 5]] * 3, [[1, 1]] * 3, [[1.0, 1.0], [-2.0, -2.0], [0.5, 0.5]]
    if kind == "failed_rows":  # rows 2 and 3 failed (mask 0): sorted, they fill a log-prob micro-batch of their own
        return (
            [[1, 2, 3], [1, 2, 3], [7, 8], [7, 8]],
            [[4, 5], [4, 6], [9], [10]],
            [[1, 1], [1, 1], [0], [0]],
            [[1.0, 1.0], [-1.0, -1.0], [0.0, 0.0], [0.0, 0.0]],
        )
    return {"grpo_group": grpo_group, "step_wise": step_wise_rows}[kind]()


def proto(kind: str) -> DataProto:
    prompts, responses, masks, adv = edge_batch(kind)
    d = packed_proto(prompts, responses, response_masks=masks, pad_id=0)
    T = d.batch["responses"].shape[1]
    d.batch["advantages"] = torch.tensor([a[:T] + [0.0] * (T - len(a[:T])) for a in adv]) * d.batch["response_mask"]
    return d


def one_update(actor: PPOActor, data: DataProto, sampling: dict, use_kl: bool) -> tuple:
    rows = len(data)
    actor.config = dataclasses.replace(actor.config, ppo_mini_batch_size=rows)
    out = actor.compute_log_prob(data, sampling=sampling, with_entropy=True, micro_batch_rows=2, max_tokens=None)
    # old log-probs a little off the current ones, so ratios move off 1 and some clip
    noise = torch.randn(out["log_probs"].shape, generator=torch.Generator().manual_seed(5))
    data.batch["old_log_probs"] = (out["log_probs"] + 0.3 * noise) * data.batch["response_mask"]
    if use_kl:
        data.batch["ref_log_prob"] = (out["log_probs"] - 0.1 * noise) * data.batch["response_mask"]
    grads, metrics = update_capturing_grads(actor, data, sampling)
    weights = {k: v.detach().clone() for k, v in actor.module.named_parameters() if v.requires_grad}
    return out, grads, metrics, weights


def assert_same_update(flat: tuple, tree: tuple) -> None:
    (out_f, g_f, m_f, w_f), (out_t, g_t, m_t, w_t) = flat, tree
    for key in out_f:
        torch.testing.assert_close(out_t[key], out_f[key], atol=1e-5, rtol=1e-5)
    for key in ("actor/pg_loss", "actor/pg_clipfrac", "actor/entropy", "actor/grad_norm"):
        assert m_t[key] == pytest.approx(m_f[key], rel=1e-5, abs=1e-6), key
    assert sorted(g_t) == sorted(g_f)
    for key in g_f:
        torch.testing.assert_close(g_t[key], g_f[key], atol=2e-5, rtol=1e-4)
    assert_same_adam_step(w_t, w_f, g_f)


def assert_same_adam_step(w_t: dict, w_f: dict, g_f: dict) -> None:
    """AdamW's first step moves a weight by ``lr * g / (|g| + eps)``: about ``lr * sign(g)`` and steepest in ``g``
    near 0, so where a gradient is as small as the two paths' round-off (``0 < |g| <= 1e-5``: the packed path adds
    attention in another order, and how far that moves a tiny gradient depends on the CPU's kernels) its step may
    differ; elsewhere 1e-6."""
    for key in w_f:
        g = g_f[key].abs()
        compared = (g > 1e-5) | (g == 0)
        torch.testing.assert_close(w_t[key][compared], w_f[key][compared], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_grpo_update_packed_equals_flat_in_every_loss_mode(tiny_model_path, mode):
    cfg = {"loss_agg_mode": mode, "entropy_coeff": 0.01, "use_kl_loss": True, "kl_loss_coef": 0.1}
    flat = one_update(make_actor(tiny_model_path, "off", **cfg), proto("grpo_group"), SAMPLED, use_kl=True)
    actor = make_actor(tiny_model_path, "on", **cfg)
    tree = one_update(actor, proto("grpo_group"), SAMPLED, use_kl=True)
    assert_same_update(flat, tree)
    assert 0 < flat[2]["actor/pg_clipfrac"] < 1  # the clip is live, so its per-row terms are what is compared
    # compute_log_prob, micro-batches of 2 rows: flat 2 x 7 + 2 x 7 + 2 x 8 columns; tree (sorted rows 4,0 | 2,5 | 1,3)
    # 4 + 3, 7 + 1, 6 + 4. The update, one micro-batch: flat 6 x 8; tree 4 + 3 + 0 + 1 + 1 + 4
    assert actor.token_counts == {"flat": 44 + 48, "run": 25 + 13}


@pytest.mark.parametrize("kind", ["step_wise", "one_row", "no_shared_token", "identical_rows", "failed_rows"])
def test_update_packed_equals_flat_on_every_tree_shape(tiny_model_path, kind):
    flat = one_update(make_actor(tiny_model_path, "off"), proto(kind), PLAIN, use_kl=False)
    tree = one_update(make_actor(tiny_model_path, "on"), proto(kind), PLAIN, use_kl=False)
    assert_same_update(flat, tree)
    if kind == "failed_rows":
        assert tree[0]["log_probs"][2:].abs().sum() == 0 and tree[0]["log_probs"][:2].abs().min() > 0


def test_rows_of_different_groups_share_a_micro_batch_under_a_token_budget(tiny_model_path):
    budget = {"use_dynamic_bsz": True, "ppo_max_token_len_per_gpu": 14}
    flat = one_update(make_actor(tiny_model_path, "off", **budget), proto("grpo_group"), PLAIN, use_kl=False)
    actor = make_actor(tiny_model_path, "on", **budget)
    micro = actor.plan(proto("grpo_group"), 6, 14)
    # the tree of the group: [1,2,3,11] + 12,13,14 + 18 + 15 = 9 tokens,
    # then the other task's 4: 13 <= 14, one micro-batch
    assert [sorted(rows.tolist()) for rows, _ in micro] == [[0, 1, 2, 3, 4, 5]]
    tree = one_update(actor, proto("grpo_group"), PLAIN, use_kl=False)
    assert_same_update(flat, tree)


def test_lora_update_packed_equals_flat(tiny_model_path):
    flat = one_update(make_actor(tiny_model_path, "off", lora=True), proto("grpo_group"), PLAIN, use_kl=False)
    tree = one_update(make_actor(tiny_model_path, "on", lora=True), proto("grpo_group"), PLAIN, use_kl=False)
    assert all("lora_" in k for k in flat[3])  # only adapters train
    assert_same_update(flat, tree)


# ----------------------------------------------------------------- the critic
def make_critic(
    path: str, tree: str, micro_rows: int = 6, checkpointing: bool = False, budget: int | None = None
) -> PPOCritic:
    torch.manual_seed(0)
    module = ValueModel.from_pretrained(path)
    torch.nn.init.normal_(module.value_head.weight, std=0.1, generator=torch.Generator().manual_seed(2))
    if checkpointing:
        module.backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if tree != "off":
        use_tree_attention(module.backbone)
    cfg = from_dict(
        CriticConfig,
        {
            "ppo_mini_batch_size": 6,
            "ppo_micro_batch_size_per_gpu": micro_rows,
            "use_dynamic_bsz": budget is not None,
            **({} if budget is None else {"ppo_max_token_len_per_gpu": budget}),
            "model": {"path": path, "enable_gradient_checkpointing": checkpointing},
            "shuffle": False,
            "tree_packing": tree,
            "optim": {"lr": 1e-3, "weight_decay": 0.0},
        },
        "critic",
    )
    opt = build_optimizer(module, cfg.optim)
    return PPOCritic(module, opt, build_scheduler(opt, cfg.optim), cfg, "float32")


def critic_step(critic: PPOCritic, data: DataProto, keep_graph: bool, update_rows: list[int] | None = None):
    """Values, then one update over ``update_rows`` of ``data`` (all by default): values, metrics, the
    gradients the step took and the weights after it."""
    values = critic.compute_values(data, keep_graph=keep_graph)
    data.batch["values"] = values
    data.batch["returns"] = data.batch["advantages"] + values
    if update_rows is not None:
        data = data[update_rows]
    grads, metrics = capturing_grads(critic, lambda: critic.update_critic(data))
    return values, metrics, grads, {k: v.detach().clone() for k, v in critic.module.named_parameters()}


def test_critic_values_and_update_packed_equal_flat(tiny_model_path):
    flat, tree = (critic_step(make_critic(tiny_model_path, tree), proto("grpo_group"), False) for tree in ("off", "on"))
    (v_f, m_f, g_f, w_f), (v_t, m_t, g_t, w_t) = flat, tree
    torch.testing.assert_close(v_t, v_f, atol=1e-5, rtol=1e-5)
    assert float(v_f.abs().sum()) > 0
    for key in ("critic/vf_loss", "critic/grad_norm"):
        assert m_t[key] == pytest.approx(m_f[key], rel=1e-5), key
    for key in g_f:
        torch.testing.assert_close(g_t[key], g_f[key], atol=2e-5, rtol=1e-4)
    assert_same_adam_step(w_t, w_f, g_f)


@pytest.mark.parametrize("tree, micro_rows, checkpointing", [("off", 2, True), ("on", 2, True), ("on", 6, False)])
def test_the_critic_update_through_the_values_forward_equals_a_second_forward(
    tiny_model_path, tree, micro_rows, checkpointing
):
    """One optimiser step over the rows the values pass ran: backpropagating through that pass (kept with its
    graph) takes the same step as running the update's own forward, over one micro-batch or three."""
    second = critic_step(make_critic(tiny_model_path, tree, micro_rows, checkpointing), proto("grpo_group"), False)
    critic = make_critic(tiny_model_path, tree, micro_rows, checkpointing)
    kept = critic_step(critic, proto("grpo_group"), True)
    assert second[1]["critic/values_forward_reused"] == 0.0 and kept[1]["critic/values_forward_reused"] == 1.0
    assert critic._kept is None  # the graph is freed with the step
    torch.testing.assert_close(kept[0], second[0], atol=1e-6, rtol=1e-6)
    assert float(second[0].abs().sum()) > 0
    for key in ("critic/vf_loss", "critic/vf_clipfrac", "critic/vpred_mean", "critic/grad_norm"):
        assert kept[1][key] == pytest.approx(second[1][key], rel=1e-5, abs=1e-7), key
    for key in second[2]:
        torch.testing.assert_close(kept[2][key], second[2][key], atol=1e-6, rtol=1e-5)
    assert_same_adam_step(kept[3], second[3], second[2])


@pytest.mark.parametrize("micro_rows, budget, kept", [(6, None, True), (2, None, False), (6, 13, True), (6, 12, False)])
def test_without_recomputation_the_values_forward_is_kept_only_for_one_micro_batch(
    tiny_model_path, micro_rows, budget, kept
):
    """Without recomputation a kept forward holds every activation of every micro-batch until the update: the
    critic keeps it only when the update's plan is one micro-batch (six rows of at most 6 or 2; the group's tree
    of 13 tokens against a budget of 13 or 12), else the update runs its own forward and takes the same step."""
    make = partial(make_critic, tiny_model_path, "on", micro_rows, budget=budget)
    second = critic_step(make(), proto("grpo_group"), False)
    critic = make()
    asked = critic_step(critic, proto("grpo_group"), True)
    assert asked[1]["critic/values_forward_reused"] == float(kept)
    torch.testing.assert_close(asked[0], second[0], atol=1e-6, rtol=1e-6)
    assert asked[1]["critic/grad_norm"] == pytest.approx(second[1]["critic/grad_norm"], rel=1e-5)
    for key in second[2]:
        torch.testing.assert_close(asked[2][key], second[2][key], atol=1e-6, rtol=1e-5)


def test_a_kept_values_forward_is_not_used_for_other_rows(tiny_model_path):
    """The update's rows differ from the values pass's: the kept forward is dropped and the update runs its own."""
    rows = [0, 1, 2, 3, 4, 5]
    make = partial(make_critic, tiny_model_path, "off", 2)
    second = critic_step(make(), proto("grpo_group"), False, update_rows=rows[::-1])
    kept = critic_step(make(), proto("grpo_group"), True, update_rows=rows[::-1])
    assert kept[1]["critic/values_forward_reused"] == 0.0
    assert kept[1]["critic/grad_norm"] == pytest.approx(second[1]["critic/grad_norm"], rel=1e-6)


# ----------------------------------------------------------------- SFT
def test_sft_nll_packed_equals_flat_per_sample(tiny_model_path):
    system = [1, 2, 3, 4, 5]  # the shared system text and instructions
    ids = [system + [6, 7, 8], system + [6, 9], system + [10, 11, 12, 13], [20, 21, 22]]
    masks = [[0] * 5 + [0, 1, 1], [0] * 5 + [0, 1], [0] * 5 + [1, 1, 0, 1], [0, 1, 1]]
    data = pack_samples(ids, masks, pad_id=0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    use_tree_attention(model)
    flat_nll, flat_n = token_nll(model, data, "cpu", "float32")
    data.meta_info["tree_packed"] = True
    tree_nll, tree_n = token_nll(model, data, "cpu", "float32")
    assert flat_n.tolist() == tree_n.tolist() == [2.0, 1.0, 3.0, 2.0]
    torch.testing.assert_close(tree_nll, flat_nll, atol=1e-5, rtol=1e-5)
    flat_nll.sum().backward()
    flat_grads = {k: p.grad.clone() for k, p in model.named_parameters()}
    model.zero_grad()
    tree_nll.sum().backward()
    for k, p in model.named_parameters():
        torch.testing.assert_close(p.grad, flat_grads[k], atol=2e-5, rtol=1e-4)
    assert MASK_KEY in data.batch.keys()


def test_a_packed_micro_batch_with_nothing_to_learn_still_backpropagates_through_the_model(tiny_model_path):
    # what a rank with fewer micro-batches runs (`_masked_copy`): FSDP needs every parameter's backward to run
    actor = make_actor(tiny_model_path, "on")
    data = proto("failed_rows")[[2, 3]]
    data.meta_info["tree_packed"] = True
    log_prob, _ = actor._token_stats(data, PLAIN, with_entropy=False)
    assert log_prob.abs().sum() == 0
    log_prob.sum().backward()
    grads = [p.grad for p in actor.module.parameters()]
    assert all(g is not None and g.abs().sum() == 0 for g in grads)
