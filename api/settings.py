"""The API process's settings: the worker's (the same `DATABASE_URL`, pool size, quotas,
`TEMPORAL_*`), plus where it listens and what it lets one key do."""

from __future__ import annotations

from pydantic import Field, SecretStr

from worker.settings import Settings, load_settings


class ApiSettings(Settings):
    """Every knob of `python -m api serve`: the worker's settings and `API_*`."""

    api_host: str = "127.0.0.1"
    api_port: int = Field(default=8088, ge=1, le=65535)
    # Per key, per replica (api/limits.py): the sustained rate and the burst a key may send.
    api_rate_per_second: float = Field(default=50.0, gt=0, le=100_000)
    api_rate_burst: int = Field(default=100, ge=1, le=1_000_000)
    # A request body larger than this is refused (413) before it is read further.
    api_max_body_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    # The dashboard (api/pages/session.py): the key that signs its session cookies (unset:
    # one random per process); a reverse proxy's identity header, believed only from the
    # proxy's address (both unset: off).
    api_session_secret: SecretStr | None = None
    api_proxy_user_header: str | None = None
    api_trusted_proxy: str | None = None
    # The Temporal Web UI's address: the health page links each run to its page there
    # (`<url>/namespaces/<TEMPORAL_NAMESPACE>/workflows/...`). Default: the dev stack's.
    temporal_ui_url: str = "http://localhost:8233"


def load_api_settings() -> ApiSettings:
    """`ApiSettings` from the environment, or one readable `SettingsError`."""
    return load_settings(ApiSettings)
