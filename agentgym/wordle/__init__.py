"""Wordle environment: word lists, colour rule and tasks (`data`, with answers.txt and guesses.txt), the game
(`env`), the oracle and a solver (`plan`); served under /wordle by `agentgym.lmrlgym.app`."""
