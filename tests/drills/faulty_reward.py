"""A rollout plugin whose reward module fails on purpose (``data.rollout=faulty_reward:PLUGIN``), for the reward drill.

It is ``fixed_rollout`` (every task answered "4" and "5") with other ground
truths: task 0's is "4", task 1's is "raise" (the reward module raises) on its
first copy and "hang" (it sleeps far past any time limit) on its second. So a
step of 2 tasks x 2 has 2 of its 4 rows failed by the reward path.
"""

import time

import numpy as np
from fixed_rollout import FixedRollout

from verl.protocol import DataProto
from verl.trainer.ppo.rollout import RolloutPlugin
from verl.utils.reward_score import register_reward_score


def faulty_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    if ground_truth == "raise":
        raise ValueError("drill: this reward module has a bug")
    if ground_truth == "hang":
        time.sleep(3600)
    return float(solution_str.strip() == ground_truth)


register_reward_score("drill_faulty", faulty_score)


class FaultyRewardRollout(FixedRollout):
    def run_llm_loop(
        self, tasks: DataProto, do_sample: bool = True, global_step: int = 0, output_dir=None
    ) -> DataProto:
        batch = super().run_llm_loop(tasks, do_sample, global_step, output_dir)
        nt = batch.non_tensor_batch
        copies = [row % self.n for row in range(len(batch))]
        truths = ["4" if task % 2 == 0 else ("raise" if k == 0 else "hang") for task, k in zip(nt["task_id"], copies)]
        nt["reward_model"] = np.array([{"ground_truth": t} for t in truths], dtype=object)
        nt["error"] = np.array([""] * len(batch), dtype=object)
        return batch


PLUGIN = RolloutPlugin(
    build=lambda cfg, tokenizer, generator, n: FaultyRewardRollout(tokenizer, n), response_budget=lambda cfg: 8
)
