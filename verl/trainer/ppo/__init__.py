"""PPO-family training: rewards, config, rollout plugins and the driver; `gigpo` adds its estimator to
`verl.core_algos`'s registry."""

from verl.trainer.ppo import gigpo  # noqa: F401  (registers the "gigpo" estimator)
