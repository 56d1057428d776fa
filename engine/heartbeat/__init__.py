"""The heartbeat: its schedule and its ticks."""
