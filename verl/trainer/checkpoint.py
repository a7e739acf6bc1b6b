"""The checkpoints folder's layout that readers outside the trainer rely on.

`LATEST_MARKER` is the file in the checkpoints folder that holds the step
number ``K`` of the newest complete checkpoint, ``global_step_K``; the trainer
rewrites it (atomically) after each checkpoint it saves.
"""

LATEST_MARKER = "latest_checkpointed_iteration.txt"
