"""A scripted WebShop shopper that reads only the page text the agent gets.

`WebShopExpert` never sees the goal's hidden attributes, the catalogue, the
server's state or the reward: its only input is the observation string (the
page's elements joined with ``" [SEP] "``, possibly cut short by the agent's
observation limit and ending with ``[truncated]``).  The instruction is on
every page, so it is re-read from each observation.

Strategy, per page:

* Instruction: split into the free-text request, the ``group: value``
  options of synthetic goals (``... with color: navy, and size: large``) and
  the price limit (``price lower than 50.00 dollars``).
* Start page: ``search[<keywords>]`` with the request's content words (filler
  such as "i am looking for", articles and pronouns dropped), then each
  wanted option as ``group value``; never the price clause.  The search
  engine indexes titles, descriptions, bullet points and option values, so
  the options and attributes in the query pull up products that offer them.
* Results page: open the first listed product not tried yet whose price (the
  low end of a range) is within the limit; without one, the first untried
  product.  The engine's order is a better guide than the titles: on the
  first catalogue version, ranking results by how many instruction words
  their titles share solved 72.5% of the first 200 test tasks, the engine's
  order 93% (titles show only part of a product's attributes; the engine also
  reads the bullets and the description).
* Item page: if the page's price is above the limit, or a wanted option value
  is not offered, go back (``click[< Prev]``) and take the next candidate
  while the step budget allows it.  Otherwise click every wanted option value
  the page offers (one per turn, in page order; for instructions without
  ``group: value`` pairs, every offered value that the instruction names),
  then ``click[Buy Now]``.
* Anything else (a description page, an unknown page): go back.
* Step guard: the episode never takes more than ``max_steps`` actions; on an
  item page the expert buys as soon as the remaining budget only allows that,
  and it backtracks only when the new candidate can still be bought in time.

``noise`` in [0, 1] makes a weaker shopper: with that probability (seeded by
``seed``) it clicks a random other product instead of the best one, and
skips each wanted option.  ``noise=0`` is deterministic.

Actions name page elements as the page shows them (``click[B0ABCDEFGH]``,
``click[navy]``, ``click[Buy Now]``); the env matches them case-insensitively.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..expert import Expert

SEP = "[SEP]"
TRUNCATED = "[truncated]"
DEFAULT_MAX_STEPS = 8
MAX_QUERY_WORDS = 24

# words that say how someone asks, not what they want
_FILLER = frozenset(
    """
    a an the this that these those which who whom whose what it its it's is are be been am was were i i'm im i'd id
    me my mine we us our you your yours he she they them their please can could would will shall should may might
    need needs want wants wanted like looking look search searching find finding get getting buy buying order
    ordering shop shopping show help after some any one ones something thing things with without featuring
    feature features has have having had that's thats of to in on at by from and or nor but for as into also
    just very really so too kind sort type prefer preferably must ideally maybe perhaps there here
""".split()
)
_OPTION_GROUPS = frozenset(
    """
    color colour size style flavor flavour scent pattern material fit type capacity count length width height
    configuration model pack quantity item package
""".split()
) | {
    "flavor name",
    "pattern name",
    "material type",
    "item package quantity",
    "fit type",
    "scent name",
    "size name",
    "style name",
}
_PRICE = re.compile(
    r"[,;]?\s*(?:and\s+)?price\s+(?:lower|less)\s+than\s+\$?\s*([\d,]+(?:\.\d+)?)\s*(?:dollars?)?\.?\s*$", re.IGNORECASE
)
_OPTION_PAIR = re.compile(r"^[a-z][a-z0-9 ]*?:\s")
_PAGE_LINE = re.compile(r"^Page \d+ \(Total results: \d+\)$")
_ASIN = re.compile(r"^[A-Z0-9]{10}$")
_MONEY = re.compile(r"\$\s*([\d,]*\.?\d+)")
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` (apostrophes dropped, so "i'm" is "im")."""
    return _WORD.findall(text.lower().replace("'", "").replace("\u2019", ""))


