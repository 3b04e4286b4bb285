"""How a Temporal call fails: transient errors worth retrying, and a transport error's gist.

One policy for every caller: the CLI's retries for a starting cluster, sync, check.
"""

from __future__ import annotations

import re

from temporalio.service import RPCError, RPCStatusCode

from core import redact

# `... Os { code: 111, kind: ConnectionRefused, message: "Connection refused" } ...`
_OS_MESSAGE = re.compile(r'(?:message|error): "([^"]+)"')

_TRANSIENT = {
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.DEADLINE_EXCEEDED,
    RPCStatusCode.RESOURCE_EXHAUSTED,
    RPCStatusCode.INTERNAL,  # a fresh server's "shard status unknown"
}


def nobody_there(exc: BaseException) -> bool:
    """A connection attempt that nothing at the address accepted, or a name that no DNS
    server knows: waiting a few seconds changes neither."""
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("refused" in text or "lookup address" in text)


def transport_cause(exc: BaseException) -> str:
    """The gist of a transport error: the OS's message inside the SDK's Rust error text."""
    text = str(exc)
    found = _OS_MESSAGE.findall(text)
    if found:
        return redact.scrub(found[-1])
    first = (text.strip().splitlines() or [type(exc).__name__])[0]
    return redact.scrub(first[:200])


def transient(exc: BaseException) -> bool:
    if isinstance(exc, RPCError):
        # gRPC's "received message larger than max" is RESOURCE_EXHAUSTED, and final.
        return exc.status in _TRANSIENT and "larger than max" not in (exc.message or "")
    return isinstance(exc, RuntimeError)  # the SDK's "failed client connect"
