"""A minimal rollout plugin from outside the engine (``data.rollout=fixed_rollout:PLUGIN``): no agent, no env.

Every task is answered by the same two replies, one right and one wrong, so a
GRPO group of two has rewards 1 and 0 under ``exact_match`` with ground truth "4".
"""

from verl.protocol import DataProto
from verl.trainer.ppo.rollout import RolloutPlugin
from verl.utils.batch import pack_sequences


class FixedRollout:
    def __init__(self, tokenizer, n: int):
        self.tokenizer, self.n = tokenizer, n
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def run_llm_loop(
        self, tasks: DataProto, do_sample: bool = True, global_step: int = 0, output_dir=None
    ) -> DataProto:
        encode = lambda text: self.tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
        rows = [(i, k) for i in range(len(tasks)) for k in range(self.n)]
        packed = pack_sequences(
            [encode("2+2=")] * len(rows), [encode("4" if k % 2 == 0 else "5") for _, k in rows], pad_id=self.pad_id
        )
        packed["rollout_log_probs"] = packed["response_mask"].float() * 0.0
        n_rows = len(rows)
        return DataProto.from_dict(
            packed,
            {
                "uid": [f"{global_step}-{i}" for i, _ in rows],
                "task_id": [i for i, _ in rows],
                "data_source": ["arithmetic"] * n_rows,
                "reward_model": [{"ground_truth": "4"}] * n_rows,
                "failed": [False] * n_rows,
                "status": ["done"] * n_rows,
                "num_turns": [1] * n_rows,
                "success": [None] * n_rows,
                "env_reward": [0.0] * n_rows,
            },
            meta_info={"metrics": {"rollout/trajectories": float(n_rows)}},
        )


PLUGIN = RolloutPlugin(
    build=lambda cfg, tokenizer, generator, n: FixedRollout(tokenizer, n), response_budget=lambda cfg: 8
)
