"""WebShop's purchase reward.

Paid only when the shopper clicks ``buy now``::

    reward = r_type * (N_attr + N_opt + [price <= price_upper]) / (|goal attributes| + |goal options| + 1)

* ``N_attr``: goal attributes the bought product has.  A goal attribute
  matches when its fuzzy token-set ratio (``rapidfuzz``, with the usual
  lower-case / strip-punctuation preprocessing) against one of the product's
  attributes is above 85, else when it is a substring of the product's title,
  bullet points or description (lower-cased).
* ``N_opt``: goal options matched by an option the shopper selected: token-set
  ratio above 85 after both sides are reduced to their colour word when they
  name a colour (``normalize_color``).
* ``r_type`` (product type): let ``title_score`` be the share of the goal
  title's nouns that also occur among the bought title's nouns (0.2 when the
  goal title has none).  ``r_type`` is 1.0 when the query strings are equal,
  the category paths share at least two levels, or ``title_score > 0.2``;
  else 0.5.  Then ``title_score < 0.1`` lowers it to 0.1 and
  ``title_score == 0`` to 0.

Nouns are found offline without a tagger model (``title_nouns``): the
alphabetic words of the title minus function words, colour words, a list of
common product adjectives, adverbs (``-ly``), and words with adjective or
participle endings (``-ous``, ``-ful``, ``-ive``, ``-able``, ``-ible``,
``-less``, ``-ic``, ``-ed``, ``-ing``, with a short list of ``-ing`` / ``-ed``
nouns kept).  Brand names count as nouns, as proper nouns do in WebShop.

Everything here is a pure function of its inputs: the same purchase always
earns the same reward.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from rapidfuzz import fuzz, utils

if TYPE_CHECKING:
    from .data import Goal, Product

MATCH_THRESHOLD = 85.0

COLOR_WORDS = frozenset(
    """
    amber aqua auburn azure beige berry black blonde blue blush bronze brown burgundy camel caramel charcoal
    cherry chocolate copper coral cream crimson cyan denim emerald espresso fuchsia gold golden gray green grey
    indigo ivory khaki lavender lilac lime magenta maroon mauve mint mocha mustard navy nude olive orange peach
    pearl pink platinum plum purple red rose ruby rust sage salmon sand silver tan taupe teal turquoise violet
    walnut white wine yellow
""".split()
)

_FUNCTION_WORDS = frozenset(
    """
    a an the and or nor but for with without of in on to by from at as into onto over under per up out off
    about than then this that these those it its is are be been being your our my his her their you we i me
    us them they he she x s t no not all any each every both other more most very so too can will just only
    also plus via vs amp
""".split()
)

_ADJECTIVES = frozenset(
    """
    new premium portable wireless soft small large big long short high low light lightweight heavy durable easy
    quick fast slim thin thick natural organic original classic modern vintage rustic adjustable compact
    waterproof breathable comfortable professional extra super ultra mini best great perfect full free pure
    fresh hot cold warm cool dry wet clean clear smart strong stretchy flexible sturdy solid real true deep dark
    bright sweet spicy sour salty healthy gentle safe quiet silent loud double single multi dual triple casual
    formal elegant cute pretty beautiful unisex tall wide narrow round square flat sleek stylish simple basic
    deluxe luxury matte glossy shiny sheer raw vegan kosher keto gourmet daily everyday universal
    nonstick non anti lean crisp crispy creamy
    rich mild bold smooth tough loose tight hooded insulated sporty athletic resistant proof friendly ready
""".split()
)

_ADJ_SUFFIXES = ("ous", "ful", "ive", "able", "ible", "less", "ic", "ly")
_ING_ED_NOUNS = frozenset(
    """
    clothing bedding lighting ring string king spring wing thing ceiling wedding filling seasoning pudding
    stuffing icing frosting topping dressing flooring railing building painting drawing sling swing bed red
    shed seed speed feed weed need steed breed