def content_words(text: str) -> list[str]:
    """The words of ``text`` that are not filler, in order, without repeats."""
    out: list[str] = []
    for w in words(text):
        if w not in _FILLER and w not in out:
            out.append(w)
    return out


def _norm(text: str) -> str:
    return " ".join(words(text))


@dataclass(frozen=True)
class Instruction:
    """A shopping instruction split into its parts."""

    text: str
    request: str  # the free text, without the option pairs and the price clause
    options: tuple[tuple[str, str], ...] = ()  # ("color", "navy") for "color: navy"
    price_limit: float | None = None


def parse_instruction(text: str) -> Instruction:
    """Read the request, the ``group: value`` options and the price limit out of an instruction."""
    rest = " ".join(text.split())
    limit = None
    if match := _PRICE.search(rest):
        limit = float(match.group(1).replace(",", ""))
        rest = rest[: match.start()].rstrip(" ,;")
    options: list[tuple[str, str]] = []
    starts = [m.start() for m in re.finditer(r"\bwith\s", rest)]
    for start in reversed(starts):  # the last "with" followed only by "group: value" pairs
        tail = rest[start + 4 :].strip()
        pieces = re.split(r",\s*(?:and\s+)?(?=[a-z][a-z0-9 ]*?:\s)", tail)
        if pieces and all(_OPTION_PAIR.match(p) for p in pieces):
            for piece in pieces:
                group, value = piece.split(":", 1)
                options.append((group.strip().lower(), value.strip(" ,.").lower()))
            rest = rest[:start].rstrip(" ,")
            break
    return Instruction(text=text, request=rest, options=tuple(options), price_limit=limit)


def search_keywords(instruction: Instruction) -> str:
    """The search text: the request's content words, then each wanted option as ``group value``
    (at most ``MAX_QUERY_WORDS`` words)."""
    keywords = content_words(instruction.request)
    for group, value in instruction.options:
        keywords += [w for w in words(f"{group} {value}") if w not in keywords]
    return " ".join(keywords[:MAX_QUERY_WORDS]) or instruction.request


def price_of(text: str) -> float | None:
    """The (low end of the) price in ``"$12.99"`` / ``"Price: $3.78 to $11.38"``; None without one."""
    match = _MONEY.search(text)
    return float(match.group(1).replace(",", "")) if match else None


def split_page(observation: str) -> tuple[list[str], bool]:
    """The page's element texts, and whether the observation was cut short (its last element may be partial)."""
    text = observation.strip()
    cut = text.endswith(TRUNCATED)
    if cut:
        text = text[: -len(TRUNCATED)].rstrip()
    return [e.strip() for e in text.split(SEP)], cut


@dataclass(frozen=True)
class Listing:
    asin: str
    title: str
    price_text: str
    price: float | None
    rank: int


@dataclass
class Page:
    """One observation, read: its kind, the instruction and the parts the expert needs."""

    kind: str  # start | results | item | sub | end | unknown
    elements: list[str]
    truncated: bool
    instruction: str = ""
    listings: list[Listing] = field(default_factory=list)
    options: list[str] = field(default_factory=list)  # item page: group names and values, in page order
    price: float | None = None  # item page
    title: str = ""


