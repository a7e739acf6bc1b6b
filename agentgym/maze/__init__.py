"""Maze environment: the double-T map, start positions and tasks (`data`), the game (`env`), a path finder and
oracle (`plan`); served under /maze by `agentgym.lmrlgym.app`."""
