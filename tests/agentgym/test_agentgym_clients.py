"""Contract tests: AgentGym's own ``agentenv`` clients against our servers, one test per env with an upstream client.

AgentGym users drive env servers with the clients in ``agentenv/agentenv/envs/{webshop,babyai,textcraft,sciworld,
alfworld,lmrlgym}.py`` of the AgentGym repository.  Each test starts a real server process (with the console command
an AgentGym user runs: ``textcraft``, ``babyai``, ``sciworld``, ``alfworld``, ``lmrlgym``; WebShop through the
session's shared server) and replays, in the client's order, exactly the HTTP requests that client sends:

* its constructor's ``POST {base}/create`` (no body, except TextCraft's ``{"minecraft_dir", "commands", "goal"}``),
  and Wordle's ``GET {base}/filtered_vocab?id=<id>`` right after it;
* ``reset``: ``POST {base}/reset`` with the client's task key (``session_id``, ``data_idx``, ``game`` +
  ``world_type``, ``game``, ``seed``) and the env's id (``env_idx`` or ``id``) added last;
* ``observe``: WebShop's ``GET {base}/observation?env_idx=<id>``; the family-B clients answer from what they kept;
* ``step``: ``POST {base}/step`` ``{"action", <id>}``;
* ``close`` (TextCraft and ALFWorld clients): ``POST {base}/close`` ``{<id>}``.

Every request must answer HTTP 200 (the clients assert it) with JSON; of each answer the test checks exactly the
fields the client reads, with their types, and literal values where they are deterministic.  Removing a route or a
field a client uses fails the test.  The upstream protocol and our deliberate differences: docs/agentgym-compat.md.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Iterator

import pytest
import requests
from task0_views import AT_SIDETABLE2, AT_TVSTAND, HOLDING, ROOM1, START1, TASK0_OBS, TASK0_TURNED, TASK0_WON

from agentgym.spawn import ServerProcess
from agentgym.wordle.data import answers, feedback

TIMEOUT_S = 120.0  # a SciWorld create starts a JVM; an ALFWorld reset loads a game into the engine


# ---------------------------------------------------------------------- the client's side of the wire
class UpstreamWire:
    """The HTTP requests an AgentGym client makes, made the way it makes them.

    ``base`` is the client's ``env_server_base`` (for Maze and Wordle it ends in ``/maze`` or ``/wordle``);
    ``id_field`` is ``env_idx`` (WebShop) or ``id``.  Every answer must be HTTP 200 and JSON.
    """

    def __init__(self, base: str, id_field: str = "id") -> None:
        self.base, self.id_field = base, id_field
        self.env_id: Any = None

    @staticmethod
    def _json(response: requests.Response) -> Any:
        assert response.status_code == 200, (response.request.method, response.url, response.status_code, response.text)
        assert response.headers["content-type"] == "application/json", response.headers
        return response.json()

    def create(self, body: dict[str, Any] | None = None) -> Any:
        """The constructor's ``POST /create``: no body at all (no content type), or TextCraft's JSON body."""
        if body is None:
            return self._json(requests.post(f"{self.base}/create", timeout=TIMEOUT_S))
        return self._json(requests.post(f"{self.base}/create", json=body, timeout=TIMEOUT_S))

    def post(self, path: str, data: dict[str, Any]) -> Any:
        """``POST /<path>`` with ``data`` and the env's id added under ``id_field`` (last, as the clients do)."""
        data[self.id_field] = self.env_id
        return self._json(requests.post(f"{self.base}/{path}", json=data, timeout=TIMEOUT_S))

    def get(self, path: str) -> Any:
        """``GET /<path>?<id_field>=<id>``, the id written into the URL as the clients do."""
        return self._json(requests.get(f"{self.base}/{path}?{self.id_field}={self.env_id}", timeout=TIMEOUT_S))


NUMBER = "number"  # int or float, not bool: the clients add rewards up and compare scores


