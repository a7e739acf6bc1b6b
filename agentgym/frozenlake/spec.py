"""FrozenLake, a grid walk around holes (gymnasium's FrozenLake-v1, not slippery), served on AgentGym's family-B
protocol: how clients and the agent see it; the server is `agentgym.frozenlake.app`."""

from agentgym.spec import EnvSpec
from agentgym.tools import DIRECTIONS, EnvTool, choice

SPEC = EnvSpec(
    name="frozenlake",
    family="B",
    reset_field="data_idx",
    action_pattern=r"((move|go) )?(up|down|left|right)\.?",
    instructions=(
        "You walk across a frozen lake from the start S to the goal G without stepping into a hole H.\n"
        "Each observation shows the map, one row per line, cells separated by spaces: P you, S start, "
        "F frozen ice (safe), H hole, G goal. Row 1 is the top row and column 1 the left column.\n"
        "Actions (one per turn): up, down, left, right: move one cell that way (the ice is not slippery). "
        "Moving off the map changes nothing; stepping into a hole ends the episode.\n"
        "You succeed when you reach G within 30 moves; every action, valid or not, uses a move."
    ),
    tools=(EnvTool("move", "Move one cell that way.", "{direction}", {"direction": choice("which way", *DIRECTIONS)}),),
    probe_actions=(
        "up",
        "down",
        "left",
        "right",
        "swim",
    ),
    app="agentgym.frozenlake.app",
    tasks="agentgym.frozenlake.data:task_list",
    splits="1,300 seeded random maps (4x4, 5x5, 6x6 by task id): test ids 0-199, dev 200-299, train 300-1299",
    expert="agentgym.frozenlake.expert:FrozenLakeExpert",
    max_turns=12,  # its expert's winning episodes on 100 train tasks take at most 10 actions
)
