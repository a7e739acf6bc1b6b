"""dtype ``auto``: bf16 only where the hardware runs it fast; explicit dtypes win; the choice reaches config.json."""

import json

import pytest
import torch

from verl.trainer.ppo.config import load_config, resolve_precision
from verl.utils.batch import packed_proto
from verl.utils.bf16_rounding import bf16_round_bits, round_linears_stochastically, to_bf16_stochastic
from verl.utils.precision import Precision, best_rates, matmul_probe, read_cpu_flags, resolve_dtype
from verl.utils.typed_config import ConfigError
from verl.workers.config import ActorRolloutRefConfig, resolve_policy_precision

pytestmark = pytest.mark.in_process_engine

# /proc/cpuinfo excerpts (one processor each): a Zen 4 with AVX512_BF16, a Sapphire Rapids with AMX,
# a Skylake-SP with AVX512 but no bf16, and an Arm Neoverse V1 with FEAT_BF16.
ZEN4 = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx2 avx512f avx512bw avx512_bf16 avx512_vnni\n"
SPR = "processor\t: 0\nmodel name\t: Intel Xeon\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
SKX = "processor\t: 0\nmodel name\t: Intel Xeon\nflags\t\t: fpu avx2 avx512f avx512dq avx512cd avx512bw avx512vl\n"
MODEL = "actor_rollout_ref.model.path=/not/checked"  # check_files=False: the path is not read
NEOVERSE = "processor\t: 0\nBogoMIPS\t: 2100.00\nFeatures\t: fp asimd sve bf16 i8mm\n"


def no_probe():
    raise AssertionError("the matmul probe must not run when the CPU flags decide")


def zen4_probe():  # GFLOP/s with the 2.6x bf16/fp32 ratio measured on a 2-core AMD EPYC with AVX512_BF16 (box A)
    return {"float32": 80.0, "bfloat16": 208.0}


def hidden_amx_probe():  # a 2048^3 matmul measured on a 2-core Intel Xeon listing avx512_bf16 but not AMX (box E)
    return {"float32": 288.4, "bfloat16": 164.9}


def test_cpu_flags_are_parsed_for_x86_and_arm():
    assert read_cpu_flags(ZEN4) == {"fpu", "sse", "avx2", "avx512f", "avx512bw", "avx512_bf16", "avx512_vnni"}
    assert read_cpu_flags(NEOVERSE) == {"fp", "asimd", "sve", "bf16", "i8mm"}
    assert read_cpu_flags("processor\t: 0\n") is None


@pytest.mark.parametrize(
    "cpuinfo, dtype, reason",
    [
        (SPR, "bfloat16", "the CPU runs bf16 natively (amx_bf16, avx512_bf16)"),
        (
            SKX,
            "float32",
            "the CPU has no native bf16 (no amx_bf16 / avx512_bf16): bf16 would be emulated, slower than fp32",
        ),
    ],
)
def test_auto_on_cpu_follows_the_flags_where_they_decide(cpuinfo, dtype, reason):
    for purpose in ("train", "infer"):
        assert resolve_dtype("auto", "cpu", purpose, cpuinfo=cpuinfo, probe=no_probe) == Precision(dtype, reason)


@pytest.mark.parametrize(
    "cpuinfo, probe, dtype, reason",
    [
        (ZEN4, zen4_probe, "bfloat16", "avx512_bf16 without AMX, matmul probe: bf16 runs 2.6x the fp32 rate"),
        (
            ZEN4,
            hidden_amx_probe,
            "float32",
            "avx512_bf16 without AMX, matmul probe: bf16 runs only 0.57x the fp32 rate",
        ),
        (NEOVERSE, zen4_probe, "bfloat16", "bf16 without AMX, matmul probe: bf16 runs 2.6x the fp32 rate"),
    ],
)
def test_bf16_instructions_without_amx_are_probed(cpuinfo, probe, dtype, reason):
    for purpose in ("train", "infer"):
        assert resolve_dtype("auto", "cpu", purpose, cpuinfo=cpuinfo, probe=probe) == Precision(dtype, reason)


def test_explicit_dtype_wins_over_the_hardware():
    assert resolve_dtype("bfloat16", "cpu", cpuinfo=SKX, probe=no_probe) == Precision(
        "bfloat16", "set explicitly in the config"
    )
    assert resolve_dtype("float32", "cpu", cpuinfo=SPR, probe=no_probe).dtype == "float32"
    assert resolve_dtype("float16", "cuda", cuda_bf16=True).dtype == "float16"


