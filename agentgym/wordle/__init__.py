"""Wordle (AgentGym's LMRL-Gym wordle protocol, under /wordle): spec only (`spec.py`); no server in this project yet."""
