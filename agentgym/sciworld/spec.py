"""ScienceWorld science tasks on AgentGym's SciWorld protocol (family B): how clients and the agent see them;
the server is `agentgym.sciworld.app` (needs Java; ``OPENMANUS_EXTRAS=sciworld scripts/setup.sh``)."""

from agentgym.spec import EnvSpec
from agentgym.tools import EnvTool, text

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
    tools=(
        EnvTool(
            "act",
            "Do one action in the world.",
            "{action}",
            {"action": text("a short command, e.g. look around, go to kitchen, pick up thermometer")},
        ),
    ),
    probe_actions=(
        "look around",
        "inventory",
        "open door to kitchen",
        "go to kitchen",
        "pick up thermometer",
        "wait1",
    ),
    app="agentgym.sciworld.app",
    tasks="agentgym.sciworld.data:task_list",
    splits="4,639 (task, variation) pairs of 23 ScienceWorld tasks, split by ScienceWorld's own variation splits: "
    "train 2,312, dev 1,156, test 1,171",
    expert="agentgym.sciworld.expert:SciWorldExpert",
    max_turns=20,  # gold paths average 64 actions; the token budget ends episodes long before that
    demos_keep="progress",  # inside 20 turns the expert finishes 1 train task in 32 (score 100) but scores on most
    extra="sciworld",
)
