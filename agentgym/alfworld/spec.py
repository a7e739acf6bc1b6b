"""ALFWorld household tasks (AgentGym's ALFWorld protocol): the spec; no server in this project yet."""

from agentgym.spec import EnvSpec

SPEC = EnvSpec(
    name="alfworld",
    family="B",
    reset_field="game",
    reset_extra={"world_type": "Text"},
    action_pattern=r"[a-z][\w /\-]*",
    instructions=(
        "You are in a house and must complete the household task you are given (for example: put a clean mug "
        "on the shelf). Act with commands such as: go to countertop 1, open drawer 2, take mug 1 from "
        "countertop 1, put mug 1 in/on shelf 1, clean mug 1 with sinkbasin 1, heat egg 1 with microwave 1, "
        "cool apple 1 with fridge 1, use desklamp 1, look, inventory."
    ),
)
