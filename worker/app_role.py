"""The application role the workers connect as, created by the migration step.

Migrations need the database's owner (DDL); the workers and the CLI need only rows. So
`python -m worker migrate`, given `APP_DATABASE_ROLE` and `APP_DATABASE_PASSWORD`, creates
that role (or resets its password and attributes) and grants it the least privilege in
`worker/sql/app_role.sql`, after the migrations, in one transaction. Run again, it changes
nothing but the password. docs/deploy.md says who connects as which role.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from core.errors import MigrationError
from core.sql import queries

_Q = queries("worker.sql", "app_role")


def ensure_app_role(conninfo: str, role: str, password: str) -> bool:
    """Create or update `role` with `password` and its grants; True if it was created."""
    if not role.strip():
        raise MigrationError("APP_DATABASE_ROLE: is empty")
    if not password:
        raise MigrationError(f"APP_DATABASE_PASSWORD: is required to create the role {role!r}")
    names = {"role": sql.Identifier(role), "password": sql.Literal(password)}
    with psycopg.connect(conninfo, autocommit=True) as conn:
        database = conn.info.dbname
        with conn.transaction():
            created = conn.execute(_Q["exists"], {"role": role}).fetchone() is None
            statement = _Q["create"] if created else _Q["alter"]
            try:
                conn.execute(sql.SQL(statement).format(**names))
            except psycopg.errors.InsufficientPrivilege:
                raise MigrationError(
                    f"cannot create the application role {role!r}: the migration's "
                    "DATABASE_URL must be the database's owner with CREATEROLE"
                ) from None
            conn.execute(
                sql.SQL(_Q["grant"]).format(
                    role=sql.Identifier(role), database=sql.Identifier(database)
                )
            )
    return created
