"""Is every job healthy: check (on time), verify (fires as intended), explain (one slot)."""
