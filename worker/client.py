"""The Temporal client, built from settings, always with the pydantic data converter."""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.client import Client, Interceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime
from temporalio.service import TLSConfig

from worker.settings import Settings


def _tls(settings: Settings) -> TLSConfig | bool:
    paths = (
        settings.temporal_tls_client_cert_path,
        settings.temporal_tls_client_key_path,
        settings.temporal_tls_server_ca_cert_path,
    )
    if not any(paths):
        return settings.temporal_tls or settings.temporal_api_key is not None
    cert, key, ca = (p.read_bytes() if p else None for p in paths)
    return TLSConfig(client_cert=cert, client_private_key=key, server_root_ca_cert=ca)


async def connect(
    settings: Settings,
    *,
    interceptors: Sequence[Interceptor] = (),
    runtime: Runtime | None = None,
) -> Client:
    """Connect to Temporal as the settings say (TLS and API key for a hosted cluster).

    `interceptors` and `runtime` come from `worker.telemetry`: a worker built on this
    client inherits the interceptors, and the runtime carries the SDK's own metrics.
    """
    api_key = settings.temporal_api_key.get_secret_value() if settings.temporal_api_key else None
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=pydantic_data_converter,
        api_key=api_key,
        tls=_tls(settings),
        interceptors=interceptors,
        runtime=runtime,
    )
