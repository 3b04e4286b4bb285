"""What a run does about what it did not see: the missed fire times before it (`missed`),
the backfills the server was asked for and the slots it dropped (`backfills`), and the
run's notes for the Temporal UI (`run_notes`).
"""
