"""TextCraft, Minecraft-like crafting (AgentGym's TextCraft protocol): the spec; no server in this project yet."""

from agentgym.spec import EnvSpec

SPEC = EnvSpec(
    name="textcraft",
    family="B",
    reset_field="data_idx",
    action_pattern=r"(get .+|craft .+|inventory)",
    instructions=(
        "You craft items in a Minecraft-like world. The first observation lists crafting recipes and the goal item.\n"
        "Actions: get <count> <item> (take a base item), craft <target> using <ingredients> (apply a recipe "
        "exactly as listed), inventory (show what you hold). You succeed when you hold the goal item."
    ),
)
