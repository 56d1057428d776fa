"""Hooks: finding them, the two protocols, running one, a stage across them, validating a candidate against its test."""
