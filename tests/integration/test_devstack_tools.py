"""The local stack's helpers: the webhook receiver and `make psql`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

from devstack import free_port
from devstack.webhooks import WebhookSink, newest
from tests.helpers import ROOT


def post(url: str, key: str, body: dict) -> int:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Idempotency-Key": key},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


def test_the_webhook_receiver_keeps_each_delivery_once_without_the_urls_query(tmp_path):
    sink = WebhookSink(free_port(), directory=tmp_path / "hooks").start()
    try:
        body = {"id": "m1", "type": "ReconciliationAlert", "payload": {"day": "2026-11-30"}}
        assert post(sink.url + "?token=s3cret", "m1", body) == 200
        assert post(sink.url + "?token=s3cret", "m1", body) == 200  # a redelivery
        assert post(sink.url, "m2", body | {"id": "m2"}) == 200
    finally:
        sink.stop()
    files = sorted((tmp_path / "hooks").glob("*.json"))
    assert len(files) == 2 and len(sink.received) == 2
    assert "s3cret" not in "".join(f.read_text() for f in files)
    (first, second) = newest(tmp_path / "hooks", 10)
    assert "ReconciliationAlert  m1" in first and second.endswith("m2")


def test_psql_runs_on_the_database_url(database_url, db):
    db.execute("CREATE TABLE hello (word text)")
    db.execute("INSERT INTO hello VALUES ('there')")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DATABASE_")}
    done = subprocess.run(
        [sys.executable, "-m", "devstack.psql", "-tA", "-c", "SELECT word FROM hello"],
        cwd=ROOT,
        env=env | {"DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "there"
