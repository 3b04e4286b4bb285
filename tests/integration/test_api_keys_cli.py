"""`python -m api keys create | list | revoke` (issue 38, item 3): a key is printed once
and stored as a hash; bad input is one line and exit 2, with nothing written."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import psycopg

from tests.helpers import ROOT
from tests.helpers.worker import settings_env


def api_cli(settings, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "api", *args],
        cwd=ROOT,
        env=settings_env(settings),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_key_is_shown_once_stored_as_its_hash_listed_and_revoked(settings, database_url):
    made = api_cli(settings, "keys", "create", "--tenant", "acme", "--note", "billing")
    assert made.returncode == 0, made.stderr
    said, key = made.stdout.splitlines()
    assert said.startswith("created key ") and "tenant acme" in said
    prefix, key_id, secret = key.split("_", 2)
    assert prefix == "sjk" and len(secret) >= 43  # 32 random bytes, URL-safe base64
    with psycopg.connect(database_url) as conn:
        stored = conn.execute("SELECT * FROM api_keys").fetchall()
        (row,) = conn.execute(
            "SELECT secret_sha256, tenant, role FROM api_keys WHERE id = %s", (int(key_id),)
        ).fetchall()
    assert bytes(row[0]) == hashlib.sha256(secret.encode()).digest()
    assert (row[1], row[2]) == ("acme", "tenant")
    assert secret not in repr(stored)

    operator = api_cli(settings, "keys", "create", "--operator")
    assert operator.returncode == 0 and "operator" in operator.stdout
    listed = api_cli(settings, "keys", "list").stdout.splitlines()
    assert [line.split("\t")[:3] for line in listed] == [
        [key_id, "tenant acme", "active"],
        [str(int(key_id) + 1), "operator", "active"],
    ]
    assert secret not in "".join(listed)
    assert api_cli(settings, "keys", "revoke", key_id).returncode == 0
    assert "\trevoked " in api_cli(settings, "keys", "list").stdout.splitlines()[0]


def test_bad_input_is_one_line_and_exit_2(settings, database_url):
    for args, words in [
        (("keys", "create"), "one of the arguments --tenant --operator is required"),
        (("keys", "create", "--tenant", " acme"), "tenant: must be non-empty text"),
        (("keys", "revoke", "x"), "must be a key id like 12, got 'x'"),
        (("keys", "revoke", "424242"), "no API key has id 424242"),
    ]:
        done = api_cli(settings, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert words in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM api_keys").fetchone() == (0,)
