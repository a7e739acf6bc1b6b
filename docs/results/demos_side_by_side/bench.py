"""The default warm start's demonstrations (32 train and 8 dev WebShop episodes by the expert, the commands
`scripts/warm_start.py` runs), one after the other against side by side, alternating, ``ROUNDS`` each.

    .venv/bin/python docs/results/demos_side_by_side/bench.py [ROUNDS]
"""

import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import warm_start  # noqa: E402
from model_prep import prepare_default_model  # noqa: E402


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    args = warm_start.build_parser().parse_args([])
    args.action_format, args.program = "react", None
    model, limits = prepare_default_model(), warm_start.agent_limits()
    with tempfile.TemporaryDirectory() as folder:
        cmds = [
            warm_start.demo_command(args, "webshop", split, n, model, limits, Path(folder))
            for split, n in (("train", args.n_demos), ("dev", args.n_dev_demos))
        ]
        print(f"{args.n_demos} train + {args.n_dev_demos} dev WebShop demonstrations, {rounds} rounds")
        for r in range(1, rounds + 1):
            times = {}
            for way in ("one after the other", "side by side"):
                start = time.perf_counter()
                with contextlib.redirect_stderr(io.StringIO()):
                    if way == "side by side":
                        warm_start.run_together(cmds)
                    else:
                        for cmd in cmds:
                            warm_start.run(cmd)
                times[way] = time.perf_counter() - start
            seq, par = times.values()
            print(f"round {r}: one after the other {seq:.1f} s, side by side {par:.1f} s ({seq / par:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
