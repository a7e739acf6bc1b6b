"""Where training keeps what it builds once and reuses (models prepared from their packages, the warm start,
the precision probe).

The rule, the same as `agentgym.cache`'s (that package cannot be imported
from here): ``$OPENMANUS_CACHE`` when it is set to a non-empty value, else
``~/.cache/openmanus_rl``; an empty value counts as unset.  It is read on every
call, so a change of the variable takes effect at once.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "OPENMANUS_CACHE"


def cache_root() -> Path:
    """``$OPENMANUS_CACHE``, or ``~/.cache/openmanus_rl`` when it is unset or empty."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "openmanus_rl")
