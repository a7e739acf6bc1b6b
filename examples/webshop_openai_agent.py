"""A WebShop agent written only against the ``openai`` client and the env server's HTTP routes.

`play(task, base_url, api_key)` plays one episode: it opens an env on a WebShop server speaking the
AgentGym protocol (``/create``, ``/reset``, ``/step``, ``/close``), resets it to the goal
``task["extra_info"]["index"]``, and gives the model the page with two tools, ``search(query)`` and
``click(target)``.  Each turn is one chat completion; each tool call becomes the action
``search[query]`` / ``click[target]`` and its result, the new page, a tool message.  Each page is cut to its
whole elements within ``MAX_PAGE_CHARS`` characters (`page_view`), as the built-in agent cuts observations to
``agent.max_obs_length`` tokens: a whole results page runs to about 650 tokens, and ten of them would not fit the
run's token budget.  The conversation only grows, so every call of an episode extends one sample.  A reply without a
tool call gets a user message asking for one.  The episode ends when the env says done (Buy Now),
after ``max_turns`` completions, or when the conversation no longer fits the endpoint's context
(``context_length_exceeded``).  It returns ``{"reward": <the env's last reward>, "info": {"success":
reward == 1.0}}``: 0 unless something was bought.

The server: ``task["extra_info"]["env_url"]``, else ``$WEBSHOP_URL``, else ``http://127.0.0.1:36001``.

Train it from the repository root (the run starts no env server for the gateway)::

    agentgym serve webshop --port 36001 &
    ./train_grpo.sh --env_name webshop agent.action_format=tool_call data.rollout=gateway \
        +agent.program=examples.webshop_openai_agent:play

Try it against any OpenAI-compatible endpoint::

    python -m examples.webshop_openai_agent --base_url http://127.0.0.1:8000/v1 --model NAME --tasks 0 1 2
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import openai
import requests

DEFAULT_ENV_URL = "http://127.0.0.1:36001"
MAX_TURNS = 10
MAX_PAGE_CHARS = 1000  # about 350 tokens of a WebShop page
SEP = " [SEP] "
HTTP_TIMEOUT_S = 60.0

SYSTEM = (
    "You are shopping in an online store for the one product that fits the instruction on the page: "
    "its attributes, its options (such as size or colour) and its price limit. Each page's elements are "
    "separated by [SEP]. Use the tools, one action at a time: search on the page with the search box, click "
    "a product id, an option value or a button (Next >, < Prev, Back to Search, Description, Buy Now) shown "
    "on the page. Select the wanted options before you click Buy Now; Buy Now ends the episode."
)
NUDGE = "Act with a tool call: search(query) on the search page, or click(target) on something the page shows."
INVALID_CALL = "Not a valid call: use search with a non-empty query, or click with a non-empty target."


def tool(name: str, description: str, argument: str, about: str) -> dict[str, Any]:
    """An OpenAI function tool taking one string ``argument``."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "required": [argument],
                "properties": {argument: {"type": "string", "description": about}},
            },
        },
    }


TOOLS = [
    tool(
        "search",
        "Type keywords into the search box (only on a page that has one).",
        "query",
        "the keywords, e.g. waterproof hiking boots for men",
    ),
    tool(
        "click",
        "Click something shown on the page: a product id, an option value or a button.",
        "target",
        "exactly as the page shows it, e.g. B0123ABCDE, large, Buy Now",
    ),
]
ARGUMENT = {t["function"]["name"]: t["function"]["parameters"]["required"][0] for t in TOOLS}


