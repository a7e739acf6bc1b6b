"""`RewardManager`: applies the reward-score registry to rolled-out trajectories.

For AgentGym sources the default function (``agentgym``) is the agent's own
composed reward, so the agent's token-level allocation is kept as it is. Any
other function's score replaces it and is paid on the trajectory's last model
token. Failed trajectories (env errors) are skipped: they are masked out of the
loss anyway.
"""

from __future__ import annotations

import numpy as np

from verl.protocol import DataProto
from verl.utils.reward_score import agentgym, get_reward_score_fn


class RewardManager:
    def __init__(self, tokenizer, reward_score_fn: str | None = None):
        self.tokenizer = tokenizer
        self.reward_score_fn = reward_score_fn

    def final_model_text(self, batch: DataProto, row: int) -> str:
        """Decoded text of the last contiguous run of model tokens."""
        mask = batch.batch["response_mask"][row].tolist()
        ids = batch.batch["responses"][row].tolist()
        end = max((i for i, m in enumerate(mask) if m), default=-1)
        if end < 0:
            return ""
        start = end
        while start > 0 and mask[start - 1]:
            start -= 1
        return self.tokenizer.decode(ids[start : end + 1], skip_special_tokens=True)

    def __call__(self, batch: DataProto) -> dict[str, float]:
        """Rewrite ``token_level_scores`` in place where a non-default function applies; returns ``reward/<fn>/mean``."""
        scores = batch.batch["token_level_scores"]
        mask = batch.batch["response_mask"]
        nt = batch.non_tensor_batch
        per_fn: dict[str, list[float]] = {}
        for i in range(len(batch)):
            if "failed" in nt and bool(nt["failed"][i]):
                continue
            name, fn = get_reward_score_fn(self.reward_score_fn, str(nt["data_source"][i]))
            if fn is agentgym.compute_score:
                continue
            extra = {
                **(nt["extra_info"][i] if "extra_info" in nt else {}),
                "task_id": nt["task_id"][i],
                "env_reward": float(nt["env_reward"][i]),
                "success": bool(nt["success"][i]),
                "num_turns": int(nt["num_turns"][i]),
                "reward_breakdown": nt["reward_breakdown"][i],
                "reward_total": float(scores[i].sum()),
            }
            reward_model = nt["reward_model"][i] if "reward_model" in nt else None
            ground_truth = reward_model.get("ground_truth") if isinstance(reward_model, dict) else None
            result = fn(str(nt["data_source"][i]), self.final_model_text(batch, i), ground_truth, extra)
            score = float(result["score"] if isinstance(result, dict) else result)
            positions = mask[i].nonzero()
            scores[i].zero_()
            if len(positions):
                scores[i, positions[-1]] = score
            per_fn.setdefault(name, []).append(score)
        return {f"reward/{name}/mean": float(np.mean(v)) for name, v in per_fn.items()}