def test_unreadable_flags_fall_back_to_the_matmul_probe():
    fast = resolve_dtype("auto", "cpu", cpuinfo="", probe=lambda: {"float32": 100.0, "bfloat16": 300.0})
    slow = resolve_dtype("auto", "cpu", cpuinfo="", probe=lambda: {"float32": 218.0, "bfloat16": 49.0})
    even = resolve_dtype("auto", "cpu", cpuinfo="", probe=lambda: {"float32": 100.0, "bfloat16": 110.0})
    assert fast == Precision("bfloat16", "matmul probe: bf16 runs 3.0x the fp32 rate")
    assert slow == Precision("float32", "matmul probe: bf16 runs only 0.22x the fp32 rate")
    assert even.dtype == "float32"  # below the 1.2x threshold


def test_auto_on_cuda():
    assert resolve_dtype("auto", "cuda", "train", cuda_bf16=True) == Precision("bfloat16", "the GPU supports bf16")
    assert resolve_dtype("auto", "cuda:1", "infer", cuda_bf16=False).dtype == "float16"
    assert resolve_dtype("auto", "cuda", "train", cuda_bf16=False).dtype == "float32"


def test_bad_dtype_names_are_rejected():
    with pytest.raises(
        ValueError, match=r"dtype must be one of \['auto', 'float32', 'bfloat16', 'float16'\], got 'bf16'"
    ):
        resolve_dtype("bf16", "cpu")
    with pytest.raises(
        ConfigError,
        match=(
            r"actor_rollout_ref.actor.mixed_precision must be one of "
            r"\['auto', 'float32', 'bfloat16', 'float16'\], got 'bf16'"
        ),
    ):
        load_config(["actor_rollout_ref.actor.mixed_precision=bf16"], check_files=False)


def test_reference_follows_the_actor_unless_set():
    cfg = ActorRolloutRefConfig(**{"device": "cpu"})
    cfg.actor.mixed_precision = "float32"
    chosen = resolve_policy_precision(cfg)
    assert chosen["ref"] == Precision("float32", "the actor's dtype, so both run one log-prob path")
    cfg.ref.dtype = "bfloat16"
    assert resolve_policy_precision(cfg)["ref"] == Precision("bfloat16", "set explicitly in the config")


def test_resolve_precision_fills_the_config_and_reports(monkeypatch):
    import verl.utils.precision as precision

    real = precision.read_cpu_flags
    monkeypatch.setattr(precision, "read_cpu_flags", lambda cpuinfo=None: real(SKX))
    cfg = load_config(
        [MODEL, "actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.rollout.dtype=bfloat16"],
        check_files=False,
    )
    report = resolve_precision(cfg, cuda_available=False)
    emulated = "the CPU has no native bf16 (no amx_bf16 / avx512_bf16): bf16 would be emulated, slower than fp32"
    assert report == {
        "actor": {"dtype": "float32", "reason": emulated},
        "ref": {"dtype": "float32", "reason": "the actor's dtype, so both run one log-prob path"},
        "rollout": {"dtype": "bfloat16", "reason": "set explicitly in the config"},
        "critic": {"dtype": "float32", "reason": emulated},  # the default estimator (gae) has a critic
    }
    arr = cfg.actor_rollout_ref
    assert (arr.actor.mixed_precision, arr.ref.dtype, arr.rollout.dtype, cfg.critic.mixed_precision) == (
        "float32",
        "float32",
        "bfloat16",
        "float32",
    )


def test_cuda_config_without_a_gpu_here_leaves_auto_to_the_workers():
    cfg = load_config([MODEL, "trainer.device=cuda"], check_files=False)
    report = resolve_precision(cfg, cuda_available=False)
    assert report["actor"] == {"dtype": "auto", "reason": "resolved by each worker on its GPU"}
    assert cfg.actor_rollout_ref.actor.mixed_precision == "auto"


def test_dump_config_records_the_choice(tmp_path):
    from verl.trainer.ppo.ray_trainer import dump_config

    cfg = load_config([MODEL, "algorithm.adv_estimator=grpo", "agent.n=2"], check_files=False)
    report = resolve_precision(cfg, cuda_available=False)
    dump_config(cfg, tmp_path / "config.json", precision=report)
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["precision"] == report
    assert set(report) == {"actor", "rollout"}  # no critic for grpo, no reference without a KL term
    assert written["actor_rollout_ref"]["actor"]["mixed_precision"] == report["actor"]["dtype"]