def read_page(observation: str) -> Page:
    """Classify and parse one WebShop observation."""
    elements, cut = split_page(observation)
    lower = [e.lower() for e in elements]
    instruction = ""
    if "instruction:" in lower:
        i = lower.index("instruction:")
        if i + 1 < len(elements):
            instruction = elements[i + 1]
    if elements and elements[0].startswith("Thank you for shopping"):
        return Page("end", elements, cut, instruction)
    if elements and elements[0] == "WebShop":
        return Page("start", elements, cut, instruction)
    if any(_PAGE_LINE.match(e) for e in elements):
        listings = []
        whole = len(elements) - 1 if cut else len(elements)  # a cut page's last element may be partial
        for i in range(whole - 2):
            if _ASIN.match(elements[i]) and elements[i + 2].startswith("$"):
                listings.append(
                    Listing(elements[i], elements[i + 1], elements[i + 2], price_of(elements[i + 2]), len(listings))
                )
        return Page("results", elements, cut, instruction, listings=listings)
    if "< prev" in lower:
        start = lower.index("< prev") + 1
        price_at = next((i for i in range(start, len(elements)) if elements[i].startswith("Price:")), None)
        if price_at is not None or "buy now" in lower or cut:
            if price_at is None:  # cut before the price: the option region runs to the (whole) end
                return Page("item", elements, cut, instruction, options=elements[start : len(elements) - cut])
            return Page(
                "item",
                elements,
                cut,
                instruction,
                options=elements[start : price_at - 1],
                price=price_of(elements[price_at]),
                title=elements[price_at - 1],
            )
        return Page("sub", elements, cut, instruction)
    return Page("unknown", elements, cut, instruction)


def _option_groups(region: list[str], named_groups: set[str]) -> list[tuple[str, list[str]]]:
    """The item page's option region as (group, values): a group name is the region's first element or a
    known group name (those the instruction names, and common ones such as colour and size)."""
    groups: list[tuple[str, list[str]]] = []
    for i, element in enumerate(region):
        key = element.lower()
        if i == 0 or key in named_groups or key in _OPTION_GROUPS:
            groups.append((element, []))
        else:
            groups[-1][1].append(element)
    return groups


def _value_match(wanted: str, offered: list[str]) -> str | None:
    """The offered value that is ``wanted``: the same words, else the closest one whose words contain or are
    contained in the wanted words; None when none does."""
    want = _norm(wanted)
    for value in offered:
        if _norm(value) == want:
            return value
    want_set = set(want.split())
    best, best_extra = None, None
    for value in offered:
        have = set(_norm(value).split())
        if have and want_set and (have <= want_set or want_set <= have):
            extra = len(have ^ want_set)
            if best_extra is None or extra < best_extra:
                best, best_extra = value, extra
    return best


