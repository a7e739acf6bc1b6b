"""ALFWorld household tasks on the real engine (``alfworld``'s PDDL domain and grammar, played by TextWorld's PDDL
engine): games generated offline from ALFWorld's room layouts (`generate`), task ids and splits (`data`), the game
(`env`), the planner's plan as oracle (`plan`) and HTTP routes (`app`)."""