def test_step0_kl_is_zero_in_bf16(tiny_model_path):
    """Actor and reference share one log-prob path (fp32 weights, the same autocast): identical weights give KL 0."""
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    cfg = {
        "model": {"path": tiny_model_path},
        "actor": {"mixed_precision": "bfloat16", "ppo_mini_batch_size": 2},
        "num_threads": 1,
    }
    worker = ActorRolloutRefWorker(cfg, role="actor_ref")
    worker.init_model()
    try:
        g = torch.Generator().manual_seed(0)
        prompts = torch.randint(10, 1000, (3, 7), generator=g).tolist()
        responses = [torch.randint(10, 1000, (n,), generator=g).tolist() for n in (5, 9, 2)]
        data = packed_proto(prompts, responses, pad_id=0)
        data.meta_info.update(temperature=0.7, top_p=1.0, top_k=-1)
        old = worker.compute_log_prob(data).batch["old_log_probs"]
        ref = worker.compute_ref_log_prob(data).batch["ref_log_prob"]
        assert worker.precision["ref"].dtype == "bfloat16"
        assert float((old - ref).abs().max()) <= 1e-6
        assert float(old.abs().sum()) > 0
    finally:
        worker.shutdown()


def test_probe_rounds_alternate_the_dtypes_so_a_burst_of_load_slows_both():
    # fp32 takes 2 ms, bf16 1 ms; a burst of load makes 8 timings in a row 10x slower. Timed back to back
    # (8 of fp32, then 8 of bf16), a burst over bf16's eight would read bf16 at 0.2x fp32; in rounds of 4 it
    # covers bf16's round 1 and fp32's round 2, and each dtype keeps a quiet best.
    calls = []

    def seconds(name):
        calls.append(name)
        quiet = {"float32": 2e-3, "bfloat16": 1e-3}[name]
        return quiet * 10 if 5 <= len(calls) <= 12 else quiet

    rates = best_rates(seconds, flops=2e9, rounds=3, repeats=4)
    assert calls == (["float32"] * 4 + ["bfloat16"] * 4) * 3
    assert rates == {"float32": 1000.0, "bfloat16": 2000.0}


def test_matmul_probe_measures_both_dtypes():
    rates = matmul_probe(size=64, rounds=2, repeats=2)
    assert sorted(rates) == ["bfloat16", "float32"]
    assert all(rate > 0 for rate in rates.values())


def test_a_cached_probe_from_an_older_probe_is_measured_again(tmp_path, monkeypatch):
    import verl.utils.precision as precision

    monkeypatch.setenv("OPENMANUS_CACHE", str(tmp_path))
    measured = []
    monkeypatch.setattr(precision, "matmul_probe", lambda: measured.append(1) or {"float32": 170.0, "bfloat16": 380.0})
    key = "vm|AMD EPYC|x86_64|torch 2.13.0+cpu"  # the key the first probe wrote: no probe version
    (tmp_path / "precision_probe.json").write_text(json.dumps({"key": key, "gflops": {"float32": 174, "bfloat16": 34}}))
    assert precision.cached_probe() == {"float32": 170.0, "bfloat16": 380.0}
    assert precision.cached_probe() == {"float32": 170.0, "bfloat16": 380.0}  # now cached: measured once
    assert len(measured) == 1
    assert json.loads((tmp_path / "precision_probe.json").read_text())["key"].endswith("|probe 2")


def test_bf16_stochastic_rounding_is_unbiased_over_every_noise_value():
    """1 + 2^-9 lies a quarter of the way from bf16's 1 to 1 + 2^-7 (its dropped bits are 2^14): it rounds
    up for 2^14 of the 2^16 noise values, so the mean is the value itself; nearest rounding gives 1."""
    noise = torch.arange(1 << 16, dtype=torch.int32)
    for x, down, up in [(1 + 2**-9, 1.0, 1 + 2**-7), (-(1 + 2**-9), -1.0, -(1 + 2**-7))]:
        r = bf16_round_bits(torch.full((1 << 16,), x), noise).double()
        assert set(r.tolist()) == {down, up}
        assert int((r == up).sum()) == 1 << 14
        assert r.mean().item() == x
        assert torch.tensor(x).to(torch.bfloat16).item() == down
    on_grid = bf16_round_bits(torch.full((1 << 16,), 0.375), noise)
    assert set(on_grid.float().tolist()) == {0.375}  # already bf16: never moves


