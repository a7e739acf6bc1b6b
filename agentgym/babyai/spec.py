"""BabyAI grid-world missions (AgentGym's BabyAI protocol): the spec; no server in this project yet."""

from agentgym.spec import EnvSpec

SPEC = EnvSpec(
    name="babyai",
    family="B",
    reset_field="data_idx",
    action_pattern=r"(turn left|turn right|move forward|go to .+|pick ?up .+|go through .+|toggle.*|drop.*|check available actions)",
    instructions=(
        "You control an agent in a small grid world and must accomplish the mission given after 'Your goal:'. "
        "Each observation describes the objects you can see, relative to you, and lists the actions you can take now. "
        "Choose exactly one of the listed actions per turn, for example: turn left, move forward, "
        "go to red ball 1, pickup red ball 1, toggle and go through green door 1."
    ),
)
