"""Apply the numbered `.sql` migrations shipped in `worker/migrations`, each exactly once.

Replicas may start together: every runner takes one Postgres advisory lock, so the first
applies what is missing and the others find it done.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from importlib import resources

import psycopg

from core.errors import MigrationError
from core.sql import queries

logger = logging.getLogger(__name__)

# Any fixed 64-bit key works; this one spells "sched-mg".
MIGRATION_LOCK_KEY = 0x7363686564_2D6D67
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations() -> list[Migration]:
    """Read every migration file in version order, rejecting malformed names and gaps."""
    migrations = []
    for entry in resources.files("worker.migrations").iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = _NAME.match(entry.name)
        if not match:
            raise MigrationError(f"migration file name {entry.name!r} is not NNNN_name.sql")
        migrations.append(Migration(int(match[1]), match[2], entry.read_text()))
    migrations.sort(key=lambda m: m.version)
    for expected, migration in enumerate(migrations, start=1):
        if migration.version != expected:
            raise MigrationError(
                f"migration {expected:04d} is missing before {migration.version:04d}"
            )
    return migrations


_Q = queries("worker.sql", "migrate")


def apply_migrations(conninfo: str) -> list[Migration]:
    """Apply the missing migrations under the advisory lock; return those applied here."""
    migrations = load_migrations()
    applied_here = []
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(_Q["lock"], {"key": MIGRATION_LOCK_KEY})
        try:
            if not conn.execute(_Q["table_exists"]).fetchone()[0]:
                conn.execute(_Q["create_table"])
            done = dict(conn.execute(_Q["applied"]).fetchall())
            for migration in migrations:
                if migration.version in done:
                    if done[migration.version] != migration.checksum:
                        raise MigrationError(
                            f"migration {migration.version:04d}_{migration.name} was changed "
                            "after it was applied; add a new migration instead"
                        )
                    continue
                with conn.transaction():
                    try:
                        conn.execute(migration.sql)
                    except psycopg.errors.InsufficientPrivilege:
                        raise MigrationError(
                            f"migration {migration.version:04d}_{migration.name} is not "
                            "applied and this role may not change the schema: run `python -m "
                            "worker migrate` as the database's owner first (the deploy's "
                            "migration step)"
                        ) from None
                    conn.execute(
                        _Q["record"],
                        {
                            "version": migration.version,
                            "name": migration.name,
                            "checksum": migration.checksum,
                        },
                    )
                logger.info(
                    "applied migration",
                    extra={"version": migration.version, "migration": migration.name},
                )
                applied_here.append(migration)
        finally:
            conn.execute(_Q["unlock"], {"key": MIGRATION_LOCK_KEY})
    return applied_here
