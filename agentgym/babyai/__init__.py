"""BabyAI grid-world missions (AgentGym's BabyAI protocol): spec only (`spec.py`); no server in this project yet."""
