"""Wordle (LMRL-Gym's word game), served on AgentGym's family-B protocol under /wordle: how clients and the agent
see it; the server is `agentgym.lmrlgym.app`, shared with Maze."""

from agentgym.spec import EnvSpec
from agentgym.tools import EnvTool, text

SPEC = EnvSpec(
    name="wordle",
    family="B",
    prefix="/wordle",
    reset_field="seed",
    action_pattern=r"([a-z] ){4}[a-z]\.?",
    instructions=(
        "You play Wordle: find a secret five-letter English word in at most six guesses. Write each guess as "
        "its five lower-case letters separated by spaces, e.g. s h i r e. Each guess is answered with one "
        "letter per position: g (right letter, right place), y (in the word, elsewhere), b (not in the word; a "
        "letter guessed more often than the word has it is b for the extra copies). A guess that is not an "
        'English word of the game\'s list is answered "invalid word" and does not use a guess.\n'
        "You succeed when you guess the word; each observation lists your guesses so far with their colours."
    ),
    tools=(
        EnvTool(
            "guess",
            "Guess a five-letter word.",
            "{letters}",
            {"letters": text("the word's five lower-case letters separated by spaces, e.g. s h i r e")},
        ),
    ),
    probe_actions=(
        "r a i s e",
        "s h i r e",
        "c l o u d",
        "x x x x x",
    ),
    app="agentgym.lmrlgym.app",
    tasks="agentgym.wordle.data:task_list",
    splits="2,135 secret words (common English words from SCOWL), task id = seed: test ids 0-199, dev 200-299, "
    "train 300-2134",
    expert="agentgym.wordle.expert:WordleExpert",
    max_turns=8,  # six guesses, and a word outside the list costs none
)
