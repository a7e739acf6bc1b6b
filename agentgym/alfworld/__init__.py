"""ALFWorld household tasks (AgentGym's ALFWorld protocol): spec only (`spec.py`); no server in this project yet."""
