"""agentgym package."""
