"""`make psql`: psql, from the embedded PostgreSQL's own binaries, on the stack's database.

Connects to `DATABASE_URL` (by default the database `make run` starts, on 127.0.0.1:55432);
other arguments go to psql: `make psql ARGS='-c "SELECT count(*) FROM invoices"'`, or
`.venv/bin/python -m devstack.psql -c "SELECT ..."`. Works on any Python version's venv
(no path into site-packages to type).
"""

from __future__ import annotations

import os
import sys

from devstack.postgres import POSTGRES_BIN_PATH
from worker.settings import load_settings


def main(argv: list[str]) -> None:
    url = load_settings().database_url.get_secret_value()
    psql = str(POSTGRES_BIN_PATH / "psql")
    os.execv(psql, [psql, url, *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
