"""Text tables: an evaluation summary and a paired comparison."""

from __future__ import annotations

from typing import Any, Mapping


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.4f}"


def _fmt_ci(ci: Any) -> str:
    return "-" if ci is None else f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def format_summary(s: Mapping[str, Any]) -> str:
    """The summary of `openmanus_rl.evaluation.run.evaluate` as a text table."""
    mode = "greedy" if s["greedy"] else f"n={s['n']} samples per task"
    lines = [
        f"model {s['model']}",
        f"{s['env']}/{s['split']}: {s['tasks']} tasks ({s['scored_tasks']} scored), "
        f"{s['rollouts']} rollouts, {s['failed']} failed (env errors, not scored); {mode}",
        f"{'metric':<22} {'value':>8}  95% CI",
    ]
    rows = [
        ("success_rate" if s["greedy"] else "success_rate (mean@k)", s["success_rate"], s["success_ci95"]),
        ("mean_reward", s["mean_reward"], s["reward_ci95"]),
    ]
    if not s["greedy"]:
        rows.append(("pass@k", s.get("pass_at_k"), None))
    rows += [("invalid_action_rate", s["invalid_action_rate"], None), ("mean_turns", s["mean_turns"], None)]
    lines += [
        f"{name:<22} {_fmt(value):>8}  {_fmt_ci(ci) if ci is not None else ''}".rstrip() for name, value, ci in rows
    ]
    per_source = s.get("per_source") or {}
    if per_source:
        lines.append(f"{'source':<22} {'tasks':>6} {'success':>8}  {'95% CI':<18} {'reward':>8} {'failed':>6}")
        for source, p in per_source.items():
            lines.append(
                f"{source:<22} {p['tasks']:>6} {_fmt(p['success_rate']):>8}  {_fmt_ci(p['success_ci95']):<18} "
                f"{_fmt(p['mean_reward']):>8} {p['failed']:>6}"
            )
    methods = s.get("ci_method") or {}
    lines += [f"CI ({k}): {v}" for k, v in methods.items()]
    if "wall_s" in s:
        lines.append(f"wall {s['wall_s']:.0f} s, {s['tasks_per_s']:.3f} tasks/s")
    return "\n".join(lines)


def format_comparison(c: Mapping[str, Any]) -> str:
    """The result of `openmanus_rl.evaluation.compare.compare` as text; each of its ``warnings`` on a line of its own
    starting with ``warning:``."""
    lines = [f"A: {c['a']}", f"B: {c['b']}"]
    lines += [f"warning: {w}" for w in c.get("warnings", [])]
    lines.append(
        f"paired over {c['shared_tasks']} shared tasks (only in A: {c['only_a']}, only in B: {c['only_b']}, "
        f"shared but unscored (failed): {c['unscored_shared']})"
    )
    if c["success"] is None:
        lines.append("no shared scored tasks: nothing to compare")
        return "\n".join(lines)
    lines.append(f"{'metric':<10} {'A':>8} {'B':>8} {'B - A':>8}  95% CI")
    for key in ("success", "reward"):
        m = c[key]
        lines.append(f"{key:<10} {m['a_mean']:>8.4f} {m['b_mean']:>8.4f} {m['gain']:>+8.4f}  {_fmt_ci(m['ci95'])}")
    s = c["success"]
    if c.get("binary"):
        lines.append(
            f"McNemar exact (two-sided): b (A fails, B succeeds) = {s['b']}, "
            f"c (A succeeds, B fails) = {s['c']}, p = {s['mcnemar_p']:.4g}"
        )
    else:
        lines.append("McNemar: not applicable (more than one rollout per task in a file)")
    lines.append(f"CI: {c['ci_method']}")
    return "\n".join(lines)


def format_seeds(r: Mapping[str, Any]) -> str:
    """The result of `openmanus_rl.evaluation.seeds.seeds_report` as text: a line per seed, then the pooled gain."""
    lines = [f"baseline: {r['base']}", f"{'seed file':<48} {'tasks':>6} {'gain':>8}  95% CI            McNemar p"]
    for arm, c in zip(r["arms"], r["per_seed"]):
        lines += [f"warning ({arm}): {w}" for w in c.get("warnings", [])]
        if c["success"] is None:
            lines.append(f"{arm:<48} {0:>6} {'-':>8}  no shared scored tasks")
            continue
        s = c["success"]
        p = f"{s['mcnemar_p']:.4g}" if c.get("binary") else "n/a"
        lines.append(f"{arm:<48} {c['shared_tasks']:>6} {s['gain']:>+8.4f}  {_fmt_ci(s['ci95']):<17} {p}")
    pooled = r["pooled"]
    if pooled is None:
        lines.append("no task scored by the baseline and every seed: nothing to pool")
        return "\n".join(lines)
    lines.append(
        f"pooled over {pooled['seeds']} seed(s) x {r['shared_tasks']} tasks: success {pooled['base_mean']:.4f} -> "
        f"{pooled['arm_mean']:.4f}, gain {pooled['gain']:+.4f}, 95% CI {_fmt_ci(pooled['ci95'])}; "
        f"seeds significantly below 0: {pooled['seeds_below_zero']} of {pooled['seeds']}"
    )
    lines.append(f"CI: {pooled['ci_method']}")
    return "\n".join(lines)
