"""Maze walking (LMRL-Gym's double-T maze), served on AgentGym's family-B protocol under /maze: how clients and the
agent see it; the server is `agentgym.lmrlgym.app`, shared with Wordle."""

from agentgym.spec import EnvSpec
from agentgym.tools import DIRECTIONS, EnvTool, choice

SPEC = EnvSpec(
    name="maze",
    family="B",
    prefix="/maze",
    reset_field="game",
    action_pattern=r"(move )?(up|down|left|right)\.?",
    instructions=(
        "You walk through a maze to reach the goal position. Each observation gives the goal position, your "
        "position and the walls next to you; a position is (row, column), counted from 0 at the top left, so "
        "moving up lowers the row and moving left lowers the column.\n"
        "Actions (one per turn): move up, move down, move left, move right: walk one cell that way. A move into "
        "a wall changes nothing.\n"
        "You succeed when you reach the goal within 50 moves; every action, valid or not, uses a move."
    ),
    tools=(
        EnvTool(
            "move",
            "Walk one cell that way; a move into a wall changes nothing.",
            "move {direction}",
            {"direction": choice("which way", *DIRECTIONS)},
        ),
    ),
    probe_actions=(
        "move up",
        "move down",
        "move left",
        "move right",
        "jump",
    ),
    app="agentgym.lmrlgym.app",
    tasks="agentgym.maze.data:task_list",
    splits="26 start positions in one fixed double-T maze, task id = start (id % 26): test ids 0-25 (every start "
    "once), dev 26-51, train 52-259 (repeats)",
    expert="agentgym.maze.expert:MazeExpert",
    max_turns=15,  # its expert's winning episodes on 100 train tasks take at most 13 actions
)
