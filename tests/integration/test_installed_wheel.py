"""What ships is what is tested (issue 37): the wheel built from a clean export of the tree,
installed non-editable into a fresh venv, run from a directory outside the checkout against
the session's real servers, as `deploy/Dockerfile`'s `pip install .` and its Jobs run it.

Every other test imports this checkout (an editable install, run from the checkout), which
hides a file the wheel leaves out: `schedules/tenants/store.sql` was left out, and every
installed `python -m schedules` command failed on import while CI was green.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import tomllib
import zipfile
from datetime import date, timedelta
from pathlib import Path

import httpx
import psycopg
import pytest
from temporalio.service import RPCError

from devstack import free_port
from tests.helpers import ROOT, TEMPLATE_DB, assert_eventually
from tests.helpers.wheel import InstalledWheel, run, tracked
from tests.helpers.worker import WorkerProcess, settings_env
from tests.integration.jobs import insert_invoices
from tests.integration.namespaces import fleet_of_its_own
from worker.settings import Settings

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# The top-level packages the wheel ships: packages.find's patterns, `core*` -> `core`.
PACKAGES = sorted(
    pattern.rstrip("*")
    for pattern in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
)


# The local stack (`make run`, the test servers) needs the `[local]` extra; the rest is the
# runtime: what the image, the Kubernetes Jobs and an application's own install run.
LOCAL_STACK = "devstack"
IMPORT_EVERY_MODULE = """
import importlib, pkgutil, sys
for top in sys.argv[1:]:
    for module in pkgutil.walk_packages(importlib.import_module(top).__path__, top + "."):
        importlib.import_module(module.name)
"""


@pytest.fixture(scope="module")
def wheel(installed_wheel_venv: InstalledWheel) -> Path:
    """The wheel `pip wheel` builds from a clean export of the tree (tests/helpers/wheel.py)."""
    return installed_wheel_venv.wheel


@pytest.fixture(scope="module")
def python(installed_wheel_venv: InstalledWheel) -> Path:
    """The interpreter of a fresh venv holding the wheel (not editable) and its runtime
    dependencies only."""
    return installed_wheel_venv.python


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working directory outside the checkout: nothing of the tree is importable from it."""
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    assert not cwd.resolve().is_relative_to(ROOT)
    return cwd


def installed_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The settings' environment, with nothing that would put the checkout on sys.path."""
    env = settings_env(settings, **extra)
    for name in [name for name in env if name.startswith("PYTHON")]:
        del env[name]
    return env | {"PYTHONUNBUFFERED": "1"}


