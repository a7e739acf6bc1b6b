"""SQL questions over databases (AgentGym's SqlGym protocol): spec only (`spec.py`); no server in this project yet."""
