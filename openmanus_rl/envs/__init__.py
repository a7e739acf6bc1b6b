"""Env clients for AgentGym servers (both protocol families), registered by env name, and a load-balancing pool."""

from .addresses import ADDRESSES, ServerAddresses
from .client import EnvClient, StepResult
from .errors import (
    EnvCapacityError,
    EnvClientError,
    EnvConnectionError,
    EnvProtocolError,
    EnvRequestError,
    EnvServerError,
    EnvTimeoutError,
    EnvUnavailableError,
    NoEnvServerError,
)
from .http import JsonHttp, RetryPolicy
from .pool import EnvPool
from .specs import ENV_SPECS, EnvSpec, get_env_spec, register_env

__all__ = [
    "ADDRESSES",
    "ENV_SPECS",
    "EnvCapacityError",
    "EnvClient",
    "EnvClientError",
    "EnvConnectionError",
    "EnvPool",
    "EnvProtocolError",
    "EnvRequestError",
    "EnvServerError",
    "EnvSpec",
    "EnvTimeoutError",
    "EnvUnavailableError",
    "JsonHttp",
    "NoEnvServerError",
    "RetryPolicy",
    "ServerAddresses",
    "StepResult",
    "get_env_spec",
    "register_env",
]
