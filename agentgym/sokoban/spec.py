"""Sokoban, pushing boxes onto targets in small procedurally generated rooms, served on AgentGym's family-B
protocol: how clients and the agent see it; the server is `agentgym.sokoban.app`."""

from agentgym.spec import EnvSpec
from agentgym.tools import DIRECTIONS, EnvTool, choice

SPEC = EnvSpec(
    name="sokoban",
    family="B",
    reset_field="data_idx",
    action_pattern=r"((move|go) )?(up|down|left|right)\.?",
    instructions=(
        "You push boxes onto targets in a small walled room (Sokoban).\n"
        "Each observation shows the room, one row per line, cells separated by spaces: # wall, _ floor, @ you, "
        "$ box, . target, * box on a target, + you on a target. Row 1 is the top row and column 1 the left column.\n"
        "Actions (one per turn): up, down, left, right: walk one cell that way. Walking into a box pushes it one "
        "cell further when that cell is floor or a target; you cannot pull a box or push two at once, and walls "
        "stop you.\n"
        "You succeed when every box is on a target, within 60 moves; every action, valid or not, uses a move."
    ),
    tools=(
        EnvTool(
            "move",
            "Walk one cell that way, pushing a box in the way.",
            "{direction}",
            {"direction": choice("which way", *DIRECTIONS)},
        ),
    ),
    probe_actions=(
        "up",
        "down",
        "left",
        "right",
        "push",
    ),
    app="agentgym.sokoban.app",
    tasks="agentgym.sokoban.data:task_list",
    splits="1,300 generated rooms (6x6 or 7x7, 1 or 2 boxes, by task id): test ids 0-199, dev 200-299, train 300-1299",
    expert="agentgym.sokoban.expert:SokobanExpert",
    max_turns=20,  # its expert's winning episodes on 100 train tasks take at most 19 actions
    # cuts at most 5% of its expert's episodes (3072 cut 10%; scripts/budget_cuts.py, 40 train tasks)
    max_trajectory_length=3584,
)
