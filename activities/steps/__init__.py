"""The steps of a workflow job on the activity side, each recorded under its slot (`record`)."""
