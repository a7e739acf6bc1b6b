"""LMRL-Gym's server: Maze (`agentgym.maze`) and Wordle (`agentgym.wordle`) on one app (`app`), under /maze and
/wordle."""