def reads(answer: Any, **fields: Any) -> dict[str, Any]:
    """Assert ``answer`` is an object holding each field the client reads, of its type; the answer."""
    assert isinstance(answer, dict), answer
    for name, kind in fields.items():
        assert name in answer, f"field {name!r} the client reads is missing from {answer}"
        value = answer[name]
        if kind == NUMBER:
            assert isinstance(value, (int, float)) and not isinstance(value, bool), (name, value)
        elif kind is bool:
            assert type(value) is bool, (name, value)
        elif kind == list[str]:
            assert isinstance(value, list) and all(isinstance(x, str) for x in value), (name, value)
        else:
            assert isinstance(value, kind), (name, value)
    return answer


def step_answer(answer: Any, observation: str, reward: float, done: bool, **more: Any) -> None:
    """A family-B ``/step`` answer: the fields ``observation``, ``reward``, ``done`` (and ``more``) read with types
    and values."""
    kinds = {"observation": str, "reward": NUMBER, "done": bool}
    kinds.update({name: (list[str] if isinstance(value, list) else NUMBER) for name, value in more.items()})
    reads(answer, **kinds)
    got = {name: answer[name] for name in kinds}
    assert got == {"observation": observation, "reward": reward, "done": done, **more}


@contextmanager
def upstream_server(command: str, *args: str) -> Iterator[str]:
    """A healthy server started with AgentGym's console command ``command`` (``textcraft``, ``lmrlgym``, ...)."""
    runner = [
        sys.executable,
        "-c",
        f"import sys; from agentgym.launcher import {command}_main; {command}_main(sys.argv[1:])",
        "--log-level",
        "warning",
    ]
    server = ServerProcess(command, command=runner, args=args, timeout_s=TIMEOUT_S).start()
    try:
        yield server.url
    finally:
        server.stop()


# ---------------------------------------------------------------------- WebShop (family A)
WEBSHOP_INSTR = (
    "help me find a phone case that's shockproof with raised edges with color: wine red | sky blue, and "
    "size: pixel 8, and price lower than 40.00 dollars"
)
WEBSHOP_START = f"WebShop [SEP] Instruction: [SEP] {WEBSHOP_INSTR} [SEP] Search"
WEBSHOP_HEAD = f"Instruction: [SEP] {WEBSHOP_INSTR} [SEP] Back to Search"
WEBSHOP_END = "Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] 1.0"


@pytest.mark.slow
def test_webshop_client(server: str) -> None:
    """``WebshopEnvClient``: ``env_idx`` ids, ``/reset`` answering a list whose first item the client overwrites with
    ``GET /observation``, and ``/step`` answers read as ``state``, ``reward``, ``done``."""
    wire = UpstreamWire(server, "env_idx")
    created = wire.create()
    assert isinstance(created, int) and not isinstance(created, bool), created  # the client keeps the bare int
    wire.env_id = created

    reset = wire.post("reset", {"session_id": 209})
    assert isinstance(reset, list) and len(reset) >= 1, reset  # the client sets reset[0] = observe()
    assert wire.get("observation") == WEBSHOP_START  # observe(): a bare JSON string

    def step(action: str) -> dict[str, Any]:
        return reads(wire.post("step", {"action": action}), state=str, reward=NUMBER, done=bool)

    results = step("search[Zelorra phone case]")
    assert results["state"].startswith(
        f"{WEBSHOP_HEAD} [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] B0X7ANODZG [SEP] "
    )
    assert (results["reward"], results["done"]) == (0.0, False)
    for action in ("click[B0X7ANODZG]", "click[wine red | sky blue]", "click[pixel 8]"):
        item = step(action)
        assert item["state"].startswith(f"{WEBSHOP_HEAD} [SEP] < Prev [SEP] color [SEP] clear"), action
        assert item["state"].endswith("[SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now"), action
        assert (item["reward"], item["done"]) == (0.0, False), action
    # an action the client could not parse: it answers "Invalid Action." plus observe() without stepping
    assert wire.get("observation") == item["state"]
    bought = step("click[Buy Now]")
    assert (bought["state"], bought["reward"], bought["done"]) == (WEBSHOP_END, 1.0, True)
    assert wire.get("observation") == WEBSHOP_END


