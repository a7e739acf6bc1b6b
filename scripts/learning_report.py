"""The report of a learning run's folder (``scripts/learning_run.sh --out DIR``), made from what the folder holds:
every RL arm in it (``<arm>.json`` with ``<arm>.metrics.jsonl``) against the warm start, so that arms run into
one folder on different days add up instead of overwriting each other's report.

    python scripts/learning_report.py DIR [--env_name webshop]

Writes ``DIR/comparisons.txt`` (base -> warm start, then warm start -> each arm's last step and its dev-chosen
step, paired over tasks: `openmanus_rl.evaluation.compare`), ``DIR/dev_success.png`` (dev success against the
RL step and against the minutes of RL, validation included, one line an arm, the expert's test success
dashed) and ``DIR/table.md`` (test success of every policy, the expert last); prints the comparisons and the
table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from openmanus_rl.evaluation.compare import compare
from openmanus_rl.evaluation.report import format_comparison


def arms(out: Path) -> list[str]:
    """The RL arms in ``out``, alphabetically: each ``<arm>.metrics.jsonl`` with its ``<arm>.json`` beside it."""
    names = (p.name.removesuffix(".metrics.jsonl") for p in out.glob("*.metrics.jsonl"))
    return sorted(name for name in names if (out / f"{name}.json").is_file())


def policies(out: Path, arm_names: list[str]) -> list[str]:
    """The evaluated policies in ``out``, in report order: base, warm start, then each arm's last and dev-chosen
    step (those with a ``<name>.json``)."""
    names = ["base", "warm_start", *(name for arm in arm_names for name in (arm, f"{arm}_best"))]
    return [name for name in names if (out / f"{name}.json").is_file()]


def comparisons(out: Path, names: list[str]) -> str:
    """The paired comparisons of `policies` ``names`` (base -> warm start, warm start -> each RL policy), as
    ``python -m openmanus_rl.eval compare`` prints them, one after another."""
    pairs = [("base", "warm_start")] if "base" in names else []
    pairs += [("warm_start", name) for name in names if name not in ("base", "warm_start")]
    return "\n".join(format_comparison(compare(out / f"{a}.json", out / f"{b}.json")) for a, b in pairs)


def dev_points(metrics: Path, env: str) -> list[tuple[int, float, float]]:
    """``(step, minutes of RL so far, dev success)`` at each validation in a run's metrics."""
    minutes, points = 0.0, []
    for line in metrics.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        minutes += (row.get("timing_s/step", 0.0) + row.get("timing_s/validation", 0.0)) / 60
        if f"val/{env}/success_rate" in row:
            points.append((row["step"], minutes, row[f"val/{env}/success_rate"]))
    return points


def plot(out: Path, arm_names: list[str], env: str, expert_success: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
    for arm in arm_names:
        points = dev_points(out / f"{arm}.metrics.jsonl", env)
        for col, ax in enumerate(axes):  # x: the RL step, then the minutes
            ax.plot([p[col] for p in points], [p[2] for p in points], marker="o", label=f"{arm} (dev, greedy)")
    for ax, label in ((axes[0], "RL step"), (axes[1], "wall-clock minutes of RL (validation included)")):
        ax.axhline(expert_success, color="grey", linestyle="--", label="expert (test)")
        ax.set_xlabel(label)
        ax.set_ylim(0, 1)
    axes[0].set_ylabel("success rate")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "dev_success.png", dpi=100)


def table(out: Path, names: list[str], expert: dict) -> str:
    """Test success of `policies` ``names``, the expert last, as a markdown table."""
    rows = ["| policy | test tasks | success (95% CI) | mean reward | invalid-action rate |", "|---|---|---|---|---|"]
    for name in names:
        r = json.loads((out / f"{name}.json").read_text())
        lo, hi = r["success_ci95"]
        rows.append(
            f"| {name} | {r['tasks']} | {r['success_rate']:.3f} ({lo:.3f}-{hi:.3f}) | {r['mean_reward']:.3f} "
            f"| {r['invalid_action_rate']:.3f} |"
        )
    rows.append(f"| expert | {expert.get('n', '')} | {expert['success_rate']:.3f} | {expert['mean_reward']:.3f} | 0 |")
    return "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the learning run's folder (learning_run.sh --out)")
    parser.add_argument("--env_name", default="webshop")
    args = parser.parse_args()
    out = Path(args.out)
    arm_names = arms(out)
    if not arm_names:
        raise SystemExit(f"{out}: no RL arm (<arm>.json with <arm>.metrics.jsonl) to report")
    expert = json.loads((out / "expert.json").read_text())
    names = policies(out, arm_names)
    text = comparisons(out, names)
    (out / "comparisons.txt").write_text(text + "\n")
    plot(out, arm_names, args.env_name, expert["success_rate"])
    rows = table(out, names, expert)
    (out / "table.md").write_text(rows)
    print(text)
    print(rows, end="")


if __name__ == "__main__":
    main()
