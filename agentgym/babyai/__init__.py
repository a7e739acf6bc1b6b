"""BabyAI environment: levels and tasks (`data`), the game on minigrid (`env`), its view in words (`view`), path
finding and the oracle (`plan`) and HTTP routes (`app`)."""
