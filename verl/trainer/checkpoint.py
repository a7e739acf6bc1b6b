"""The checkpoints folder's layout that readers outside the trainer rely on.

`LATEST_MARKER` is the file in the checkpoints folder that holds the step
number ``K`` of the newest complete checkpoint, ``global_step_K``; the trainer
rewrites it (atomically) after each checkpoint it saves.

`BEST_FILE` (with ``trainer.keep_best``) is the JSON ``{"step": K, "dev_success": x, "model": PATH}`` of the
validation with the best success so far: ``PATH`` is ``global_step_K`` (kept beside the newest ones), or the
starting model when no step beat the validation before training (step 0).
"""

LATEST_MARKER = "latest_checkpointed_iteration.txt"
BEST_FILE = "best_dev.json"
