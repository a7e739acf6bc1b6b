"""Sokoban environment: the board, its rules and the level generator (`data`), the game (`env`), a solver and
oracle (`plan`) and HTTP routes (`app`)."""