def test_the_wheel_holds_every_file_of_the_packages_and_nothing_else(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(set(tracked(*PACKAGES)) - names)
    assert not missing, (
        f"{wheel.name} leaves out {missing}: a file type the code reads belongs in "
        "pyproject.toml's [tool.setuptools.package-data] rule"
    )
    shipped = {
        name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")
    }
    assert shipped == set(PACKAGES), shipped


def test_the_runtime_install_carries_no_test_or_local_stack_dependency(python, outside):
    """Playwright, the schema validators, pytest and the embedded servers stay in `[dev]` and
    `[local]`; every runtime module imports without them."""
    listing = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.metadata['Name']: d.read_text('direct_url.json') "
        "for d in m.distributions()}))"
    )
    found = json.loads(run([python, "-c", listing], cwd=outside).stdout)

    def canonical(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    installed = {canonical(name) for name in found}
    extras = PYPROJECT["project"]["optional-dependencies"]
    optional = {
        canonical(re.match(r"[A-Za-z0-9._-]+", req)[0]) for reqs in extras.values() for req in reqs
    }
    assert not installed & optional, sorted(installed & optional)
    direct = json.loads(found["scheduled-jobs"])
    assert not direct.get("dir_info", {}).get("editable"), direct
    where = run([python, "-c", "import schedules; print(schedules.__file__)"], cwd=outside)
    assert Path(where.stdout.strip()).is_relative_to(python.parent.parent), where.stdout
    # No runtime module needs more than the runtime dependencies to import.
    runtime = [package for package in PACKAGES if package != LOCAL_STACK]
    run([python, "-c", IMPORT_EVERY_MODULE, *runtime], cwd=outside)


async def test_the_installed_package_migrates_syncs_runs_and_audits(
    wheel, python, outside, postgres, client, tmp_path
):
    # An empty database: the installed `worker migrate` builds it.
    namespace, settings = await fleet_of_its_own(client, postgres, "wheel")
    database_url = settings.database_url.get_secret_value()
    # The relay's mail goes to a port nothing listens on, not to a local stack's mail sink.
    env = installed_env(settings, SMTP_PORT=str(free_port()))
    packaged = zipfile.ZipFile(wheel)
    # The reference catalog and the engine's jobs, which every sync registers beside it.
    catalog = {
        **tomllib.loads(packaged.read("schedules/jobs.toml").decode()),
        **tomllib.loads(packaged.read("schedules/engine.toml").decode()),
    }

    def installed(*argv: str) -> str:
        done = run([python, "-m", *argv], cwd=outside, env=env, timeout=300)
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout

    installed("worker", "migrate")
    applied = "SELECT version, name, checksum FROM schema_migrations ORDER BY version"
    with psycopg.connect(postgres.url(TEMPLATE_DB)) as template:
        expected = template.execute(applied).fetchall()
    db = psycopg.connect(database_url, autocommit=True)
    assert db.execute(applied).fetchall() == expected  # every migration of the checkout

    # The packaged catalog, every job of it, firing by the clock as deployed.
    installed("schedules", "sync")
    for job_id in catalog:
        await namespace.get_schedule_handle(job_id).describe()
    worker = WorkerProcess(env, tmp_path / "worker.log", python=python, cwd=outside)
    try:
        worker.wait_ready()
        insert_invoices(db, 5, due=date.today() - timedelta(days=3))
        waited = installed("schedules", "trigger", "invoice-reminders", "--wait")
        assert "completed" in waited and "reminded 5" in waited, waited
        last = waited.strip().splitlines()[-1]
        assert last == "1 run(s) of invoice-reminders: 1 ran or had nothing to do", waited

        (customer,) = db.execute(
            "INSERT INTO customers (tenant, name, email, timezone) "
            "VALUES ('acme', 'Acme', 'ops@acme.example', 'Europe/London') RETURNING id"
        ).fetchone()
        created = installed(
            *("schedules", "tenants", "create", "--tenant", "acme", "--name", "weekly"),
            *("--kind", "weekly-report", "--cron", "0 8 * * 1", "--timezone", "Europe/London"),
            *("--params", json.dumps({"customer_id": customer})),
        )
        assert created.startswith("created rt-"), created
        stored = db.execute("SELECT tenant, name, kind FROM runtime_schedules").fetchall()
        assert stored == [("acme", "weekly", "weekly-report")]

        # As the audit CronJob runs it: exit 0 is no finding; the triggered run's row is read.
        summary = installed("schedules", "audit").strip().splitlines()[-1]
        assert summary.startswith("audit: 0 finding(s);"), summary
        assert int(re.search(r"(\d+) row\(s\) read", summary)[1]) >= 1, summary
    finally:
        stopped = worker.stop()
        db.close()
        for job_id in catalog:
            try:
                await namespace.get_schedule_handle(job_id).delete()
            except RPCError:
                pass
    assert stopped == 0, worker.log.read_text()[-3000:]  # drained on SIGTERM, exit 0


async def test_the_installed_api_serves_keys_and_schedules_over_http(
    python, outside, settings, db, tmp_path
):
    """The API as deployed runs it (deploy/k8s's `python -m api serve`, compose's `api`):
    from the wheel's venv, outside the checkout; a key made with the installed `python -m
    api keys create`; a schedule created and read over HTTP, its change authored by the key."""
    port = free_port()
    env = installed_env(settings, API_PORT=str(port))
    created = run([python, "-m", "api", "keys", "create", "--tenant", "acme"], cwd=outside, env=env)
    key = created.stdout.strip().splitlines()[-1]
    assert created.stdout.startswith("created key ") and key.startswith("sjk_"), created.stdout
    (customer,) = db.execute(
        "INSERT INTO customers (tenant, name, email, timezone) "
        "VALUES ('acme', 'Acme', 'ops@acme.example', 'Europe/London') RETURNING id"
    ).fetchone()
    log = tmp_path / "api.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [python, "-m", "api", "serve"], cwd=outside, env=env, stdout=out, stderr=out
        )
    base = f"http://127.0.0.1:{port}"
    try:

        async def ready():
            assert server.poll() is None, log.read_text()
            try:
                assert httpx.get(f"{base}/readyz", timeout=5).status_code == 200
            except httpx.TransportError as exc:
                raise AssertionError(f"not serving yet: {exc}") from None

        await assert_eventually(ready, timeout=60)
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as http:
            made = http.post(
                "/v1/schedules",
                json={
                    "name": "weekly",
                    "kind": "weekly-report",
                    "cron": "0 8 * * 1",
                    "timezone": "Europe/London",
                    "params": {"customer_id": customer},
                },
            )
            assert made.status_code == 201, made.text
            read = http.get(made.headers["Location"])
            assert read.status_code == 200 and read.json() == made.json()
            assert (read.json()["tenant"], read.json()["version"]) == ("acme", 1)
    finally:
        server.terminate()
        stopped = server.wait(30)
    # uvicorn shuts down on SIGTERM (requests finished, the pool closed), then raises the
    # signal again, as a process killed by it would end.
    assert stopped in (0, -signal.SIGTERM), log.read_text()[-3000:]
    assert "Application shutdown complete" in log.read_text(), log.read_text()[-3000:]
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
    key_id = key.split("_")[1]
    changes = db.execute("SELECT action, by FROM runtime_schedule_changes").fetchall()
    assert changes == [("create", f"api-key:{key_id}")]
