"""The catalog: the TOML model of the jobs, and its compilation to Temporal schedules (pure)."""
