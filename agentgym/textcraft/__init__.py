"""TextCraft environment: recipes and tasks (`data`), the game (`env`), a planner and oracle (`plan`) and HTTP
routes (`app`)."""
