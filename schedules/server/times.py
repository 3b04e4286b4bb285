"""The server's own fire times of a schedule: `ListScheduleMatchingTimes`, paged and retried.

The one way this library asks the server when a schedule fires (`verify`, `backfill`,
the tests' model of the server). The server lists at most 1,000 times a call and answers
by querying the schedule's own workflow, which a loaded server may cancel or time out.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.workflowservice.v1 import (
    ListScheduleMatchingTimesRequest,
    ListScheduleMatchingTimesResponse,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from tenacity import AsyncRetrying, retry_if_exception, stop_after_delay, wait_exponential

from timing import TICK

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_PAGE = 1000  # the server lists at most this many times per call
_CALL_TIMEOUT = timedelta(seconds=30)
_RETRY_FOR = 120.0  # seconds a listing is retried on a busy server before it counts as failed
_BUSY = {
    # The server answers a listing by querying the schedule's own workflow; a loaded server
    # cancels or times out such a query, and a listing changes nothing: it is safe to ask again.
    RPCStatusCode.CANCELLED,
    RPCStatusCode.DEADLINE_EXCEEDED,
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.RESOURCE_EXHAUSTED,
}


def timestamp(instant: datetime) -> Timestamp:
    """`instant` as a protobuf `Timestamp`, to the microsecond."""
    seconds = (instant - _EPOCH) // timedelta(seconds=1)
    return Timestamp(seconds=seconds, nanos=instant.microsecond * 1000)


async def server_times(
    client: Client, schedule_id: str, start: datetime, end: datetime
) -> list[datetime]:
    """Every time in `[start, end)` the server's schedule fires (jittered, as it lists
    them), paged past the server's 1,000 per call."""
    found: list[datetime] = []
    after = start - TICK  # the server reads (start, end]; its times are whole seconds
    while True:
        request = ListScheduleMatchingTimesRequest(
            namespace=client.namespace,
            schedule_id=schedule_id,
            start_time=timestamp(after),
            end_time=timestamp(end - TICK),
        )
        response = await list_matching_times(client, request)
        page = [t.ToDatetime(tzinfo=UTC) for t in response.start_time]
        found += page
        if len(page) < _PAGE:
            return found
        after = page[-1]


async def list_matching_times(
    client: Client, request: ListScheduleMatchingTimesRequest
) -> ListScheduleMatchingTimesResponse:
    """One `ListScheduleMatchingTimes` call, asked again while the server is too busy to
    answer (for up to two minutes); any other error, or a busy server past that, raises."""
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(lambda e: isinstance(e, RPCError) and e.status in _BUSY),
        stop=stop_after_delay(_RETRY_FOR),
        wait=wait_exponential(multiplier=0.2, max=5),
        reraise=True,
    ):
        with attempt:
            return await client.workflow_service.list_schedule_matching_times(
                request, timeout=_CALL_TIMEOUT
            )
    raise AssertionError("unreachable: tenacity reraises")
