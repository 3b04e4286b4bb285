"""A namespace of a test's own on the session's dev server: its schedules stay out of the
other tests' listings, and nothing needs deleting (the server lives in memory)."""

from __future__ import annotations

import uuid

from google.protobuf.duration_pb2 import Duration
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client

from core.payloads import data_converter


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
