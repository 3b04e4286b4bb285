"""A namespace of a test's own on the session's dev server: its schedules stay out of the
other tests' listings, and nothing needs deleting (the server lives in memory)."""

from __future__ import annotations

import uuid
from typing import Any

from google.protobuf.duration_pb2 import Duration
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client

from core.payloads import data_converter
from devstack.postgres import EmbeddedPostgres
from worker.settings import Settings


async def fresh_namespace(client: Client, prefix: str) -> Client:
    """A client of a new namespace `<prefix>-<random>` on `client`'s server."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=name, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    return await Client.connect(
        client.service_client.config.target_host,
        namespace=name,
        data_converter=data_converter,
    )


async def fleet_of_its_own(
    client: Client, postgres: EmbeddedPostgres, prefix: str, **fields: Any
) -> tuple[Client, Settings]:
    """A fleet of a test's own on `client`'s server and `postgres`: a client of a fresh
    namespace, and settings naming it, a fresh task queue and a new empty database (all
    `<prefix>`-named); `fields`: other settings (a stopping worker waits 30 s for its work
    unless one says)."""
    namespace = await fresh_namespace(client, prefix)
    settings = Settings(
        temporal_address=client.service_client.config.target_host,
        temporal_namespace=namespace.namespace,
        temporal_task_queue=f"{prefix}-{uuid.uuid4().hex[:8]}",
        database_url=postgres.create_database(f"{prefix}_{uuid.uuid4().hex[:8]}"),
        **({"worker_graceful_shutdown_seconds": 30} | fields),
    )
    return namespace, settings
