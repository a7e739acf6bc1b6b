"""Scripted expert policies that write demonstrations in the agent's own reply formats.

`get_expert(env_name)` builds the registered `Expert` of an env;
`format_reply` writes an expert's action as a model reply for an action
template.  `ExpertGenerator` stands in for the model inside `OpenManusAgent`
(so demonstrations are tokenised by the agent's own code), and
`evaluate_expert` plays an expert over HTTP and reports its success rate.
"""

from agentgym.webshop.expert import WebShopExpert

from .registry import EXPERTS, Expert, format_reply, get_expert, register_expert, reply
from .rollout import ExpertGenerator, ExpertScore, ExpertTurn, evaluate_expert, last_observation, split_task_ids

__all__ = [
    "EXPERTS",
    "Expert",
    "ExpertGenerator",
    "ExpertScore",
    "ExpertTurn",
    "WebShopExpert",
    "evaluate_expert",
    "format_reply",
    "get_expert",
    "last_observation",
    "register_expert",
    "reply",
    "split_task_ids",
]
