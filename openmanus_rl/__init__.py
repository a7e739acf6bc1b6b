"""openmanus_rl package."""
