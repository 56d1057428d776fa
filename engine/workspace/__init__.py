"""The workspace: its layout and files, the config, path safety, the write lock, and what changes in it while the engine runs."""