# ---------------------------------------------------------------------- BabyAI


def test_babyai_client() -> None:
    """``BabyAIEnvClient``: ``{"id"}`` from create; reset and step read ``observation``, ``reward``, ``score``,
    ``done`` (the client reports ``score`` as the step's reward)."""
    with upstream_server("babyai") as url:
        wire = UpstreamWire(url)
        wire.env_id = reads(wire.create(), id=int)["id"]
        fresh = wire.post("reset", {"data_idx": 0})
        step_answer(fresh, TASK0_OBS, 0.0, False, score=0.0)
        step_answer(wire.post("step", {"action": "turn left"}), TASK0_TURNED, 0.0, False, score=0.0)
        step_answer(wire.post("reset", {"data_idx": 0}), TASK0_OBS, 0.0, False, score=0.0)
        # success: minigrid's 1 - 0.9 * 8 / 64 for the 8 low-level moves of the high-level action
        step_answer(wire.post("step", {"action": "go to red ball 1"}), TASK0_WON, 0.8875, True, score=0.8875)


# ---------------------------------------------------------------------- TextCraft
def test_textcraft_client() -> None:
    """``TextCraftEnvClient``: create takes ``{"minecraft_dir", "commands", "goal"}`` and answers ``id`` and the first
    ``observation``; reset reads ``observation``; step reads ``observation``, ``reward``, ``done``; close."""
    with upstream_server("textcraft") as url:
        wire = UpstreamWire(url)
        created = reads(
            wire.create({"minecraft_dir": "agentenv_textcraft/", "commands": None, "goal": None}),
            id=int,
            observation=str,
        )
        wire.env_id = created["id"]
        assert (created["id"], created["observation"]) == (
            0,
            "Crafting commands:\ncraft 4 acacia planks using 1 acacia logs\n\nGoal: craft acacia planks.",
        )
        reset = reads(wire.post("reset", {"data_idx": 1}), observation=str)
        assert reset["observation"] == (
            "Crafting commands:\ncraft 3 acacia wood using 4 acacia log\n\nGoal: craft acacia wood."
        )
        # the client keeps only letters, digits, commas and spaces of an action
        step_answer(wire.post("step", {"action": "get 4 acacia log"}), "Got 4 acacia log", 0.0, False)
        step_answer(
            wire.post("step", {"action": "craft 3 acacia wood using 4 acacia log"}), "Crafted 3 acacia wood", 1.0, True
        )
        assert wire.post("close", {}) is True  # the client returns the answer as it is


# ---------------------------------------------------------------------- SciWorld
SCIWORLD_TASK = (
    "Your task is to find the animal with the longest life span.  The animals are in the 'outside' "
    "location.  Focus on the animal with the longest life span."
)
SCIWORLD_GREENHOUSE = (
    "This room is called the greenhouse. In it, you see: \n\tthe agent\n\ta substance called air\n"
    "\ta bee hive. The bee hive door is closed. \n\ta jug (containing nothing)\n\ta sink, which is "
    "turned off. In the sink is: nothing.\nYou also see:\n\tA door to the hallway (that is closed)\n"
    "\tA door to the outside (that is closed)"
)


@pytest.mark.slow
def test_sciworld_client() -> None:
    """``SciworldEnvClient``: ``{"id"}`` from create (a JVM starts); reset reads ``task_description`` and
    ``observation`` (the client shows them joined by a newline); step reads ``observation``, ``reward``, ``score``,
    ``done`` (the client reports ``score``, 0..100, as the step's reward)."""
    with upstream_server("sciworld", "--max-envs", "2") as url:
        wire = UpstreamWire(url)
        wire.env_id = reads(wire.create(), id=int)["id"]
        reset = reads(wire.post("reset", {"data_idx": 4333}), task_description=str, observation=str)  # task 7-1
        assert (reset["task_description"], reset["observation"]) == (SCIWORLD_TASK, SCIWORLD_GREENHOUSE)
        for action, observation, reward, score, done in [
            ("open door to outside", "The door is now open.", 0.0, 0.0, False),
            ("go to outside", "You move to the outside.", 50.0, 50.0, False),
            ("focus on crocodile", "You focus on the crocodile egg.", 50.0, 100.0, True),
        ]:
            step_answer(wire.post("step", {"action": action}), observation, reward, done, score=score)


