"""SQL questions over databases (AgentGym's SqlGym protocol): spec only (`spec.toml`); no server in this project yet."""
