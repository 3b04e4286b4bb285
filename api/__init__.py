"""The HTTP API of runtime schedules (issue 38): `python -m api serve`.

A FastAPI app (`api.app.create_app`) over the library `schedules.tenants`: every route is
a few lines over one library call. API keys (`api.keys`) scope each request to one tenant,
or to the operator role that sees every tenant. See docs/api.md.
"""
