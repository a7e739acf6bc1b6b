"""ScienceWorld science tasks (AgentGym's SciWorld protocol): the spec; no server in this project yet."""

from agentgym.spec import EnvSpec

SPEC = EnvSpec(
    name="sciworld",
    family="B",
    reset_field="data_idx",
    reset_observation_keys=("task_description", "observation"),
    reward_key="score",
    success_reward=100.0,
    reward_scale=100.0,
    action_pattern=r"[a-z][\w \-]*",
    instructions=(
        "You perform a science task in a simulated text world with rooms and objects. Read the task, explore "
        "and use objects with short commands such as: look around, go to kitchen, open door to hallway, "
        "pick up thermometer, use thermometer on water, focus on substance, wait. "
        "Your score goes from 0 to 100; 100 means the task is done."
    ),
)
