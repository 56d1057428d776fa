"""opencode and its sessions: the client of its API, connections, the stage logic of its plugin hooks, tool calls, sessions, notifications."""
