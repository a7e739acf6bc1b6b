"""A PNG of reward, success, KL and validation success per step, drawn from metrics.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

# (title, training keys, suffix of validation keys val/<data_source>/<suffix>)
PANELS = (
    ("reward", ("env/reward/mean",), "reward/mean"),
    ("success rate", ("env/success_rate",), "success_rate"),
    ("KL", ("actor/reward_kl_penalty", "actor/kl_loss", "actor/ppo_kl"), None),
    ("losses", ("actor/pg_loss", "critic/vf_loss"), None),
)


SFT_PANELS = (("loss", ("sft/train_loss", "sft/dev_loss"), None), ("learning rate", ("sft/lr",), None))


def plot_metrics(jsonl_path: str | Path, png_path: str | Path, panels: tuple = PANELS) -> Path:
    """Draw ``panels`` (RL's by default, `SFT_PANELS` for SFT);
    keys that never appear are skipped. Returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in Path(jsonl_path).read_text().splitlines() if line.strip()]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4))
    all_keys = sorted({k for r in rows for k in r})
    for ax, (title, keys, val_suffix) in zip(axes, panels):
        val_keys = [k for k in all_keys if val_suffix and k.startswith("val/") and k.endswith("/" + val_suffix)]
        for key in (*keys, *val_keys):
            points = [(r["step"], r[key]) for r in rows if key in r]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, marker="o", label=key)
        ax.set_title(title)
        ax.set_xlabel("step")
        if ax.lines:
            ax.legend(fontsize=7)
    fig.tight_layout()
    png_path = Path(png_path)
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
    return png_path
