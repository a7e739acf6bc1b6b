"""A step's training reward: the reward path's (`RewardManager`), then, with ``reward_model.enable``, a learned
model's or an LLM judge's score in it (`verl.trainer.ppo.model_reward`).

A judge failing on more than ``judge.max_failed_fraction`` of the episodes fails the step (`TooManyFailures`:
rolled out once more, then the run stops). Validation keeps the reward path's alone: dev success is the env's
verdict.
"""

from __future__ import annotations

import time

from verl.protocol import DataProto
from verl.trainer.ppo.config import PPOConfig
from verl.trainer.ppo.faults import TooManyFailures
from verl.trainer.ppo.judge import Judge, JudgeUnavailable, judge_failure_problem
from verl.trainer.ppo.model_reward import apply_model_reward
from verl.trainer.ppo.reward import RewardManager
from verl.trainer.ppo.step_plan import for_worker


class Scorer:
    """Scores batches in place; ``rm_wg`` (a reward-model worker group) or ``judge`` is set once the workers run."""

    def __init__(self, config: PPOConfig, tokenizer) -> None:
        alg = config.algorithm
        self.reward_model = config.reward_model
        self.reward_manager = RewardManager(
            tokenizer, alg.reward_score_fn, alg.reward_allocation, alg.gamma, alg.reward_timeout_s
        )
        self.rm_wg = None
        self.judge: Judge | None = None

    def __call__(self, batch: DataProto) -> dict[str, float]:
        """Fill ``outcome_scores`` and ``token_level_scores``; returns the reward metrics."""
        metrics = self.reward_manager(batch)
        start = time.perf_counter()
        if self.rm_wg is not None:
            out = self.rm_wg.compute_rm_score(for_worker(batch))
            metrics.update(apply_model_reward(batch, out.batch["rm_scores"], self.reward_model, self.reward_manager))
        elif self.judge is not None:
            try:
                grid, errors, calls = self.judge.score(batch)
            except JudgeUnavailable as exc:
                raise TooManyFailures(str(exc)) from None
            metrics.update(calls)
            metrics.update(apply_model_reward(batch, grid, self.reward_model, self.reward_manager, errors))
            problem = judge_failure_problem(
                errors, int(calls["reward_model/judged"]), self.reward_model.judge.max_failed_fraction
            )
            if problem:
                raise TooManyFailures(problem)
        else:
            return metrics
        metrics["timing_s/reward_model"] = time.perf_counter() - start
        return metrics

    def close(self) -> None:
        if self.judge is not None:
            self.judge.close()
