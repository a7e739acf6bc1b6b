"""FrozenLake environment: maps and tasks (`data`), the game on gymnasium (`env`), a path finder and oracle (`plan`)
and HTTP routes (`app`)."""
