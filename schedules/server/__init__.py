"""What the Temporal server holds and is asked to do: schedule state, actions, runs, the sync lock."""
