"""The ``tool_call`` action format: every env's tools, reply <-> action both ways, parse errors with their feedback,
the prompt (listed tools, or the chat template's own), and an episode through the agent against the toy server."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from agent_helpers import PLAIN, ScriptedGenerator, task_batch, text_policy

import agentgym
from agentgym.tools import EnvTool, call_for
from openmanus_rl.agent import OpenManusAgent, ParsedAction, get_action_template
from openmanus_rl.agent.chat import ChatFormat
from openmanus_rl.envs import EnvSpec, get_env_spec, register_env
from openmanus_rl.experts import format_reply

TOOL_CALL = get_action_template("tool_call")
WEBSHOP, TEXTCRAFT, MAZE = get_env_spec("webshop"), get_env_spec("textcraft"), get_env_spec("maze")
BLOCK = '<tool_call>{"name": "<tool name>", "arguments": {<the arguments as a JSON object>}}</tool_call>'

HOW_MUCH = {"type": "integer", "description": "how much"}


def feedback(problem: str) -> str:
    return (
        f"Invalid action: {problem}, so nothing happened. Reply with your reasoning, then exactly one tool call: "
        f"{BLOCK}"
    )


# ---------------------------------------------------------------------- replies and actions, both ways
ROUND_TRIPS = [
    ("webshop", "search[red shoes]", '{"name": "search", "arguments": {"query": "red shoes"}}'),
    ("webshop", "click[navy | white]", '{"name": "click", "arguments": {"target": "navy | white"}}'),
    ("webshop", "click[< Prev]", '{"name": "click", "arguments": {"target": "< Prev"}}'),
    ("textcraft", "get 2 oak logs", '{"name": "get", "arguments": {"count": 2, "item": "oak logs"}}'),
    (
        "textcraft",
        "craft 4 stick using 2 oak planks",
        '{"name": "craft", "arguments": {"count": 4, "item": "stick", "ingredients": "2 oak planks"}}',
    ),
    (
        "textcraft",
        "craft 1 crafting table using 4 oak planks, 1 stick",
        '{"name": "craft", "arguments": {"count": 1, "item": "crafting table", '
        '"ingredients": "4 oak planks, 1 stick"}}',
    ),
    ("textcraft", "inventory", '{"name": "inventory", "arguments": {}}'),
    ("babyai", "turn left", '{"name": "turn", "arguments": {"direction": "left"}}'),
    ("babyai", "turn right", '{"name": "turn", "arguments": {"direction": "right"}}'),
    ("babyai", "move forward", '{"name": "move_forward", "arguments": {}}'),
    ("babyai", "go to grey key 1", '{"name": "go_to", "arguments": {"object": "grey key 1"}}'),
    ("babyai", "pickup red ball 2", '{"name": "pickup", "arguments": {"object": "red ball 2"}}'),
    ("babyai", "go through blue door 1", '{"name": "go_through", "arguments": {"door": "blue door 1"}}'),
    (
        "babyai",
        "toggle and go through red door 1",
        '{"name": "toggle_and_go_through", "arguments": {"door": "red door 1"}}',
    ),
    ("babyai", "toggle", '{"name": "toggle", "arguments": {}}'),
    ("babyai", "drop", '{"name": "drop", "arguments": {}}'),
    ("babyai", "check available actions", '{"name": "check_available_actions", "arguments": {}}'),
    ("sciworld", "use thermometer on water", '{"name": "act", "arguments": {"action": "use thermometer on water"}}'),
    (
        "alfworld",
        "take mug 1 from countertop 1",
        '{"name": "act", "arguments": {"action": "take mug 1 from countertop 1"}}',
    ),
    ("maze", "move left", '{"name": "move", "arguments": {"direction": "left"}}'),
    ("frozenlake", "down", '{"name": "move", "arguments": {"direction": "down"}}'),
    ("sokoban", "right", '{"name": "move", "arguments": {"direction": "right"}}'),
    ("wordle", "s h i r e", '{"name": "guess", "arguments": {"letters": "s h i r e"}}'),
    ("sqlgym", "SELECT name FROM t", '{"name": "query", "arguments": {"sql": "SELECT name FROM t"}}'),
]


def test_every_env_package_declares_tools_and_is_round_tripped():
    packages = sorted(path.parent.name for path in Path(agentgym.__file__).parent.glob("*/spec.toml"))
    assert packages == sorted({env for env, _, _ in ROUND_TRIPS})
    assert all(get_env_spec(name).tools for name in packages)


@pytest.mark.parametrize("env, action, call", ROUND_TRIPS, ids=[a for _, a, _ in ROUND_TRIPS])
def test_reply_and_action_round_trip(env, action, call):
    spec = get_env_spec(env)
    reply = f"I decide.\n<tool_call>{call}</tool_call>"
    assert TOOL_CALL.format_reply("I decide.", action, spec) == reply
    assert format_reply("tool_call", action, "I decide.", spec) == reply
    assert TOOL_CALL.parse(reply, spec) == ParsedAction(action, "action", "I decide.")


def test_parse_takes_whitespace_and_text_around_the_block():
    reply = 'Buy it.\n<tool_call>\n{"name": "click", "arguments": {"target": "Buy Now"}}\n</tool_call>\nDone.'
    assert TOOL_CALL.parse(reply, WEBSHOP) == ParsedAction("click[Buy Now]", "action", "Buy it.\n\nDone.")
    no_arguments = '<tool_call>{"name": "inventory"}</tool_call>'
    assert TOOL_CALL.parse(no_arguments, TEXTCRAFT) == ParsedAction("inventory", "action")


def test_format_reply_needs_a_tool_that_writes_the_action():
    with pytest.raises(ValueError, match="^no tool of env 'maze' writes the action 'jump'$"):
        TOOL_CALL.format_reply("Hop.", "jump", MAZE)
    with pytest.raises(ValueError, match="^the tool_call format needs the env's spec to write a reply$"):
        TOOL_CALL.format_reply("Hop.", "move up")
    assert call_for(MAZE.tools, "move north") is None


def test_a_tool_uses_each_argument_once():
    with pytest.raises(
        ValueError,
        match=r"^tool 'add': the action 'add \{n\} \{m\}' must use each argument \['n'\] "
        r"exactly once$",
    ):
        EnvTool("add", "Add.", "add {n} {m}", {"n": HOW_MUCH})


# ---------------------------------------------------------------------- parse errors
@pytest.mark.parametrize(
    "text, spec, problem",
    [
        ("I buy it.", WEBSHOP, "your reply has no <tool_call>...</tool_call> block"),
        (
            '<tool_call>{"name": "click", "arguments": {"target": "Buy Now"}}',
            WEBSHOP,
            "your reply has no <tool_call>...</tool_call> block",
        ),  # cut by the length limit
        (
            '<tool_call>{"name": "click", "arguments": {"target": "a"}}</tool_call>\n'
            '<tool_call>{"name": "click", "arguments": {"target": "b"}}</tool_call>',
            WEBSHOP,
            "your reply has 2 <tool_call> blocks",
        ),
        (
            '<tool_call>{"name": "click", "arguments": {"target": "Buy Now"}</tool_call>',
            WEBSHOP,
            "the <tool_call> block is not valid JSON (Expecting ',' delimiter at character 52)",
        ),
        (
            "<tool_call>click[Buy Now]</tool_call>",
            WEBSHOP,
            "the <tool_call> block is not valid JSON (Expecting value at character 0)",
        ),
        (
            '<tool_call>["click", "Buy Now"]</tool_call>',
            WEBSHOP,
            'the <tool_call> block must be a JSON object with a string "name"',
        ),
        (
            '<tool_call>{"name": "click", "arguments": "Buy Now"}</tool_call>',
            WEBSHOP,
            'the "arguments" of the <tool_call> block must be a JSON object',
        ),
        (
            '<tool_call>{"name": "buy", "arguments": {}}</tool_call>',
            WEBSHOP,
            "there is no tool 'buy' (the tools: search, click)",
        ),
        (
            '<tool_call>{"name": "click", "arguments": {}}</tool_call>',
            WEBSHOP,
            "tool 'click' needs the argument 'target'",
        ),
        (
            '<tool_call>{"name": "click", "arguments": {"target": "x", "times": 2}}</tool_call>',
            WEBSHOP,
            "tool 'click' takes no argument 'times' (its arguments: target)",
        ),
        (
            '<tool_call>{"name": "inventory", "arguments": {"all": true}}</tool_call>',
            TEXTCRAFT,
            "tool 'inventory' takes no argument 'all' (its arguments: none)",
        ),
        (
            '<tool_call>{"name": "click", "arguments": {"target": 3}}</tool_call>',
            WEBSHOP,
            "argument 'target' of tool 'click' must be a string, got 3",
        ),
        (
            '<tool_call>{"name": "get", "arguments": {"count": "2", "item": "oak logs"}}</tool_call>',
            TEXTCRAFT,
            "argument 'count' of tool 'get' must be an integer, got \"2\"",
        ),
        (
            '<tool_call>{"name": "get", "arguments": {"count": true, "item": "oak logs"}}</tool_call>',
            TEXTCRAFT,
            "argument 'count' of tool 'get' must be an integer, got true",
        ),
        (
            '<tool_call>{"name": "move", "arguments": {"direction": "north"}}</tool_call>',
            MAZE,
            'argument \'direction\' of tool \'move\' must be one of "up", "down", "left", "right", got "north"',
        ),
    ],
)
def test_parse_errors_are_invalid_actions_that_name_the_problem(text, spec, problem):
    assert TOOL_CALL.parse(text, spec) == ParsedAction(None, "invalid", feedback=feedback(problem))


def test_invalid_feedback_and_format_pattern():
    assert TOOL_CALL.invalid_feedback(WEBSHOP) == (
        "Invalid action: your reply has no <tool_call>...</tool_call> block, so nothing happened. Reply with your "
        'reasoning, then exactly one tool call: <tool_call>{"name": "<tool name>", "arguments": '
        "{<the arguments as a JSON object>}}</tool_call>"
    )
    pattern = re.compile(TOOL_CALL.format_pattern, re.DOTALL)
    assert pattern.search('Go.\n<tool_call>{"name": "drop", "arguments": {}}</tool_call>')
    assert not pattern.search("Action: drop") and not pattern.search('<tool_call>{"name": "drop"')


# ---------------------------------------------------------------------- the prompt
WEBSHOP_INSTRUCTIONS = (
    "You act by calling one of these tools:\n"
    "- search(query: string): Type keywords into the search box (only on a page that has one). "
    "query: the keywords, e.g. waterproof hiking boots for men.\n"
    "- click(target: string): Click something shown on the page: a product id, an option value or a button. "
    "target: exactly as the page shows it, e.g. B0123ABCDE, large, Next >, Back to Search, Description or Buy Now.\n"
    "Answer every turn with your reasoning about what to do next, then exactly one tool call on its own line:\n"
    f"{BLOCK}\nThe call's result is the next observation."
)
NATIVE_TEXT = (
    "Answer every turn with your reasoning about what to do next, then exactly one call of one of your "
    "tools. The call's result is the next observation."
)


def test_instructions_list_the_tools_and_agree_with_the_parser():
    assert TOOL_CALL.prompt(WEBSHOP, native_tools=False) == (WEBSHOP_INSTRUCTIONS, None)
    assert TOOL_CALL.format_instructions(WEBSHOP) == WEBSHOP_INSTRUCTIONS
    assert TOOL_CALL.format_instructions(MAZE).splitlines()[1] == (
        '- move(direction: "up" | "down" | "left" | "right"): Walk one cell that way; a move into a wall changes '
        "nothing."
    )
    reply = "Find it.\n" + BLOCK.replace("<tool name>", "search").replace(
        "{<the arguments as a JSON object>}", '{"query": "blue mug"}'
    )
    assert TOOL_CALL.parse(reply, WEBSHOP) == ParsedAction("search[blue mug]", "action", "Find it.")


def test_native_prompt_hands_the_schemas_to_the_chat_template():
    text, tools = TOOL_CALL.prompt(MAZE, native_tools=True)
    assert text == NATIVE_TEXT
    assert tools == [
        {
            "type": "function",
            "function": {
                "name": "move",
                "description": "Walk one cell that way; a move into a wall changes nothing.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "direction": {
                            "type": "string",
                            "enum": ["up", "down", "left", "right"],
                            "description": "which way",
                        }
                    },
                    "required": ["direction"],
                    "additionalProperties": False,
                },
            },
        }
    ]


def test_an_env_without_tools_cannot_use_the_format():
    bare = EnvSpec(name="no-tools", family="B", reset_field="data_idx", instructions="Do it.")
    with pytest.raises(
        ValueError,
        match=r"^env 'no-tools' declares no tools \(EnvSpec.tools\), so it cannot use "
        "the tool_call action format$",
    ):
        TOOL_CALL.prompt(bare, native_tools=False)


TOOLS_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nTools: {{ tools | map(attribute='function') | map(attribute='name') "
    "| join(', ') }}<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture
def tools_tokenizer(tokenizer):
    """The SmolLM2 tokenizer with a chat template that renders ``tools=``."""
    native = copy.deepcopy(tokenizer)
    native.chat_template = TOOLS_TEMPLATE
    return native


def test_chat_format_knows_whether_the_template_renders_tools(tokenizer, tools_tokenizer):
    assert ChatFormat(tokenizer).native_tools is False  # SmolLM2's template ignores tools=
    chat = ChatFormat(tools_tokenizer)
    assert chat.native_tools is True
    _, tools = TOOL_CALL.prompt(WEBSHOP, native_tools=True)
    assert tools_tokenizer.decode(chat.prompt_ids("Shop.", tools)) == (
        "<|im_start|>system\nTools: search, click<|im_end|>\n<|im_start|>user\nShop.<|im_end|>\n<|im_start|>assistant\n"
    )


# ---------------------------------------------------------------------- an episode through the agent
register_env(
    EnvSpec(
        name="toy-tools",
        family="B",
        reset_field="data_idx",
        instructions="Reach the target number.",
        tools=(EnvTool("add", "Add to the value.", "add {n}", {"n": HOW_MUCH}),),
    ),
    replace=True,
)
ADD_ONE = 'I add one.\n<tool_call>{"name": "add", "arguments": {"n": 1}}</tool_call>'


@pytest.mark.slow
@pytest.mark.parametrize("native", [False, True], ids=["listed", "native"])
def test_agent_plays_an_episode_with_tool_calls(tokenizer, tools_tokenizer, toy_server, native):
    tok = tools_tokenizer if native else tokenizer
    replies = iter(["I add one.", ADD_ONE, '<tool_call>{"name": "add", "arguments": {"n": "1"}}</tool_call>', ADD_ONE])
    generator = ScriptedGenerator(text_policy(tok, lambda prompt: next(replies)))
    config = {
        "env_name": "toy-tools",
        "env_ports": [toy_server.port],
        "max_turns": 6,
        "max_prompt_length": 512,
        "max_response_length": 48,
        "max_obs_length": 64,
        "max_trajectory_length": 1024,
        "action_format": "tool_call",
        "sampling": PLAIN,
    }
    with OpenManusAgent(tok, generator, config) as agent:
        out = agent.run_llm_loop(task_batch([2], data_source="toy-tools"))
    listed = (
        "You act by calling one of these tools:\n- add(n: integer): Add to the value. n: how much.\n"
        "Answer every turn with your reasoning about what to do next, then exactly one tool call on its own "
        f"line:\n{BLOCK}\nThe call's result is the next observation."
    )
    system = "Tools: add" if native else "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    assert tok.decode(generator.calls[0]["prompts"][0]) == (
        f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\nReach the target number.\n\n"
        f"{NATIVE_TEXT if native else listed}\n\nObservation:\nTask 2: value 0.<|im_end|>\n<|im_start|>assistant\n"
    )
    nt = out.non_tensor_batch
    assert (nt["num_turns"][0], nt["success"][0], nt["env_reward"][0], nt["status"][0]) == (4, True, 1.0, "done")
    turns = nt["trajectory"][0]
    model = [t for t in turns if t["role"] == "assistant"]
    assert [(t["action"], t["kind"], t["valid"]) for t in model] == [
        (None, "invalid", False),
        ("add 1", "action", True),
        (None, "invalid", False),
        ("add 1", "action", True),
    ]
    assert [t["text"] for t in turns if t["role"] == "observation"] == [
        "Task 2: value 0.",
        feedback("your reply has no <tool_call>...</tool_call> block"),
        "value 1",
        feedback("argument 'n' of tool 'add' must be an integer, got \"1\""),
        "value 2",
    ]
    assert out.meta_info["metrics"]["env/invalid_actions"] == 2.0
