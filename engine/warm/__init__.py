"""Warm starts of Python hooks: ready interpreters, and the code they run (never imported by the engine)."""
