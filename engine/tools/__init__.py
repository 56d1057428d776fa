"""The agent's tools: parameter schemas, the builtins, hook tools, and edits that are validated and committed."""
