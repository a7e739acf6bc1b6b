"""ALFWorld household tasks on AgentGym's ALFWorld protocol (family B): how clients and the agent see them; the
server is `agentgym.alfworld.app` (needs the ``alfworld`` extra: ``OPENMANUS_EXTRAS=alfworld scripts/setup.sh``)."""

from agentgym.spec import EnvSpec
from agentgym.tools import EnvTool, text

SPEC = EnvSpec(
    name="alfworld",
    family="B",
    reset_field="game",
    reset_extra={"world_type": "Text"},
    action_pattern=r"[a-z][\w /\-]*",
    instructions=(
        "You are in a room of a house and must complete the household task you are given (for example: put a "
        "clean mug in coffeemachine). Each observation ends with a line AVAILABLE ACTIONS listing, separated by "
        "commas, the actions you can take now; answer with exactly one of them, such as: go to countertop 1, "
        "open drawer 2, take mug 1 from countertop 1, move mug 1 to shelf 1, clean mug 1 with sinkbasin 1, "
        "heat egg 1 with microwave 1, cool apple 1 with fridge 1, use desklamp 1, examine cabinet 1, look, "
        "inventory. Any other action changes nothing. You succeed (reward 1) when the task is done within 50 actions."
    ),
    tools=(
        EnvTool(
            "act",
            "Take one of the actions listed under AVAILABLE ACTIONS.",
            "{action}",
            {"action": text("the action as listed, e.g. go to countertop 1")},
        ),
    ),
    probe_actions=(
        "look",
        "inventory",
        "go to countertop 1",
        "take apple 1 from countertop 1",
        "open fridge 1",
        "fly",
    ),
    app="agentgym.alfworld.app",
    tasks="agentgym.alfworld.data:task_list",
    splits="3,600 games generated from ALFWorld's 120 room layouts, the six task types in turn: test ids 0-299, "
    "dev 300-599, train 600-3599 (or the real ALFWorld games of --data-dir, by index)",
    expert="agentgym.alfworld.expert:AlfWorldExpert",
    # its observations list the admissible actions: 3,072 tokens end a third of its expert's episodes first
    max_turns=20,
    # cuts 5% of its expert's episodes (3072 cut 35%; scripts/budget_cuts.py, 40 train tasks)
    max_trajectory_length=6656,
    reset_timeout_s=180.0,  # a server loads games one at a time (Fast Downward's translator): 1-2 s each
    extra="alfworld",
)
