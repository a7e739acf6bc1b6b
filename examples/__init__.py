"""Agent programs for ``data.rollout=gateway``, importable from the repository root
(``+agent.program=examples.<module>:play``)."""
