"""Hooks failing at a stage: from the first failed run to the next good one, and the change most likely behind it."""
