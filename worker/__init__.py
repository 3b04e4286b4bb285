"""The worker process: settings, Temporal client, migrations and `python -m worker`."""
