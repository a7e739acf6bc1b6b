"""BabyAI, grid-world missions (minigrid's 40 BabyAI levels that AgentGym plays) described in words and played with
high-level actions, served on AgentGym's family-B protocol: how clients and the agent see it; the server is
`agentgym.babyai.app`.

Success: minigrid's reward is ``1 - 0.9 * steps / max_steps`` on completing the mission and 0 otherwise, so a
completed mission pays between 0.1 and 1 (the later, the less).  ``success_reward`` is therefore a small positive
threshold, 0.01: any positive reward is a success.
"""

from agentgym.spec import EnvSpec
from agentgym.tools import EnvTool, choice, text

_OBJECT = text("e.g. grey key 1")
_DOOR = text("e.g. red door 1")

SPEC = EnvSpec(
    name="babyai",
    family="B",
    reset_field="data_idx",
    action_pattern=(
        r"(turn left|turn right|move forward|go to \w+ \w+ \d+|pick ?up \w+ \w+ \d+|go through \w+ door \d+"
        r"|toggle and go through \w+ door \d+|toggle|drop|check available actions)\.?"
    ),
    instructions=(
        "You control an agent in a grid world of rooms and must accomplish the mission given after 'Your goal:'.\n"
        "Each observation describes what you see in front of you: each key, ball, box and door, named by colour, "
        "type and a number (for example 'grey key 1') with how many steps in front of you and to your left or right "
        "it is; the walls right next to you; what you carry; and the actions you can take now.\n"
        "Actions (one per turn, one of those listed under 'Available actions'): turn left, turn right, move forward; "
        "go to <colour> <type> <n> (walk up to it and face it); pickup <colour> <type> <n> (you can carry one thing); "
        "go through <colour> door <n> (an open door); toggle and go through <colour> door <n> (open a closed door, "
        "or a locked one while carrying a key of its colour, and go through); toggle (open or close the door in "
        "front of you, or open the box in front of you); drop (put what you carry in front of you); check available "
        "actions. Any other action changes nothing.\n"
        "You succeed when the mission is done before the level's step limit; the sooner, the higher the reward."
    ),
    tools=(
        EnvTool("turn", "Turn left or right.", "turn {direction}", {"direction": choice("which way", "left", "right")}),
        EnvTool("move_forward", "Move one cell forward.", "move forward"),
        EnvTool("go_to", "Walk up to an object and face it.", "go to {object}", {"object": _OBJECT}),
        EnvTool("pickup", "Pick up an object.", "pickup {object}", {"object": _OBJECT}),
        EnvTool("go_through", "Go through an open door.", "go through {door}", {"door": _DOOR}),
        EnvTool(
            "toggle_and_go_through", "Open a door and go through it.", "toggle and go through {door}", {"door": _DOOR}
        ),
        EnvTool("toggle", "Open or close the door, or open the box, in front of you.", "toggle"),
        EnvTool("drop", "Put down what you carry.", "drop"),
        EnvTool("check_available_actions", "List the actions you can take now.", "check available actions"),
    ),
    success_reward=0.01,
    probe_actions=(
        "turn left",
        "turn right",
        "move forward",
        "check available actions",
        "toggle",
        "fly",
    ),
    app="agentgym.babyai.app",
    tasks="agentgym.babyai.data:task_list",
    splits="4,000 tasks: AgentGym's 40 BabyAI levels x seeds 0-99 (task i: level i % 40, seed i // 40); "
    "test ids 0-199 (seeds 0-4), dev 200-399 (seeds 5-9), train 400-3999",
    expert="agentgym.babyai.expert:BabyAIExpert",
    max_turns=15,  # its expert wins 70 of 100 train tasks within 15 actions; longer episodes outgrow the token budget
    # cuts at most 5% of its expert's episodes (3072 cut 25%; scripts/budget_cuts.py, 40 train tasks)
    max_trajectory_length=3584,
)