# ---------------------------------------------------------------------- ALFWorld
def _alfworld_view(text: str, actions: list[str]) -> str:
    return f"{text}\nAVAILABLE ACTIONS: {', '.join(actions)}"


@pytest.mark.slow
def test_alfworld_client() -> None:
    """``AlfWorldEnvClient``: ``{"id"}`` from create; reset sends ``game`` and ``world_type`` and reads
    ``observation`` and ``available_actions``; step reads those and ``reward``, ``done``; close."""
    with upstream_server("alfworld") as url:
        wire = UpstreamWire(url)
        wire.env_id = reads(wire.create(), id=int)["id"]
        reset = reads(
            wire.post("reset", {"game": 1, "world_type": "Text"}), observation=str, available_actions=list[str]
        )
        assert (reset["observation"], reset["available_actions"]) == (
            _alfworld_view(ROOM1, START1),
            START1,
        )
        for action, text, actions, reward, done in [
            (
                "go to sidetable 2",
                "You arrive at sidetable 2. On the sidetable 2, you see a box 1, a cellphone 2, and a laptop 2.",
                AT_SIDETABLE2,
                0.0,
                False,
            ),
            (
                "take laptop 2 from sidetable 2",
                "You pick up the laptop 2 from the sidetable 2.",
                HOLDING,
                0.0,
                False,
            ),
            (
                "go to tvstand 1",
                "You arrive at tvstand 1. On the tvstand 1, you see a floorlamp 1.",
                AT_TVSTAND,
                0.0,
                False,
            ),
            ("use floorlamp 1", "You turn on the floorlamp 1.", AT_TVSTAND, 1.0, True),
        ]:
            step_answer(
                wire.post("step", {"action": action}),
                _alfworld_view(text, actions),
                reward,
                done,
                available_actions=actions,
            )
        assert wire.post("close", {}) is True


# ---------------------------------------------------------------------- LMRL-Gym: Maze and Wordle
@pytest.fixture(scope="module")
def lmrlgym() -> Iterator[str]:
    with upstream_server("lmrlgym") as url:
        yield url


MAZE_WHERE = "The goal is at position 8, 6. Your current position is at position"


def test_maze_client(lmrlgym: str) -> None:
    """``MazeEnvClient`` (base ``<server>/maze``): ``{"id"}`` from create; reset sends ``game`` and reads
    ``observation`` (the client puts its own instructions before it); step reads ``observation``, ``reward``,
    ``done`` (the client adds the rewards up)."""
    from agentgym.maze.plan import oracle

    wire = UpstreamWire(f"{lmrlgym}/maze")
    wire.env_id = reads(wire.create(), id=int)["id"]
    reset = reads(wire.post("reset", {"game": 0}), observation=str)
    assert reset["observation"] == (
        f"{MAZE_WHERE} 1, 1. There are walls above you, below you, to your left. Moves left: 50."
    )
    step_answer(
        wire.post("step", {"action": "move up"}),
        f"You cannot move up: there is a wall above you. Nothing changed. {MAZE_WHERE} 1, 1. There are walls "
        "above you, below you, to your left. Moves left: 49.",
        0.0,
        False,
    )
    reads(wire.post("reset", {"game": 0}), observation=str)
    moves = oracle(0)
    assert len(moves) == 12
    for move in moves[:-1]:
        answer = reads(wire.post("step", {"action": move}), observation=str, reward=NUMBER, done=bool)
        assert (answer["reward"], answer["done"]) == (0.0, False), move
    step_answer(
        wire.post("step", {"action": moves[-1]}),
        f"You moved down and reached the goal. {MAZE_WHERE} 8, 6. There are walls below you, to your left, to "
        "your right. Moves left: 38. The episode is over.",
        1.0,
        True,
    )


