"""Guess the number, served on AgentGym's family-B protocol: how clients and the agent see it."""

from agentgym.spec import EnvSpec
from agentgym.tools import EnvTool, integer

SPEC = EnvSpec(
    name="guess",
    family="B",
    reset_field="data_idx",
    action_pattern=r"(guess )?\d{1,3}\.?",
    instructions=(
        "I picked a whole number from 1 to 100; find it.\n"
        "Action (one per turn): guess N, with N from 1 to 100. I answer whether N is too low, too high or right.\n"
        "You succeed when you name the number within 8 guesses; every action, valid or not, uses a guess."
    ),
    tools=(EnvTool("guess", "Guess the number.", "guess {number}", {"number": integer("your guess, 1 to 100")}),),
    max_turns=8,
    probe_actions=("guess 50", "guess 1", "100", "guess", "pass"),
    app="agentgym.guess.app",
    tasks="agentgym.guess.game:task_list",
    splits="300 secret numbers by task id: test ids 0-49, dev 50-99, train 100-299",
    expert="agentgym.guess.expert:GuessExpert",
)
