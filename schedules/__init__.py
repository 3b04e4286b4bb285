"""The job catalog, its compilation to Temporal schedules, and the operator CLI."""
