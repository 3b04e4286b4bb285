"""Neutral modules every other package may use: the error hierarchy, the exported metric
names and the SQL loader. Imports nothing of the project's."""
