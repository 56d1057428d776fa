"""evolve's engine: the hook, tool and heartbeat runtime for self-modifying opencode agents."""

__version__ = "0.1.0"
