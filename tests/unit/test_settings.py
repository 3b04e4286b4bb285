"""Settings: clear one-line errors that name the variable and never show a secret."""

from __future__ import annotations

import pytest

from core.errors import SettingsError
from tests.helpers import python_m
from worker.settings import LOCAL_DATABASE_URL, load_settings


def test_defaults_match_the_local_stack(monkeypatch):
    for name in ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_TASK_QUEUE", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert settings.temporal_address == "localhost:7233"
    assert settings.temporal_namespace == "default"
    assert settings.temporal_task_queue == "scheduled-jobs"
    assert settings.database_url.get_secret_value() == LOCAL_DATABASE_URL


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("TEMPORAL_ADDRESS", "no-port-here", "'no-port-here'"),
        ("WORKER_GRACEFUL_SHUTDOWN_SECONDS", "soon", "'soon'"),
        ("DATABASE_POOL_SIZE", "0", "'0'"),
    ],
)
def test_a_malformed_value_names_the_variable_and_value(monkeypatch, name, value, shown):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert name in str(err.value) and shown in str(err.value)


def test_a_bad_database_url_never_shows_its_password(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "mysql://admin:hunter2-secret@db/jobs")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "DATABASE_URL" in str(err.value)
    assert "hunter2-secret" not in str(err.value)


@pytest.mark.parametrize("command", [["worker"], ["worker", "migrate"], ["schedules", "sync"]])
def test_entry_points_exit_2_with_one_line_on_bad_settings(command):
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": "mysql://admin:hunter2-secret@db/jobs"}
    done = python_m(command, env, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "DATABASE_URL" in lines[0]
    assert "hunter2-secret" not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("mysql://app:PW-s3cret@db/jobs", "must be a postgresql:// URL"),
        ("postgresql://app:PW-s3cret@[::1/db", 'matching "]" in IPv6 host address'),
        ("postgresql://app:PW-s3cret@db/jobs?colour=blue", 'invalid URI query parameter: "colour"'),
        ("postgresql://app:PW-s3cret@db:99999/jobs", "port that is not a number from 1 to 65535"),
        ("host=db password=PW-s3cret bogus=1", 'invalid connection option "bogus"'),
    ],
)
def test_a_malformed_database_url_is_refused_without_its_password(monkeypatch, url, why):
    monkeypatch.setenv("DATABASE_URL", url)
    with pytest.raises(SettingsError) as err:
        load_settings()
    text = str(err.value)
    assert text.startswith("invalid settings: DATABASE_URL: ") and why in text
    assert "PW-s3cret" not in text


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TEMPORAL_ADDRESS", "a@b@example.com:7233"),
        ("TEMPORAL_ADDRESS", "localhost:0"),
        ("TEMPORAL_ADDRESS", "local host:7233"),
        ("TEMPORAL_NAMESPACE", " "),
        ("TEMPORAL_TASK_QUEUE", "q" * 1001),
        ("WORKER_GRACEFUL_SHUTDOWN_SECONDS", "inf"),
        ("DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS", "nan"),
        ("SYNC_LOCK_SECONDS", "5"),
    ],
)
def test_each_malformed_setting_is_named(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert f"{name}: " in str(err.value) and "\n" not in str(err.value)
