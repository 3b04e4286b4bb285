"""Bring the server's schedules in line with the catalog: plan, apply, attributes, safety."""
