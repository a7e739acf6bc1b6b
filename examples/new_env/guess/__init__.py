"""Guess the number: the whole environment of the "add an environment" recipe (docs/environments.md).

Copied to ``agentgym/guess/``, it is served (`app`), listed, turned into datasets, played by its expert and
checked by the shared env tests, with no other file edited."""
