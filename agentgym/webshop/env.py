"""The WebShop page state machine: one shopper session.

A page is a list of elements (text, button, product link, option value).  The
observation is the elements' texts joined with ``" [SEP] "``; the clickables
are the lower-cased texts of buttons, then of product links, then the option
values (the order WebShop lists them in).  Pages:

* start: ``WebShop [SEP] Instruction: [SEP] <instruction> [SEP] Search`` (has the search bar)
* results: ``Instruction: [SEP] <instruction> [SEP] Back to Search [SEP] Page <p> (Total results: <n>)
  [SEP] [< Prev] [SEP] [Next >] [SEP] <ASIN> [SEP] <title> [SEP] <price> ...``, 10 a page, 50 at most
* item: ``... Back to Search [SEP] < Prev [SEP] <group> [SEP] <value> ... [SEP] <title> [SEP]
  Price: <price> [SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now``
  (an ``Attributes`` button before ``Buy Now`` when ``show_attrs``)
* sub-pages Description / Features / Reviews / Attributes: ``... Back to Search [SEP] < Prev [SEP] <content>``
* end: ``Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] <reward>``

Actions: ``search[<keywords>]`` on a page with the search bar, ``click[<clickable>]``
(case-insensitive; ``click[search]`` is not an action).  Anything else leaves
the page as it is, with reward 0.  ``click[buy now]`` ends the episode with
the reward of ``reward.compute_reward``; its breakdown is the step's info.
Other steps have info ``None``.  The target product never appears in a page.
"""

from __future__ import annotations

import html
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from ..game import StepResult
from ..open_envs import EpisodeStateError, InvalidRequestError
from .data import Goal, Product, Shop
from .reward import compute_reward
from .search import SearchEngine

