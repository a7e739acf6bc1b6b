"""Wordle (AgentGym's LMRL-Gym wordle protocol, under /wordle): the spec; no server in this project yet."""

from agentgym.spec import EnvSpec

SPEC = EnvSpec(
    name="wordle",
    family="B",
    prefix="/wordle",
    reset_field="seed",
    action_pattern=r"([a-z] ){4}[a-z]",
    instructions=(
        "You play Wordle: find a secret five-letter English word in at most six guesses. Write each guess as "
        "its five lower-case letters separated by spaces, e.g. s h i r e. Each guess is answered with one "
        "letter per position: g (right letter, right place), y (in the word, elsewhere), b (not in the word)."
    ),
)