def test_bf16_stochastic_rounding_is_fixed_by_the_name():
    x = torch.linspace(-1, 1, 1000) * (1 + 2**-12)
    a, b, c = to_bf16_stochastic(x, "w"), to_bf16_stochastic(x.clone(), "w"), to_bf16_stochastic(x, "v")
    assert a.dtype == torch.bfloat16 and torch.equal(a, b) and not torch.equal(a, c)
    step = 2.0 ** (torch.floor(torch.log2(x.abs())) - 7)  # the bf16 step at each |x|
    assert bool(((a.float() - x).abs() <= step).all())
    assert bool(((a.float() - x).abs() > step / 2).any())  # not always the nearer neighbour


def test_linears_under_bf16_autocast_compute_with_the_stochastic_view_and_train_the_fp32_weight():
    """A linear layer on the bf16 grid, nudged by 0.3 of a step: nearest rounding (plain autocast) computes
    with the old weights, the stochastic view with a bf16 copy that moves in proportion, renewed after each
    optimiser step; the gradient reaches the fp32 weight unchanged."""
    torch.manual_seed(0)
    plain, rounded = torch.nn.Linear(64, 32, bias=False), torch.nn.Linear(64, 32, bias=False)
    with torch.no_grad():
        plain.weight.copy_(plain.weight.to(torch.bfloat16).float())
        before = plain.weight.to(torch.bfloat16).float()
        step = 2.0 ** (torch.floor(torch.log2(plain.weight.abs())) - 7)
        plain.weight.add_(0.3 * step * plain.weight.sign())
        rounded.weight.copy_(plain.weight)
    module = torch.nn.Sequential(rounded)
    round_linears_stochastically(module)
    round_linears_stochastically(module)  # again: a no-op
    x = torch.randn(8, 64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y_plain, y = plain(x), module(x)
    assert torch.equal(y_plain, torch.nn.functional.linear(x.to(torch.bfloat16), before.to(torch.bfloat16)))
    view = rounded._bf16_view
    assert torch.equal(view, to_bf16_stochastic(rounded.weight, "0.weight"))
    moved = (view.float() != before).float().mean().item()
    assert 0.25 < moved < 0.35  # each weight moves a whole step with probability 0.3
    y.float().sum().backward()
    y_plain.float().sum().backward()
    assert rounded.weight.grad.dtype == torch.float32 and torch.equal(rounded.weight.grad, plain.weight.grad)
    torch.optim.SGD(module.parameters(), lr=0.5).step()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        module(x)
    assert torch.equal(rounded._bf16_view, to_bf16_stochastic(rounded.weight, "0.weight"))
    assert not torch.equal(rounded._bf16_view, view)
    assert torch.equal(module(x), x @ rounded.weight.T)  # fp32 outside autocast


@pytest.mark.parametrize("rounding", ["stochastic", "nearest"])
def test_the_hf_engine_rounds_fp32_weights_as_configured(tiny_model_path, rounding):
    """The fallback engine in bf16: the folder's fp32 weights and an update's reach it rounded
    stochastically with the trainer's dither (`to_bf16_stochastic` by name), or to nearest."""
    from transformers import AutoModelForCausalLM

    from verl.workers.rollout.hf_rollout import HFRollout

    fp32 = dict(AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32).named_parameters())
    engine = HFRollout(tiny_model_path, dtype="bfloat16", weight_rounding=rounding)

    def expected(name: str, t: torch.Tensor) -> torch.Tensor:
        return to_bf16_stochastic(t.detach(), name) if rounding == "stochastic" else t.detach().to(torch.bfloat16)

    def assert_engine_holds(weights: dict[str, torch.Tensor]) -> None:
        held = dict(engine.model.named_parameters())
        assert held.keys() == weights.keys()
        for name, t in weights.items():
            assert torch.equal(held[name], expected(name, t)), name

    assert_engine_holds(fp32)
    moved = {name: t.detach() * 1.001 for name, t in fp32.items()}
    engine.update_weights(moved.items())
    assert_engine_holds(moved)
    x = moved["model.embed_tokens.weight"]
    assert not torch.equal(to_bf16_stochastic(x, "model.embed_tokens.weight"), x.to(torch.bfloat16))  # they differ here
