"""What every service shares: the event bus, what the engine is busy with, work it started without waiting, JSON as it takes it in and gives it out."""
