"""Action templates: parsing, the prompt/parser agreement, invalid replies, and the format pattern."""

import re

import pytest

from openmanus_rl.agent.templates import INVALID, ParsedAction, get_action_template
from openmanus_rl.envs import get_env_spec

WEBSHOP, SQL = get_env_spec("webshop"), get_env_spec("sqlgym")
REACT, XML = get_action_template("react"), get_action_template("xml")


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "Thought: I should search.\nAction: search[red shoes]",
            ParsedAction("search[red shoes]", "action", "I should search."),
        ),
        (
            "Action: click[a]\nThought: no, the other\nAction: click[b]  ",
            ParsedAction("click[b]", "action", "no, the other"),
        ),
        ("action : click[Buy Now]\nmore text", ParsedAction("click[Buy Now]", "action")),
        ("search[red shoes]", ParsedAction("search[red shoes]", "action")),  # bare reply matching the env's grammar
        ("Thought: hmm\nAction:   ", INVALID),
        ("I would like to buy shoes", INVALID),
        ("search[red shoes]\nclick[x]", INVALID),  # a bare reply must be one action
        ("", INVALID),
    ],
)
def test_react_parse(text, expected):
    assert REACT.parse(text, WEBSHOP) == expected


@pytest.mark.parametrize(
    "text, spec, expected",
    [
        ("<think>look</think>\n<action>click[x]</action>", WEBSHOP, ParsedAction("click[x]", "action", "look")),
        ("<action>a</action><action> search[b] </action>", WEBSHOP, ParsedAction("search[b]", "action")),
        ("<think>t</think><action>click[x]", WEBSHOP, INVALID),  # unclosed (cut by the length limit)
        ("<think>t</think><action> </action>", WEBSHOP, INVALID),
        ("<think>t</think><answer>42</answer>", WEBSHOP, INVALID),  # webshop takes no final answers
        ("<think>t</think><answer>SELECT 1</answer>", SQL, ParsedAction("SELECT 1", "answer", "t")),
        ("<action>SELECT 2</action><answer>SELECT 1</answer>", SQL, ParsedAction("SELECT 1", "answer")),
    ],
)
def test_xml_parse(text, spec, expected):
    assert XML.parse(text, spec) == expected


def test_instructions_and_parser_agree():
    """A reply written exactly as the format instructions show, placeholders filled, parses to its action."""
    react = REACT.format_instructions(WEBSHOP)
    reply = (
        react.split("format:\n", 1)[1]
        .replace("<your reasoning about what to do next>", "find it")
        .replace("<exactly one action>", "search[blue mug]")
    )
    assert REACT.parse(reply, WEBSHOP) == ParsedAction("search[blue mug]", "action", "find it")

    xml = XML.format_instructions(WEBSHOP)
    assert "<answer>" not in xml
    reply = (
        xml.split("format:\n", 1)[1]
        .replace("your reasoning about what to do next", "find it")
        .replace("exactly one action", "click[b01]")
    )
    assert XML.parse(reply, WEBSHOP) == ParsedAction("click[b01]", "action", "find it")
    assert "<answer>the answer</answer>" in XML.format_instructions(SQL)


def test_format_pattern_accepts_wellformed_replies_only():
    react, xml = re.compile(REACT.format_pattern, re.DOTALL), re.compile(XML.format_pattern, re.DOTALL)
    assert react.search("Thought: go\nAction: search[x]")
    assert not react.search("Action: search[x]")
    assert xml.search("<think>go</think>\n<action>click[x]</action>")
    assert xml.search("<think>go</think><answer>4</answer>")
    assert not xml.search("<think>go</think><action>click[x]</answer>")
    assert not xml.search("<action>click[x]</action>")


def test_invalid_feedback_names_the_expected_format():
    assert "'Action:'" in REACT.invalid_feedback(WEBSHOP)
    assert "<action>...</action>" in XML.invalid_feedback(WEBSHOP)
    assert "<answer>" in XML.invalid_feedback(SQL) and "<answer>" not in XML.invalid_feedback(WEBSHOP)


def test_unknown_template():
    with pytest.raises(ValueError, match="unknown action format 'json'; known: \\['react', 'tool_call', 'xml'\\]"):
        get_action_template("json")
