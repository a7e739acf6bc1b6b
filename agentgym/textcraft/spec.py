"""TextCraft, Minecraft-like crafting (AgentGym's TextCraft protocol): how clients and the agent see it; the server
is `agentgym.textcraft.app`."""

from agentgym.spec import EnvSpec
from agentgym.tools import EnvTool, integer, text

SPEC = EnvSpec(
    name="textcraft",
    family="B",
    reset_field="data_idx",
    action_pattern=r"(get \d+ .+|craft .+ using .+|inventory)",
    instructions=(
        "You craft items in a Minecraft-like world. The first observation lists crafting commands and the goal item.\n"
        "Actions (one per turn):\n"
        "- get <count> <item>: take base items (ones no crafting command makes), e.g. get 2 oak logs\n"
        "- craft <count> <item> using <count> <item>, ...: use one crafting command exactly as listed, "
        "e.g. craft 4 stick using 2 planks; where it names a kind of item such as planks, name the specific one "
        "you hold instead, e.g. craft 4 stick using 2 oak planks\n"
        "- inventory: show what you hold.\n"
        "You succeed when you hold the goal item."
    ),
    tools=(
        EnvTool(
            "get",
            "Take base items (ones no crafting command makes).",
            "get {count} {item}",
            {"count": integer("how many"), "item": text("the item, e.g. oak logs")},
        ),
        EnvTool(
            "craft",
            "Use one crafting command as listed, naming the specific items you hold for a kind of item.",
            "craft {count} {item} using {ingredients}",
            {
                "count": integer("how many the command makes"),
                "item": text("the item it makes, e.g. stick"),
                "ingredients": text("what it uses, with counts, comma-separated, e.g. 2 oak planks"),
            },
        ),
        EnvTool("inventory", "Show what you hold.", "inventory"),
    ),
    probe_actions=(
        "inventory",
        "get 1 oak log",
        "craft 4 oak planks using 1 oak log",
        "get 2 stick",
        "dance",
    ),
    app="agentgym.textcraft.app",
    tasks="agentgym.textcraft.data:task_list",
    splits="a fixed-seed permutation of the 544 goals: test 100 tasks, dev 50, train the other 394",
    expert="agentgym.textcraft.expert:TextCraftExpert",
    max_turns=12,  # its expert takes 4.3 actions on average on test tasks (deeper recipes than train)
)
