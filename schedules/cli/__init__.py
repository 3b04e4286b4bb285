"""`python -m schedules`: the operator CLI on top of the library, one module per command."""