SEP = " [SEP] "
RESULTS_PER_PAGE = 10
MAX_RESULTS = 50
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")
_ACTION = re.compile(r"^\s*(search|click)\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Element:
    text: str
    role: str = "text"  # text | button | link | option
    ref: str = ""  # option group (options) or product position in the catalogue (links)


@dataclass
class _Session:
    goal: Goal
    page: str = "start"  # start | results | item | sub | end
    keywords: str = ""
    results: list[int] = field(default_factory=list)
    page_no: int = 1
    item: Product | None = None
    options: dict[str, str] = field(default_factory=dict)
    sub_page: str = ""
    reward: float = 0.0


class WebShopEnv:
    """One shopper: ``reset`` to a goal, then ``step`` through pages until ``buy now``."""

    def __init__(self, shop: Shop, engine: SearchEngine, show_attrs: bool = False) -> None:
        self._shop = shop
        self._engine = engine
        self._show_attrs = show_attrs
        self._rng = random.Random()
        self._s: _Session | None = None
        self._elements: list[Element] = []

    # ----------------------------------------------------------------- calls
    def reset(self, session_id: int | None) -> str:
        goals = self._shop.goals
        if session_id is None:
            session_id = self._rng.randrange(len(goals))
        if not 0 <= session_id < len(goals):
            raise InvalidRequestError(f"session_id {session_id} out of range: expected 0 <= session_id < {len(goals)}")
        self._s = _Session(goal=goals[session_id])
        self._render()
        return self.observation

    def step(self, action: str) -> StepResult:
        s = self._session()
        if s.page == "end":
            raise EpisodeStateError("episode is done (bought an item): POST /reset to start a new one")
        match = _ACTION.match(action)
        name, arg = (match.group(1).lower(), match.group(2).strip().lower()) if match else ("", "")
        if name == "search" and arg and s.page == "start":
            self._search(arg)
        elif name == "click" and arg in self._clickables() and arg != "search":
            return self._click(arg)
        return StepResult(self.observation, 0.0, False, {"info": None})

    @property
    def observation(self) -> str:
        self._session()
        return SEP.join(e.text for e in self._elements)

    @property
    def instruction_text(self) -> str:
        return self._session().goal.instruction

    def available_actions(self) -> dict[str, Any]:
        s = self._session()
        return {"has_search_bar": s.page == "start", "clickables": list(self._clickables())}

    def state(self) -> dict[str, str]:
        return {"url": self._url(), "html": self._html(), "instruction_text": self.instruction_text}

    # ----------------------------------------------------------- transitions
    def _session(self) -> _Session:
        if self._s is None:
            raise EpisodeStateError("no episode yet: POST /reset first")
        return self._s

    def _search(self, keywords: str) -> None:
        s = self._session()
        s.keywords, s.results, s.page_no, s.page = keywords, self._engine.search(keywords, MAX_RESULTS), 1, "results"
        self._render()

    def _click(self, key: str) -> StepResult:
        s = self._session()
        target = self._clickables()[key]
        if key == "buy now":
            assert s.item is not None
            breakdown = compute_reward(s.item, s.goal, s.options)
            s.page, s.reward = "end", breakdown.reward
            self._render()
            return StepResult(self.observation, breakdown.reward, True, {"info": breakdown.as_dict()})
        if key == "back to search":
            self._s = _Session(goal=s.goal)
        elif target.role == "option":
            s.options[target.ref] = target.text
        elif target.role == "link":
            s.item, s.options, s.page = self._shop.products[int(target.ref)], {}, "item"
        elif key == "next >":
            s.page_no += 1
        elif key == "< prev":
            if s.page == "results":
                s.page_no -= 1
            else:
                s.page = "results" if s.page == "item" else "item"
        else:  # a sub-page button
            s.page, s.sub_page = "sub", target.text
        self._render()
        return StepResult(self.observation, 0.0, False, {"info": None})

    # -------------------------------------------------------------- rendering
    def _clickables(self) -> dict[str, Element]:
        found: dict[str, Element] = {}
        for role in ("button", "link"):
            for e in self._elements:
                if e.role == role:
                    found.setdefault(e.text.lower(), e)
        for e in self._elements:
            if e.role == "option":
                found.setdefault(e.text, e)
        return found

    def _render(self) -> None:
        s = self._session()
        head = [Element("Instruction:"), Element(s.goal.instruction), Element("Back to Search", "button")]
        if s.page == "start":
            els = [
                Element("WebShop"),
                Element("Instruction:"),
                Element(s.goal.instruction),
                Element("Search", "button"),
            ]
        elif s.page == "results":
            pages = max(1, -(-len(s.results) // RESULTS_PER_PAGE))
            els = head + [Element(f"Page {s.page_no} (Total results: {len(s.results)})")]
            if s.page_no > 1:
                els.append(Element("< Prev", "button"))
            if s.page_no < pages:
                els.append(Element("Next >", "button"))
            start = (s.page_no - 1) * RESULTS_PER_PAGE
            for i in s.results[start : start + RESULTS_PER_PAGE]:
                p = self._shop.products[i]
                els += [Element(p.asin, "link", str(i)), Element(p.title), Element(p.price_text)]
        elif s.page == "item":
            p = s.item
            assert p is not None
            els = head + [Element("< Prev", "button")]
            for group, values in p.options.items():
                els.append(Element(group))
                els += [Element(v, "option", group) for v in values]
            els += [Element(p.title), Element(f"Price: {p.price_text}"), Element("Rating: N.A.")]
            els += [Element(name, "button") for name in SUB_PAGES[: 4 if self._show_attrs else 3]]
            els.append(Element("Buy Now", "button"))
        elif s.page == "sub":
            p = s.item
            assert p is not None
            content = {
                "Description": [p.description] if p.description else [],
                "Features": list(p.bullets),
                "Reviews": [],
                "Attributes": list(p.attributes),
            }[s.sub_page]
            els = head + [Element("< Prev", "button")] + [Element(t) for t in content]
        else:
            els = [
                Element("Thank you for shopping with us!"),
                Element("Your score (min 0.0, max 1.0)"),
                Element(str(round(s.reward, 4))),
            ]
        self._elements = els

    def _url(self) -> str:
        s = self._session()
        sid = s.goal.session_id
        kw = quote(s.keywords, safe="")
        opts = quote(json.dumps(s.options, sort_keys=True), safe="")
        asin = s.item.asin if s.item else ""
        return {
            "start": f"/{sid}",
            "results": f"/search_results/{sid}/{kw}/{s.page_no}",
            "item": f"/item_page/{sid}/{asin}/{kw}/{s.page_no}/{opts}",
            "sub": f"/item_sub_page/{sid}/{asin}/{kw}/{s.page_no}/{s.sub_page}/{opts}",
            "end": f"/done/{sid}/{asin}/{opts}",
        }[s.page]

    def _html(self) -> str:
        s = self._session()
        lines = ["<html><body>"]
        if s.page == "start":
            lines.append('<input id="search_input" type="text">')
        for e in self._elements:
            text = html.escape(e.text)
            if e.role == "button":
                lines.append(f'<button class="btn">{text}</button>')
            elif e.role == "link":
                lines.append(f'<a class="product-link">{text}</a>')
            elif e.role == "option":
                checked = " checked" if s.options.get(e.ref) == e.text else ""
                lines.append(f'<input type="radio" name="{html.escape(e.ref)}" value="{text}"{checked}> {text}')
            else:
                lines.append(f"<p>{text}</p>")
        lines.append("</body></html>")
        return "\n".join(lines)
