"""Apply the numbered `.sql` migrations, each exactly once: the engine's, shipped in
`worker/migrations`, then each job family's own (`<family package>/migrations/`, jobs/).

Replicas may start together: every runner takes one Postgres advisory lock, so the first
applies what is missing and the others find it done. The engine's migrations come first,
in version order, recorded in `schema_migrations`; then each family's, by family name and
version, recorded in `family_migrations` (family, version). A family numbers its own from
0001: it never needs to know the engine's numbers or another family's.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

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
    # The job family whose `migrations/` folder holds it; None: the engine's own.
    family: str | None = None

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()

    @property
    def label(self) -> str:
        """`0003_invoices`, or `family:0001_orders` for a family's."""
        own = f"{self.version:04d}_{self.name}"
        return own if self.family is None else f"{self.family}:{own}"


def read_migrations(folder: Traversable, family: str | None = None) -> list[Migration]:
    """Every migration file of `folder` in version order, rejecting malformed names and
    gaps (a family's, `family`, named in the errors)."""
    where = "" if family is None else f"job family {family!r}: "
    migrations = []
    for entry in folder.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = _NAME.match(entry.name)
        if not match:
            raise MigrationError(f"{where}migration file name {entry.name!r} is not NNNN_name.sql")
        migrations.append(Migration(int(match[1]), match[2], entry.read_text(), family))
    migrations.sort(key=lambda m: m.version)
    for expected, migration in enumerate(migrations, start=1):
        if migration.version != expected:
            raise MigrationError(
                f"{where}migration {expected:04d} is missing before {migration.version:04d}"
            )
    return migrations


def load_migrations() -> list[Migration]:
    """The engine's migrations (`worker/migrations`), in version order."""
    return read_migrations(resources.files("worker.migrations"))


def load_family_migrations() -> list[Migration]:
    """Every job family's migrations (its package's `migrations/` folder), by family name,
    then version."""
    from jobs import families  # found on first use, as the worker and the CLI find them

    found = []
    for name, family in families().items():
        if family.migrations is not None:
            found += read_migrations(family.migrations, name)
    return found


_Q = queries("worker.sql", "migrate")


def apply_migrations(conninfo: str) -> list[Migration]:
    """Apply the missing migrations under the advisory lock, the engine's then the
    families'; return those applied here."""
    engine, families = load_migrations(), load_family_migrations()
    applied_here = []
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(_Q["lock"], {"key": MIGRATION_LOCK_KEY})
        try:
            if not conn.execute(_Q["table_exists"]).fetchone()[0]:
                conn.execute(_Q["create_table"])
            done = {(None, v): c for v, c in conn.execute(_Q["applied"]).fetchall()}
            applied_here += _apply_missing(conn, engine, done)
            if families:  # the engine's 0028 made their table
                done = {(f, v): c for f, v, c in conn.execute(_Q["family_applied"]).fetchall()}
                applied_here += _apply_missing(conn, families, done)
        finally:
            conn.execute(_Q["unlock"], {"key": MIGRATION_LOCK_KEY})
    return applied_here


def _apply_missing(
    conn: psycopg.Connection,
    migrations: list[Migration],
    done: dict[tuple[str | None, int], str],
) -> list[Migration]:
    """Apply each of `migrations` not in `done` ((family, version): checksum), each in its
    own transaction with its record; refuse one changed after it was applied."""
    applied = []
    for migration in migrations:
        checksum = done.get((migration.family, migration.version))
        if checksum is not None:
            if checksum != migration.checksum:
                raise MigrationError(
                    f"migration {migration.label} was changed after it was applied; add a "
                    "new migration instead"
                )
            continue
        with conn.transaction():
            try:
                conn.execute(migration.sql)
            except psycopg.errors.InsufficientPrivilege:
                raise MigrationError(
                    f"migration {migration.label} is not applied and this role may not "
                    "change the schema: run `python -m worker migrate` as the database's "
                    "owner first (the deploy's migration step)"
                ) from None
            record = "record" if migration.family is None else "family_record"
            conn.execute(
                _Q[record],
                {
                    "family": migration.family,
                    "version": migration.version,
                    "name": migration.name,
                    "checksum": migration.checksum,
                },
            )
        told = {"version": migration.version, "migration": migration.name}
        if migration.family is not None:
            told["family"] = migration.family
        logger.info("applied migration", extra=told)
        applied.append(migration)
    return applied