def test_wordle_client(lmrlgym: str) -> None:
    """``WordleEnvClient`` (base ``<server>/wordle``): ``{"id"}`` from create, then ``GET /filtered_vocab?id=`` whose
    list of words the client writes into its first prompt (joined by newlines); reset sends ``seed`` (its answer is
    not read); step reads ``observation``, ``reward``, ``done``."""
    wire = UpstreamWire(f"{lmrlgym}/wordle")
    wire.env_id = reads(wire.create(), id=int)["id"]
    vocab = wire.get("filtered_vocab")  # in the constructor, before any reset
    assert isinstance(vocab, list) and all(isinstance(w, str) for w in vocab)
    assert vocab == list(answers()) and len(vocab) == 2135 and vocab[:3] == ["abaci", "aback", "abate"]
    assert "\n".join(vocab).count("\n") == 2134  # what the client puts in its prompt: one word a line

    assert isinstance(wire.post("reset", {"seed": 0}), dict)  # task 0's secret is "angst"
    assert wire.get("filtered_vocab") == vocab  # a reset starts from every word again
    step_answer(
        wire.post("step", {"action": "r a i s e"}),
        "\n".join(["b y b g b", *_wordle_lines("Guess 1: r a i s e -> b y b g b", "Guesses left: 5.")]),
        0.0,
        False,
    )
    # as upstream's filtered vocabulary: the words still possible after the colours so far
    left = wire.get("filtered_vocab")
    assert len(left) == 19 and "angst" in left and left == sorted(left)
    assert left == [w for w in answers() if feedback("raise", w) == "b y b g b"]
    step_answer(
        wire.post("step", {"action": "a n g s t"}),
        "\n".join(
            [
                "g g g g g",
                *_wordle_lines(
                    "Guess 1: r a i s e -> b y b g b",
                    "Guess 2: a n g s t -> g g g g g",
                    "You found the word in 2 guesses. The episode is over.",
                ),
            ]
        ),
        1.0,
        True,
    )
    assert wire.get("filtered_vocab") == ["angst"]


def _wordle_lines(*lines: str) -> list[str]:
    from agentgym.wordle.env import INSTRUCTION

    return [INSTRUCTION, *lines]


def test_wordle_filtered_vocab_refuses_unknown_and_malformed_ids(lmrlgym: str) -> None:
    """Our own behaviour on the route added for the client: 4xx with a message (upstream: HTTP 200 ``{"error"}``)."""

    def get(query: str) -> tuple[int, Any]:
        r = requests.get(f"{lmrlgym}/wordle/filtered_vocab{query}", timeout=10)
        return r.status_code, r.json()

    env_id = requests.post(f"{lmrlgym}/wordle/create", timeout=10).json()["id"]
    assert get(f"?id={env_id}")[0] == 200
    assert requests.post(f"{lmrlgym}/wordle/close", json={"id": env_id}, timeout=10).json() is True
    assert get(f"?id={env_id}") == (404, {"error": f"unknown id {env_id}: create one with POST /create"})
    assert get("") == (422, {"error": "invalid request: query.id: Field required"})
    assert get("?id=x")[0] == 422
    assert requests.get(f"{lmrlgym}/maze/filtered_vocab?id=0", timeout=10).status_code == 404  # Wordle's only


def test_every_env_with_an_upstream_client_has_a_contract_test() -> None:
    """The envs AgentGym ships a client for, each with its test above (a new upstream client needs one too)."""
    upstream_clients = {"webshop", "babyai", "textcraft", "sciworld", "alfworld", "maze", "wordle"}
    tested = {
        name.removeprefix("test_").removesuffix("_client")
        for name, obj in globals().items()
        if name.startswith("test_") and name.endswith("_client") and callable(obj)
    }
    assert tested == upstream_clients
    from agentgym.registry import ENV_SPECS

    assert upstream_clients <= set(ENV_SPECS)
    assert all(ENV_SPECS[name].family == ("A" if name == "webshop" else "B") for name in upstream_clients)
