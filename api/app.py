"""The HTTP API's app: `create_app(settings)`, served by `python -m api serve` (uvicorn).

Where things go (the api/ README):
- `api/routes/`: one router per resource (`schedules.py`: `/v1/schedules`; `tenants.py`:
  a tenant's limits and notice channels, `/v1/tenants/{tenant}/...`), each route a
  few lines over one library call (`schedules.tenants`); shared pieces in `common.py`.
- `api/pages/`: the operator's server-rendered pages (the dashboard), Jinja2 templates
  next to their routes, on this same app.
- `api/auth.py` (who calls: the `caller` dependency), `api/keys.py` (the keys),
  `api/problems.py` (every error as problem+json), `api/limits.py` (rate, body size and
  type), `api/deps.py` (the request's pooled connection, the settings).
- `api/openapi.json`: the committed contract (tests/unit/test_api_openapi.py diffs it).

The lifespan opens the connection pool the worker uses (`worker.pool`), with the same
settings (`DATABASE_URL`, `DATABASE_POOL_SIZE`, ...); it does not wait for the database:
`/readyz` says whether it answers (503 when not), `/healthz` only that the process serves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from api import problems
from api.deps import Conn
from api.limits import BodyLimits, RateLimiter
from api.pages import install as install_pages
from api.routes import actions, bulk, schedules, tenants
from api.schemas import components
from api.settings import ApiSettings
from worker.pool import connection_pool

TITLE = "scheduled-jobs runtime schedules"
VERSION = "1"


def create_app(settings: ApiSettings) -> FastAPI:
    """The app over `settings`' database; its pool opens with the app's lifespan."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # A request waits for a free connection no longer than a connection may take.
        wait = float(settings.database_connect_timeout_seconds)
        async with connection_pool(settings, timeout=wait) as pool:
            app.state.pool = pool
            yield

    app = FastAPI(title=TITLE, version=VERSION, lifespan=lifespan)
    app.state.settings = settings
    app.state.rate_limiter = RateLimiter(settings.api_rate_per_second, settings.api_rate_burst)
    app.add_middleware(BodyLimits, max_bytes=settings.api_max_body_bytes)
    problems.install(app)
    app.include_router(schedules.router)
    app.include_router(actions.router)
    app.include_router(bulk.router)
    app.include_router(tenants.router)
    install_pages(app)  # the operator's dashboard, /ui (api/pages)
    app.add_api_route("/healthz", healthz, methods=["GET"], tags=["health"])
    app.add_api_route("/readyz", readyz, methods=["GET"], tags=["health"], responses=_READY)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


async def healthz() -> dict[str, str]:
    """Liveness: the process serves requests."""
    return {"status": "ok"}


_READY: dict[int | str, dict[str, Any]] = {503: {"description": "the database does not answer"}}


async def readyz(conn: Conn) -> JSONResponse:
    """Readiness: a connection of the pool answers a query."""
    await conn.execute("SELECT 1")
    return JSONResponse({"status": "ready"})


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, with the library's models as components (`api.schemas`)."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        document = get_openapi(title=app.title, version=app.version, routes=app.routes)
        document.setdefault("components", {}).setdefault("schemas", {}).update(components())
        app.openapi_schema = document
    return app.openapi_schema
