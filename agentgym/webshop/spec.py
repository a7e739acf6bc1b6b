"""WebShop: how clients and the agent see it; the server is `agentgym.webshop.app`."""

from agentgym.spec import EnvSpec
from agentgym.tools import EnvTool, text

SPEC = EnvSpec(
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
    tools=(
        EnvTool(
            "search",
            "Type keywords into the search box (only on a page that has one).",
            "search[{query}]",
            {"query": text("the keywords, e.g. waterproof hiking boots for men")},
        ),
        EnvTool(
            "click",
            "Click something shown on the page: a product id, an option value or a button.",
            "click[{target}]",
            {
                "target": text(
                    "exactly as the page shows it, e.g. B0123ABCDE, large, Next >, "
                    "Back to Search, Description or Buy Now"
                )
            },
        ),
    ),
    probe_actions=(
        "search[red shoes]",
        "click[back to search]",
        "click[next >]",
        "click[description]",
        "click[< prev]",
        "search[women's shirt]",
        "click[buy now]",
    ),
    app="agentgym.webshop.app",
    tasks="agentgym.webshop.data:task_list",
    splits="test: goals 0-499, dev: 500-699, train: 700 onwards",
    expert="agentgym.webshop.expert:WebShopExpert",
    max_turns=8,  # its expert's episodes on train tasks take 3-7 actions
)
