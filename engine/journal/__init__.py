"""The SQLite journal."""
