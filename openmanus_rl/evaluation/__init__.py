"""Evaluation of a policy on held-out env tasks (the CLI is ``python -m openmanus_rl.eval``).

``stats``: intervals and tests; ``results``: per-rollout records and their files; ``summary``: the
headline numbers; ``report``: the text tables; ``checkpoints``: what ``--model`` stands for;
``tasks``: the task files; ``servers``: an env server for the run; ``provenance``: what a result
file needs to be rerun; ``run``: the evaluation loop; ``compare``: the paired comparison.
"""
