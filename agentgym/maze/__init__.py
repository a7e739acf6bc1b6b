"""Maze walking (AgentGym's LMRL-Gym maze protocol, under /maze): spec only (`spec.py`); no server in this project yet."""
