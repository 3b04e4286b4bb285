"""What the operator commands read from PostgreSQL, and how its errors name their setting."""

from __future__ import annotations

import os


def database_hint() -> str:
    """Which setting a PostgreSQL error is about: `DATABASE_URL`, or, when it is not set,
    that the local stack's default was tried (a newcomer outside `make run`)."""
    if os.environ.get("DATABASE_URL", "").strip():
        return "(DATABASE_URL)"
    return "(DATABASE_URL is not set, so the local stack's default was tried)"