class WebShopExpert(Expert):
    """Searches with the instruction's key words, opens the best-matching affordable product, selects the
    named options and buys (see the module docstring)."""

    env_name = "webshop"

    def __init__(
        self, noise: float = 0.0, seed: int = 0, max_steps: int = DEFAULT_MAX_STEPS, max_candidates: int = 3
    ) -> None:
        super().__init__(noise, seed)
        if max_steps < 3:
            raise ValueError(f"max_steps must be >= 3 (search, open, buy), got {max_steps}")
        self.max_steps = max_steps
        self.max_candidates = max_candidates

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.tried: list[str] = []  # products opened, in order
        self.current: str | None = None  # the product whose page is open
        self.selected: list[str] = []  # option values clicked on the current product
        self.skipped: set[str] = set()  # wanted values the noise made the expert skip on the current product
        self.searches = 0

    # ------------------------------------------------------------------ helpers
    def _left(self) -> int:
        """Actions still allowed after the one being chosen now."""
        return self.max_steps - self.steps - 1

    def wanted_options(self, page: Page, instruction: Instruction) -> list[tuple[str, str | None]]:
        """(what the instruction asks for, the offered value to click or None) for the item page, in page order."""
        named = {g for g, _ in instruction.options}
        groups = _option_groups(page.options, named)
        out: list[tuple[str, str | None]] = []
        if instruction.options:
            for group, value in instruction.options:
                values = next((vs for g, vs in groups if g.lower() == group), None)
                pool = values if values is not None else [v for _, vs in groups for v in vs]
                out.append((f"{group}: {value}", _value_match(value, pool)))
        else:  # free-text instruction: every offered value it names, the longest per group
            text = f" {_norm(instruction.request)} "
            for _group, values in groups:
                named_values = [v for v in values if _norm(v) and f" {_norm(v)} " in text]
                if named_values:
                    best = max(named_values, key=lambda v: len(_norm(v)))
                    out.append((best, best))
        order = {v: i for i, v in enumerate(page.options)}
        return sorted(out, key=lambda item: order.get(item[1], -1) if item[1] is not None else -1)

    @staticmethod
    def _rank(listings: list[Listing], instruction: Instruction) -> list[Listing]:
        """Affordable products first (price unknown counts as affordable), each group in the search engine's order."""
        limit = instruction.price_limit
        return sorted(
            listings, key=lambda item: (limit is not None and item.price is not None and item.price > limit, item.rank)
        )

    # ------------------------------------------------------------------ the policy
    def act(self, observation: str) -> str:
        page = read_page(observation)
        instruction = parse_instruction(page.instruction)
        if page.kind == "start":
            return self._search(instruction)
        if page.kind == "results":
            return self._choose(page, instruction)
        if page.kind == "item":
            return self._item(page, instruction)
        if page.kind == "sub":
            return self._do("click[< Prev]", "This page has no options; I go back to the product.")
        if page.kind == "end":
            return self._do("click[Back to Search]", "The purchase is done.")
        return self._do("click[Back to Search]", "I do not recognise this page, so I go back to the search.")

    def _search(self, instruction: Instruction) -> str:
        self.searches += 1
        self.current, self.selected = None, []
        keywords = search_keywords(instruction)
        if self.searches > 1:  # the first search found nothing useful: fewer words
            keywords = " ".join(keywords.split()[-max(2, len(keywords.split()) // 2) :])
        return self._do(f"search[{keywords}]", "I search for the product the instruction describes.")

    def _choose(self, page: Page, instruction: Instruction) -> str:
        self.current, self.selected, self.skipped = None, [], set()
        fresh = [item for item in page.listings if item.asin not in self.tried]
        if not fresh:
            if self.searches < 2 and self._left() >= 3:
                return self._do("click[Back to Search]", "No result fits, so I search again with fewer words.")
            if page.listings:  # out of fresh candidates: the best one again
                fresh = list(page.listings)
            else:
                return self._do("click[Back to Search]", "There are no results, so I go back to the search.")
        ranked = self._rank(fresh, instruction)
        pick = ranked[0]
        if len(ranked) > 1 and self.noisy():
            pick = self.rng.choice(ranked[1:])
        which = "the next result" if self.tried else "the top result"
        self.tried.append(pick.asin)
        self.current = pick.asin
        limit = instruction.price_limit
        if limit is not None and pick.price is not None and pick.price <= limit:
            why = f"{pick.asin} is {which} under {limit:.2f} dollars ({pick.price_text}), so I open it."
        else:
            why = f"{pick.asin} is {which} ({pick.price_text}), so I open it."
        return self._do(f"click[{pick.asin}]", why)

    def _item(self, page: Page, instruction: Instruction) -> str:
        wanted = self.wanted_options(page, instruction)
        missing = [ask for ask, value in wanted if value is None]
        limit = instruction.price_limit
        too_expensive = limit is not None and page.price is not None and page.price > limit
        if (missing or too_expensive) and not self.selected and self._can_backtrack(len(wanted)):
            reason = f"it does not offer {missing[0]}" if missing else f"its price is above {limit:.2f} dollars"
            self.current = None
            return self._do("click[< Prev]", f"This product does not fit: {reason}. I go back to the results.")
        if self._left() > 0:
            for ask, value in wanted:
                if value is None or value in self.selected or value in self.skipped:
                    continue
                if self.noisy():
                    self.skipped.add(value)
                    continue
                self.selected.append(value)
                return self._do(f"click[{value}]", f"The instruction asks for {ask}, so I select {value}.")
        return self._do("click[Buy Now]", "The product fits the instruction and the options are set, so I buy it.")

    def _can_backtrack(self, n_options: int) -> bool:
        """Whether going back, opening another product, setting its options and buying still fit the budget."""
        return len(self.tried) < self.max_candidates and self._left() >= 2 + n_options + 1
