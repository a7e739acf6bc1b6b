"""ScienceWorld science tasks (AgentGym's SciWorld protocol): spec only (`spec.py`); no server in this project yet."""
