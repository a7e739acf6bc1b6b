"""Maze walking (AgentGym's LMRL-Gym maze protocol, under /maze): the spec; no server in this project yet."""

from agentgym.spec import EnvSpec

SPEC = EnvSpec(
    name="maze",
    family="B",
    prefix="/maze",
    reset_field="game",
    action_pattern=r"move (up|down|left|right)",
    instructions=(
        "You walk through a maze to reach the goal position. Each observation gives the goal position, "
        "your position and the walls next to you. Actions: move up, move down, move left, move right. "
        "Walls block a move."
    ),
)
