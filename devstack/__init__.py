"""The embedded local stack: Temporal dev server and PostgreSQL from PyPI packages.

Used by `make run` and by the test fixtures, so both start servers the same way.
"""

from devstack.ports import PortInUseError, free_port, require_free_port
from devstack.postgres import EmbeddedPostgres
from devstack.temporal import TemporalDevServer

__all__ = [
    "EmbeddedPostgres",
    "PortInUseError",
    "TemporalDevServer",
    "free_port",
    "require_free_port",
]
