"""What the agent needs to know about each environment, registered by env name.

An `EnvSpec` holds the wire details of one env (protocol family, path prefix,
the reset field that names the task, where the observation and reward sit in
an answer) and what the model is told (the task description and action
grammar, written for this project), and which reward module scores its rows.
Adding an environment means adding one `EnvSpec` with `register_env`;
`get_env_spec(name)` looks one up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from verl.utils.reward_score import register_reward_score

from ..rewards import episode_score

register_reward_score("agentgym", episode_score.compute_score)


@dataclass(frozen=True)
class EnvSpec:
    """One environment's protocol details and instructions.

    ``family`` "A" names the env ``env_idx`` and ``/create`` answers a bare
    int; "B" names it ``id`` and answers ``{"id": n}``.  ``reset_field`` is the
    body key that carries the task id on ``/reset`` (with ``reset_extra``
    added).  An observation is read from the first answer key of
    ``observation_keys`` present (``reset_observation_keys`` for ``/reset``,
    joined with blank lines when several are present).  Success means the
    episode's reward (the last step's ``reward_key`` value) is at least
    ``success_reward``; ``reward_scale`` maps it to 0..1 for the goal reward.
    ``action_pattern`` is a regex a bare reply (without an action marker) must
    fully match to be taken as an action.  An env with ``accepts_answer``
    takes a final answer; ``answer_template`` turns it into the env's action.
    ``reward_score`` names the reward module (`verl.utils.reward_score`) for rows
    whose ``data_source`` is this env: by default the episode's composed reward.
    """

    name: str
    family: Literal["A", "B"]
    reset_field: str
    instructions: str
    action_pattern: str = r".+"
    prefix: str = ""
    reset_extra: Mapping[str, Any] = field(default_factory=dict)
    observation_keys: tuple[str, ...] = ("observation", "state")
    reset_observation_keys: tuple[str, ...] | None = None
    reward_key: str = "reward"
    success_reward: float = 1.0
    reward_scale: float = 1.0
    accepts_answer: bool = False
    answer_template: str = "{}"
    reward_score: str = "agentgym"

    @property
    def id_field(self) -> str:
        return "env_idx" if self.family == "A" else "id"


ENV_SPECS: dict[str, EnvSpec] = {}


def register_env(spec: EnvSpec, replace: bool = False) -> EnvSpec:
    """Add ``spec`` to the registry (``replace`` to overwrite an existing name)."""
    if spec.family not in ("A", "B"):
        raise ValueError(f"env {spec.name!r}: family must be 'A' or 'B', got {spec.family!r}")
    if spec.name in ENV_SPECS and not replace:
        raise ValueError(f"env {spec.name!r} is already registered")
    register_reward_score(spec.reward_score, data_sources=(spec.name,))
    ENV_SPECS[spec.name] = spec
    return spec


def get_env_spec(name: str) -> EnvSpec:
    try:
        return ENV_SPECS[name]
    except KeyError:
        raise ValueError(f"unknown env {name!r}; registered envs: {sorted(ENV_SPECS)}") from None


register_env(EnvSpec(
    name="webshop",
    family="A",
    reset_field="session_id",
    action_pattern=r"(search|click)\[.+\]",
    instructions=(
        "You are shopping in an online store. Buy the one product that best fits the shopping "
        "instruction shown on the page: its attributes, its options (such as size or colour) and its price limit.\n"
        "Each observation is the text of the current web page; [SEP] separates the elements of the page.\n"
        "Actions (one per turn):\n"
        "- search[keywords]: type keywords into the search box (only on a page that has one), "
        "e.g. search[waterproof hiking boots for men]\n"
        "- click[element]: click something shown on the page: a product id such as click[B0123ABCDE], "
        "an option value such as click[large], or a button such as click[Next >], click[< Prev], "
        "click[Back to Search], click[Description] or click[Buy Now].\n"
        "Select the wanted options on the product page before you click Buy Now. Buy Now ends the episode; "
        "the reward says how well the bought product matches the instruction."
    ),
))

register_env(EnvSpec(
    name="sqlgym",
    family="A",
    reset_field="item_id",
    accepts_answer=True,
    action_pattern=r"(?s)\s*(select|with)\b.+",
    instructions=(
        "Answer the question about a database with one SQL query. The observation gives the question "
        "and the tables. Your action is a single SQL statement (SQLite dialect), written on one line. "
        "The reward is 1 when the result of your query equals the expected answer."
    ),
))

register_env(EnvSpec(
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
))

register_env(EnvSpec(
    name="textcraft",
    family="B",
    reset_field="data_idx",
    action_pattern=r"(get .+|craft .+|inventory)",
    instructions=(
        "You craft items in a Minecraft-like world. The first observation lists crafting recipes and the goal item.\n"
        "Actions: get <count> <item> (take a base item), craft <target> using <ingredients> (apply a recipe "
        "exactly as listed), inventory (show what you hold). You succeed when you hold the goal item."
    ),
))

register_env(EnvSpec(
    name="sciworld",
    family="B",
    reset_field="data_idx",
    reset_observation_keys=("task_description", "observation"),
    reward_key="score",
    success_reward=100.0,
    reward_scale=100.0,
    action_pattern=r"[a-z][\w \-]*",
    instructions=(
        "You perform a science task in a simulated text world with rooms and objects. Read the task, explore "
        "and use objects with short commands such as: look around, go to kitchen, open door to hallway, "
        "pick up thermometer, use thermometer on water, focus on substance, wait. "
        "Your score goes from 0 to 100; 100 means the task is done."
    ),
))

register_env(EnvSpec(
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
))

register_env(EnvSpec(
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
))

register_env(EnvSpec(
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
))