""".split()
)

_WORD = re.compile(r"[a-z]+")


def normalize_color(text: str) -> str:
    """The last colour word of ``text`` (``"dark brown"`` -> ``"brown"``), else ``text`` unchanged."""
    colors = [w for w in _WORD.findall(text.lower()) if w in COLOR_WORDS]
    return colors[-1] if colors else text


def fuzzy_match(a: str, b: str) -> bool:
    """Token-set ratio of ``a`` and ``b`` above ``MATCH_THRESHOLD``."""
    return fuzz.token_set_ratio(a, b, processor=utils.default_process) > MATCH_THRESHOLD


def options_match(selected: str, wanted: str) -> bool:
    """Whether a selected option value satisfies a wanted one (colours normalised first)."""
    return fuzzy_match(normalize_color(selected), normalize_color(wanted))


def title_nouns(title: str) -> set[str]:
    """The words of ``title`` taken to be nouns (see the module docstring)."""
    nouns = set()
    for word in _WORD.findall(title.lower()):
        if len(word) < 2 or word in _FUNCTION_WORDS or word in COLOR_WORDS or word in _ADJECTIVES:
            continue
        if word not in _ING_ED_NOUNS and (
            word.endswith(_ADJ_SUFFIXES) or (len(word) > 4 and word.endswith(("ed", "ing")))
        ):
            continue
        nouns.add(word)
    return nouns


def attribute_matched(goal_attr: str, product: "Product") -> bool:
    """Whether ``product`` has ``goal_attr`` (fuzzy attribute match, else a text substring)."""
    if any(fuzzy_match(p_attr, goal_attr) for p_attr in product.attributes):
        return True
    needle = goal_attr.lower()
    return (
        needle in product.title.lower()
        or needle in " ".join(product.bullets).lower()
        or needle in product.description.lower()
    )


def count_option_matches(selected: Iterable[str], wanted: Iterable[str]) -> int:
    """How many wanted option values are matched by some selected value."""
    chosen = list(selected)
    return sum(1 for w in wanted if any(options_match(s, w) for s in chosen))


def type_reward(product: "Product", goal: "Goal") -> dict[str, Any]:
    """``r_type`` with its inputs: query_match, category_match, title_score."""
    query_match = product.query == goal.query
    bought_path = {x.strip() for x in product.product_category.split("›")}
    goal_path = {x.strip() for x in goal.product_category.split("›")}
    category_match = len(bought_path & goal_path) >= 2
    wanted = title_nouns(goal.name)
    title_score = len(title_nouns(product.title) & wanted) / len(wanted) if wanted else 0.2
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match, "title_score": title_score}


@dataclass(frozen=True)
class RewardBreakdown:
    reward: float
    r_type: float
    r_att: float
    r_option: float | None  # None when the goal names no options
    r_price: bool
    query_match: bool
    category_match: bool
    title_score: float
    n_attr_matched: int
    n_attrs: int
    n_opt_matched: int
    n_opts: int
    price: float
    price_upper: float
    asin: str
    goal_asin: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def compute_reward(product: "Product", goal: "Goal", selected_options: Mapping[str, str]) -> RewardBreakdown:
    """The reward for buying ``product`` with ``selected_options`` (group -> value) for ``goal``."""
    kind = type_reward(product, goal)
    n_attr = sum(1 for a in goal.attributes if attribute_matched(a, product))
    n_opt = count_option_matches(selected_options.values(), goal.options)
    price_ok = product.price <= goal.price_upper
    total = (n_attr + n_opt + int(price_ok)) / (len(goal.attributes) + len(goal.options) + 1)
    return RewardBreakdown(
        reward=kind["r_type"] * total,
        r_type=kind["r_type"],
        r_att=n_attr / len(goal.attributes) if goal.attributes else 0.0,
        r_option=n_opt / len(goal.options) if goal.options else None,
        r_price=price_ok,
        query_match=kind["query_match"],
        category_match=kind["category_match"],
        title_score=kind["title_score"],
        n_attr_matched=n_attr,
        n_attrs=len(goal.attributes),
        n_opt_matched=n_opt,
        n_opts=len(goal.options),
        price=product.price,
        price_upper=goal.price_upper,
        asin=product.asin,
        goal_asin=goal.asin,
    )
