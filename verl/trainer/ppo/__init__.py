"""PPO-family training: the estimator registry (`core_algos`, plus `gigpo`), rewards, config and the driver."""

from verl.trainer.ppo import gigpo  # noqa: F401  (registers the "gigpo" estimator)
