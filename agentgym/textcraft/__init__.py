"""TextCraft, Minecraft-like crafting (AgentGym's TextCraft protocol): spec only (`spec.py`); no server in this project yet."""
