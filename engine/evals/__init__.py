"""Behaviour checks: the workspace's scenarios (`evals/*.jsonc`) run through the real harness at the
version before a change and after it, and compared (docs/evals.md)."""
