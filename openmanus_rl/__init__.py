"""openmanus_rl: the agent side of RL training against AgentGym-style env servers.

* ``openmanus_rl.envs``: HTTP clients for both AgentGym protocol families, the env registry, a load-balancing pool.
* ``openmanus_rl.agent``: ``OpenManusAgent`` (batched multi-turn rollouts into training-ready ``DataProto``s),
  ``AgentConfig``, action templates and chat-template pieces.
* ``openmanus_rl.rewards``: reward components, the composer and token-level allocation.
* ``openmanus_rl.records``: per-step JSONL trajectory records and the static HTML viewer.
"""
