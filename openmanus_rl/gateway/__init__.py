"""An OpenAI-compatible rollout gateway: any agent program, talking to the chat-completions API, as the
trainer's rollout, with the exact tokens the engine sampled (`GatewayRollout`, `Gateway`)."""

from .config import GatewayConfig
from .rollout import GatewayRollout
from .server import Gateway

__all__ = ["Gateway", "GatewayConfig", "GatewayRollout"]
