"""Changes and git: the store, commits with trailers, the review gate, the history the operator sees, provenance, and repair after a crash."""
