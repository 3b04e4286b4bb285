"""The search attributes sync writes on each schedule, and what it does where it cannot.

`ScheduledJobsDigest` (a digest of everything sync set on the schedule) lets a re-sync trust
the listing instead of describing every schedule; `ScheduledJobsTiming` lets `check` read
since when each schedule's timing is in force. Sync registers both in the namespace when
they are missing. Where it cannot (a hosted namespace without operator permissions), or a
server refuses a write for them, the schedule is written without them and every job is
described instead: correct, only slower, and said once per process.

`ScheduledJobsOutcome` is not written by sync: a run that did no work sets it on itself
(`workflows.run_notes`), once the namespace has it; sync registers it like the others.
"""

from __future__ import annotations

import logging
from typing import Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import (
    Client,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from activities.catchup.run_notes import OUTCOME_ATTRIBUTE
from activities.runtime.models import RUNTIME_ATTRIBUTES
from schedules.catalog.compile import (
    DIGEST_ATTRIBUTE,
    TIMING_ATTRIBUTE,
)
from schedules.server.retry import transient_rpc

logger = logging.getLogger(__name__)


_KEYWORD = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD


_warned: set[Any] = set()  # logged once: (namespace, attribute) pairs unusable, "write"
# What goes without each attribute, said when it is unusable.
_WITHOUT = {
    DIGEST_ATTRIBUTE.name: "sync describes every schedule instead (correct, slower)",
    OUTCOME_ATTRIBUTE.name: "runs that did no work look like work done in the UI's lists",
}


async def digest_attribute(client: Client, register: bool) -> bool:
    """Whether schedules in the client's namespace can carry the digest search attribute.

    With `register`, a missing attribute is added (a namespace change, so a dry run does
    not). False where it is missing and cannot be added, or cannot even be listed (a
    hosted namespace without operator permissions): sync then describes every job, and
    says so once per process.
    """
    return await _keyword_attribute(client, DIGEST_ATTRIBUTE.name, register)


async def timing_attribute(client: Client, register: bool) -> bool:
    """Whether schedules can carry `ScheduledJobsTiming` (registered like the digest). Where
    they cannot, `check` describes every schedule instead: correct, slower."""
    return await _keyword_attribute(client, TIMING_ATTRIBUTE.name, register)


async def runtime_attributes(client: Client, register: bool) -> bool:
    """Whether runtime schedules' runs can carry their search attributes (tenant, schedule,
    kind: `activities.runtime.models`), registered like the digest, so the Temporal UI
    filters one customer's runs. Where they cannot, the dispatcher starts runs without."""
    found = [await _keyword_attribute(client, key.name, register) for key in RUNTIME_ATTRIBUTES]
    return all(found)


async def outcome_attribute(client: Client, register: bool) -> bool:
    """Whether runs can mark themselves with `ScheduledJobsOutcome` (registered like the
    digest). Where they cannot, a run that did no work looks like work done in the UI's
    lists; its details and result still say it."""
    return await _keyword_attribute(client, OUTCOME_ATTRIBUTE.name, register)


async def _keyword_attribute(client: Client, name: str, register: bool) -> bool:
    namespace = client.namespace
    operator = client.operator_service

    async def registered() -> IndexedValueType.ValueType | None:
        listed = await operator.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
        return listed.custom_attributes.get(name)

    try:
        found = await registered()
        if found is None and register:
            try:
                await operator.add_search_attributes(
                    AddSearchAttributesRequest(
                        namespace=namespace, search_attributes={name: _KEYWORD}
                    )
                )
                found = _KEYWORD
            except RPCError:
                found = await registered()
                if found is None:  # not added by a concurrent sync either
                    raise
    except RPCError as err:
        if transient_rpc(err):  # the server not (yet) reachable: the caller retries the sync
            raise
        _warn_once(
            namespace, name, f"cannot list or register it ({err.status.name}: {err.message})"
        )
        return False
    if found is None:  # not registered, and not asked to
        return False
    if found != _KEYWORD:
        kind = IndexedValueType.Name(found)
        _warn_once(namespace, name, f"it exists with type {kind}, not Keyword")
        return False
    return True


def _warn_once(namespace: str, name: str, why: str) -> None:
    if (namespace, name) in _warned:
        return
    _warned.add((namespace, name))
    without = _WITHOUT.get(name, "check describes every schedule instead (correct, slower)")
    logger.warning(
        "search attribute %s is not usable in namespace %s: %s; %s. To fix: temporal "
        "operator search-attribute create --namespace %s --name %s --type Keyword",
        name,
        namespace,
        why,
        without,
        namespace,
        name,
        extra={"namespace": namespace, "search_attribute": name},
    )


def with_digest(
    attributes: TypedSearchAttributes, digest: str, timing: str | None = None
) -> TypedSearchAttributes:
    """The schedule's search attributes with the digest and `ScheduledJobsTiming` set (None:
    removed) (an update replaces them all)."""
    ours = {DIGEST_ATTRIBUTE.name, TIMING_ATTRIBUTE.name}
    kept = [pair for pair in attributes if pair.key.name not in ours]
    pairs = [*kept, SearchAttributePair(DIGEST_ATTRIBUTE, digest)]
    if timing is not None:
        pairs.append(SearchAttributePair(TIMING_ATTRIBUTE, timing))
    return TypedSearchAttributes(pairs)


def refused_digest(err: RPCError) -> bool:
    """Whether the server refused the write for one of sync's search attributes (not for
    anything else, such as its size: that is refused again without them)."""
    message = err.message or ""
    return err.status == RPCStatusCode.INVALID_ARGUMENT and (
        DIGEST_ATTRIBUTE.name in message or TIMING_ATTRIBUTE.name in message
    )


def without_digest(job_id: str, err: RPCError) -> None:
    # Right after the attribute is registered a server may not accept it yet; the schedule
    # is written without it and described again by the next sync. Said once, not per job.
    first = "write" not in _warned
    _warned.add("write")
    logger.log(
        logging.WARNING if first else logging.DEBUG,
        "schedule %s: written without search attribute %s (%s); the next sync describes it",
        job_id,
        DIGEST_ATTRIBUTE.name,
        err.message,
        extra={"job": job_id},
    )
