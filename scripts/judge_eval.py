"""How well an LLM judge tells successful episodes from failed ones: its AUC on labelled trajectories.

    python scripts/judge_eval.py --data data/rm/webshop/eval.parquet --serve MODEL_FOLDER [--limit N]
    python scripts/judge_eval.py --data ... --base_url http://host:port/v1 [--api_key_env VAR] [--model NAME]

Reads a ``scripts/make_rm_data.py`` parquet, decodes each trajectory as the trainer's judge does (its
tokens, special tokens dropped) with the tokenizer of ``--tokenizer`` (default: the served model), asks
the judge (``reward_model.judge`` settings from ``ppo_trainer.yaml``, ``--rubric`` and ``--answer``
over them) and prints the AUC of its scores against the env's success, the pair accuracy on
same-task pairs, the failures and the call latency. ``--serve`` starts a `JudgeServer` in this
process; ``--out`` also writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a make_rm_data.py parquet (e.g. data/rm/webshop/eval.parquet)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--serve", help="a model folder to serve as the judge here")
    where.add_argument("--base_url", help="an OpenAI-compatible endpoint")
    parser.add_argument("--api_key_env", default=None)
    parser.add_argument("--model", default=None, help="the model name sent (default: the endpoint's first)")
    parser.add_argument("--tokenizer", default=None, help="decodes the trajectories (default: --serve's folder)")
    parser.add_argument("--rubric", default=None)
    parser.add_argument("--answer", default="yes_probability", choices=("yes_probability", "number"))
    parser.add_argument("--limit", type=int, default=-1)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if not (args.tokenizer or args.serve):
        parser.error("--tokenizer is needed with --base_url (the policy's tokenizer decodes the trajectories)")

    import numpy as np
    from transformers import AutoTokenizer

    from verl.trainer.ppo.judge import JudgeClient, endpoint_model, load_rubric
    from verl.trainer.rm_trainer import read_trajectories
    from verl.utils.ranking import roc_auc
    from verl.utils.typed_config import from_dict
    from verl.workers.config import JudgeConfig

    data, _ = read_trajectories(args.data, 10**9)
    rows = range(len(data.ids)) if args.limit < 0 else range(min(args.limit, len(data.ids)))
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer or args.serve)
    episodes = [tokenizer.decode(data.ids[i], skip_special_tokens=True) for i in rows]
    cfg = from_dict(
        JudgeConfig,
        {"base_url": args.base_url, "rubric": args.rubric, "answer": args.answer, "api_key_env": args.api_key_env},
        "judge",
    )
    server = None
    if args.serve:
        from verl.workers.judge_server import JudgeServer

        server = JudgeServer(
            args.serve, {"dtype": args.dtype, "kv_cache_gb": 2.0, "max_model_len": 4096}, num_threads=args.threads
        )
    try:
        base_url = server.url() if server else args.base_url
        key = cfg.api_key()
        model = args.model or endpoint_model(base_url, key, 30.0)
        client = JudgeClient(cfg, base_url, model, key, load_rubric(args.rubric))
        start = time.perf_counter()
        results, calls = client.score(episodes)
        wall = time.perf_counter() - start
    finally:
        if server:
            server.close()
    scored = [(i, r) for i, r in zip(rows, results) if not isinstance(r, str)]
    scores = {i: r for i, r in scored}
    success = [bool(data.success[i]) for i, _ in scored]
    pairs = [(c, r) for c, r in data.pairs() if c in scores and r in scores]
    figures = {
        "data": args.data,
        "judge": args.serve or base_url,
        "model": model,
        "answer": args.answer,
        "episodes": len(episodes),
        "failures": len(episodes) - len(scored),
        "success_rate": float(np.mean(success)),
        "auc": roc_auc([s for _, s in scored], success),
        "pair_accuracy": float(
            np.mean([1.0 if scores[c] > scores[r] else 0.5 if scores[c] == scores[r] else 0.0 for c, r in pairs])
        )
        if pairs
        else None,
        "score_mean": float(np.mean([s for _, s in scored])) if scored else None,
        "wall_s": wall,
        **{k.removeprefix("reward_model/"): v for k, v in calls.items()},
    }
    errors = [r for r in results if isinstance(r, str)]
    if errors:
        figures["most_common_error"] = max(set(errors), key=errors.count)[:300]
    print(json.dumps(figures, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
