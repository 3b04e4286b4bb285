"""The Temporal client, built from settings, always with the pydantic data converter."""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, Interceptor
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode, TLSConfig
from tenacity import AsyncRetrying, retry_if_exception, stop_after_delay, wait_exponential

from core.errors import SettingsError
from core.payloads import data_converter
from worker.settings import Settings

_STARTING_UP = {RPCStatusCode.INTERNAL, RPCStatusCode.UNAVAILABLE}


def _tls(settings: Settings) -> TLSConfig | bool:
    paths = {
        "TEMPORAL_TLS_CLIENT_CERT_PATH": settings.temporal_tls_client_cert_path,
        "TEMPORAL_TLS_CLIENT_KEY_PATH": settings.temporal_tls_client_key_path,
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": settings.temporal_tls_server_ca_cert_path,
    }
    if not any(paths.values()):
        return settings.temporal_tls or settings.temporal_api_key is not None
    contents = {}
    for name, path in paths.items():
        try:
            contents[name] = path.read_bytes() if path else None
        except OSError as exc:  # read here, not with the settings: mounted at run time
            raise SettingsError(f"{name}: cannot read {str(path)!r}: {exc.strerror}") from None
    cert, key, ca = contents.values()
    return TLSConfig(client_cert=cert, client_private_key=key, server_root_ca_cert=ca)


async def check_namespace(client: Client, settings: Settings) -> None:
    """A `SettingsError` naming `TEMPORAL_NAMESPACE` if the server has no such namespace.

    Without this, a worker on a missing namespace polls in vain forever and a command fails
    with a server error deep inside. A key that may not describe namespaces (a hosted
    namespace's narrow API key) is given the benefit of the doubt.
    """
    request = DescribeNamespaceRequest(namespace=settings.temporal_namespace)
    try:
        async for attempt in AsyncRetrying(
            # A freshly started server answers "shard status unknown" for a few seconds.
            retry=retry_if_exception(
                lambda e: isinstance(e, RPCError) and e.status in _STARTING_UP
            ),
            stop=stop_after_delay(10),
            wait=wait_exponential(multiplier=0.1, max=1),
            reraise=True,
        ):
            with attempt:
                await client.workflow_service.describe_namespace(request)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise SettingsError(
                f"TEMPORAL_NAMESPACE: namespace {settings.temporal_namespace!r} does not exist "
                f"on {settings.temporal_address}"
            ) from None
        if err.status != RPCStatusCode.PERMISSION_DENIED:
            raise


async def connect(
    settings: Settings,
    *,
    interceptors: Sequence[Interceptor] = (),
    runtime: Runtime | None = None,
) -> Client:
    """Connect to Temporal as the settings say (TLS and API key for a hosted cluster).

    `interceptors` and `runtime` come from `worker.telemetry`: a worker built on this
    client inherits the interceptors, and the runtime carries the SDK's own metrics. The
    namespace is checked to exist (`check_namespace`). A server that cannot be reached
    raises the SDK's `RuntimeError` (callers retry it or say so).
    """
    api_key = settings.temporal_api_key.get_secret_value() if settings.temporal_api_key else None
    client = await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=data_converter,
        api_key=api_key,
        tls=_tls(settings),
        interceptors=interceptors,
        runtime=runtime,
    )
    await check_namespace(client, settings)
    return client
