"""A rollout plugin whose reward module fails on purpose (``data.rollout=faulty_reward:PLUGIN``), for the reward drill.

Each task is answered twice ("4" and "5", as in ``fixed_rollout``); task 0's
ground truth is "4", task 1's is "raise" (the reward module raises) on its
first copy and "hang" (it sleeps far past any time limit) on its second. So a
step of 2 tasks x 2 has 2 of its 4 rows failed by the reward path.
"""

import time

from verl.protocol import DataProto
from verl.trainer.ppo.rollout import RolloutPlugin
from verl.utils.batch import pack_sequences
from verl.utils.reward_score import register_reward_score


def faulty_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    if ground_truth == "raise":
        raise ValueError("drill: this reward module has a bug")
    if ground_truth == "hang":
        time.sleep(3600)
    return float(solution_str.strip() == ground_truth)


register_reward_score("drill_faulty", faulty_score)


class FaultyRewardRollout:
    def __init__(self, tokenizer, n: int):
        self.tokenizer, self.n = tokenizer, n
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def run_llm_loop(self, tasks: DataProto, do_sample: bool = True, global_step: int = 0, output_dir=None) -> DataProto:
        encode = lambda text: self.tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
        rows = [(i, k) for i in range(len(tasks)) for k in range(self.n)]
        truths = [("4" if i % 2 == 0 else ("raise" if k == 0 else "hang")) for i, k in rows]
        packed = pack_sequences([encode("2+2=")] * len(rows), [encode("4" if k % 2 == 0 else "5") for _, k in rows],
                                pad_id=self.pad_id)
        packed["rollout_log_probs"] = packed["response_mask"].float() * 0.0
        n_rows = len(rows)
        return DataProto.from_dict(packed, {
            "uid": [f"{global_step}-{i}" for i, _ in rows], "task_id": [i for i, _ in rows],
            "data_source": ["arithmetic"] * n_rows, "reward_model": [{"ground_truth": t} for t in truths],
            "failed": [False] * n_rows, "status": ["done"] * n_rows, "num_turns": [1] * n_rows,
            "success": [None] * n_rows, "env_reward": [0.0] * n_rows, "error": [""] * n_rows,
        }, meta_info={"metrics": {"rollout/trajectories": float(n_rows)}})


PLUGIN = RolloutPlugin(build=lambda cfg, tokenizer, generator, n: FaultyRewardRollout(tokenizer, n), response_budget=lambda cfg: 8)