class WebShopEnv:
    """One env on the WebShop server at ``url``, created on construction; `close` it when done."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.env_idx: int = self._post("/create", None)

    def _post(self, route: str, body: dict[str, Any] | None) -> Any:
        response = requests.post(self.url + route, json=body, timeout=HTTP_TIMEOUT_S)
        response.raise_for_status()
        return response.json()

    def reset(self, goal: int) -> str:
        """Start the episode of goal ``goal``; the first page."""
        return self._post("/reset", {"env_idx": self.env_idx, "session_id": goal})[0]

    def step(self, action: str) -> tuple[str, float, bool]:
        """``(page, reward, done)`` after ``action`` (an action the page does not allow leaves it as it was)."""
        answer = self._post("/step", {"env_idx": self.env_idx, "action": action})
        return answer["state"], float(answer["reward"]), bool(answer["done"])

    def close(self) -> None:
        self._post("/close", {"env_idx": self.env_idx})


def env_url(task: dict[str, Any]) -> str:
    """The WebShop server of ``task``: its ``extra_info["env_url"]``, else ``$WEBSHOP_URL``, else the default."""
    return (task.get("extra_info") or {}).get("env_url") or os.environ.get("WEBSHOP_URL") or DEFAULT_ENV_URL


def page_view(page: str, limit: int = MAX_PAGE_CHARS) -> str:
    """``page`` cut to the whole ``[SEP]``-separated elements that fit in ``limit`` characters (its first ``limit``
    characters when even the first element does not fit); a page within ``limit`` unchanged."""
    if len(page) <= limit:
        return page
    head = page[: limit + len(SEP)]
    end = head.rfind(SEP)
    return page[:end] if end > 0 else page[:limit]


def action(name: str, arguments: str) -> str | None:
    """The env action a tool call stands for (``search[...]`` / ``click[...]``); None when the call names no
    tool of ours or lacks a non-empty string argument."""
    try:
        args = json.loads(arguments)
    except json.JSONDecodeError:
        return None
    key = ARGUMENT.get(name)
    value = args.get(key) if key and isinstance(args, dict) else None
    if not isinstance(value, str) or not value.strip():
        return None
    return f"{name}[{value.strip()}]"


def play(
    task: dict[str, Any], base_url: str, api_key: str, model: str = "policy", max_turns: int = MAX_TURNS
) -> dict[str, Any]:
    """Play WebShop goal ``task["extra_info"]["index"]`` with the model at ``base_url`` (see the module docstring)."""
    client = openai.OpenAI(base_url=base_url, api_key=api_key)
    env = WebShopEnv(env_url(task))
    try:
        reward = run_episode(client, model, env, int(task["extra_info"]["index"]), max_turns)
    finally:
        env.close()
    return {"reward": reward, "info": {"success": reward == 1.0}}


def run_episode(client: openai.OpenAI, model: str, env: WebShopEnv, goal: int, max_turns: int) -> float:
    """The env's reward for the purchase; 0.0 when the episode ends without one."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": page_view(env.reset(goal))},
    ]
    for _ in range(max_turns):
        try:
            reply = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
        except openai.BadRequestError as exc:
            if exc.code == "context_length_exceeded":
                return 0.0
            raise
        message = reply.choices[0].message
        if not message.tool_calls:
            messages.append({"role": "assistant", "content": message.content or ""})
            messages.append({"role": "user", "content": NUDGE})
            continue
        messages.append(message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}))
        for call in message.tool_calls:
            act = action(call.function.name, call.function.arguments)
            page, reward, done = env.step(act) if act is not None else (INVALID_CALL, 0.0, False)
            if done:
                return reward
            messages.append({"role": "tool", "tool_call_id": call.id, "content": page_view(page)})
    return 0.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Play WebShop goals with a model behind an OpenAI-compatible API.")
    parser.add_argument("--base_url", default=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1"))
    parser.add_argument("--api_key", default=os.environ.get("OPENAI_API_KEY", "EMPTY"))
    parser.add_argument("--model", required=True, help="the model name the endpoint serves")
    parser.add_argument("--env_url", default=os.environ.get("WEBSHOP_URL", DEFAULT_ENV_URL), help="the WebShop server")
    parser.add_argument("--tasks", type=int, nargs="+", default=[0, 1, 2], help="WebShop goal ids")
    parser.add_argument("--max_turns", type=int, default=MAX_TURNS)
    args = parser.parse_args(argv)
    for goal in args.tasks:
        task = {"extra_info": {"index": goal, "env_url": args.env_url}}
        result = play(task, args.base_url, args.api_key, args.model, args.max_turns)
        print(f"goal {goal}: reward {result['reward']:.3f}, success {result['info']['success']}", flush=True)


if __name__ == "__main__":
    main()
