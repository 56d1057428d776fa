"""Replay: a change run again on the journal's recorded inputs, before and after, and how the results differ."""
