"""Job families are found through the `scheduled_jobs.jobs` entry points (jobs/__init__.py),
and the engine's jobs are read beside any catalog (schedules/catalog/model.py).

Each test installs a family the way pip would leave it: a package and a `*.dist-info`
folder with its `entry_points.txt`, in a folder put on the path.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import jobs
from core.errors import CatalogError, JobFamilyError
from schedules.catalog.files import engine_catalog
from schedules.catalog.model import load_catalog
from tests.helpers import ROOT

KIND = '''
from pydantic import BaseModel
from activities.run.kinds import JobKind, PoolActivities
from activities.common.models import WorkInput, WorkResult


class Params(BaseModel):
    n: int = 1


class Work(PoolActivities):
    async def do_it(self, work: WorkInput, params: Params) -> WorkResult:
        """Do it."""
        raise NotImplementedError


KINDS = (JobKind({kind!r}, Work, activity="do_it"),)
'''


def install(site: Path, dist: str, points: dict[str, str], packages: dict[str, str]) -> None:
    """A distribution `dist` as pip installs it into `site`: its packages (name: the
    `__init__.py` text) and its entry points of the group."""
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in points.items())
    (info / "entry_points.txt").write_text(f"[{jobs.ENTRY_POINT_GROUP}]\n{lines}")
    for name, text in packages.items():
        (site / name).mkdir()
        (site / name / "__init__.py").write_text(text)


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on the path for this test's distributions, the registry read afresh (each
    test names its packages apart: an imported module stays in `sys.modules`)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    for cached in (jobs.families, jobs.kinds, jobs.runtime_kinds):
        cached.cache_clear()
    yield tmp_path
    for cached in (jobs.families, jobs.kinds, jobs.runtime_kinds):
        cached.cache_clear()


def test_a_user_family_is_found_beside_the_reference_ones_and_the_engines(site):
    install(site, "acme_jobs", {"acme": "acme_jobs"}, {"acme_jobs": KIND.format(kind="acme-sync")})
    (site / "acme_jobs" / "migrations").mkdir()
    found = jobs.families()
    assert {"outbox_relay", "runtime_dispatch", "invoice_reminders", "acme"} <= set(found)
    assert found["acme"].migrations is not None and found["acme"].demo is None
    assert jobs.kinds()["acme-sync"].params.model_fields.keys() == {"n"}


def test_the_engines_families_need_no_entry_point():
    assert {"outbox_relay", "runtime_dispatch"} <= set(jobs.ENGINE_FAMILIES)
    assert {"outbox-relay", "runtime-dispatch"} <= set(jobs.kinds())


def test_a_family_that_fails_to_import_is_named_in_one_line(site):
    install(site, "broken_jobs", {"broken": "broken_jobs"}, {"broken_jobs": "import nowhere\n"})
    with pytest.raises(JobFamilyError) as caught:
        jobs.families()
    assert str(caught.value) == (
        "job family entry point broken = 'broken_jobs' (scheduled_jobs.jobs) failed to "
        "import: ModuleNotFoundError: No module named 'nowhere'"
    )


def test_a_family_name_declared_twice_is_refused(site):
    install(site, "one", {"acme": "one_jobs"}, {"one_jobs": ""})
    install(site, "two", {"acme": "two_jobs"}, {"two_jobs": ""})
    with pytest.raises(JobFamilyError, match="job family 'acme' is declared twice"):
        jobs.families()


def test_an_engine_family_cannot_be_declared_again(site):
    install(site, "mine", {"outbox_relay": "mine_jobs"}, {"mine_jobs": ""})
    with pytest.raises(JobFamilyError, match="job family 'outbox_relay' is declared twice"):
        jobs.families()


def test_a_kind_declared_by_two_families_is_refused(site):
    install(
        site, "twice_jobs", {"twice": "twice_jobs"}, {"twice_jobs": KIND.format(kind="hourly-sync")}
    )
    with pytest.raises(JobFamilyError) as caught:
        jobs.kinds()
    assert str(caught.value) == (
        "job kind 'hourly-sync' is declared twice: by job family 'hourly_sync' and by 'twice'"
    )


def test_the_cli_says_which_family_failed_and_exits_2(tmp_path):
    install(tmp_path, "broken_jobs", {"broken": "broken_jobs"}, {"broken_jobs": "1 / 0\n"})
    done = subprocess.run(
        [sys.executable, "-m", "schedules", "validate"],
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: job family entry point broken = 'broken_jobs' (scheduled_jobs.jobs) failed "
        "to import: ZeroDivisionError: division by zero"
    ]


CATALOG = '[mine]\nkind = "hourly-sync"\ncron = "0 * * * *"\ntimezone = "UTC"\n'


def test_the_engines_jobs_come_with_every_catalog(tmp_path):
    path = tmp_path / "jobs.toml"
    path.write_text(CATALOG)
    assert [job.id for job in load_catalog(path)] == ["mine", *sorted(engine_catalog())]
    assert [job.id for job in load_catalog(path, engine=False)] == ["mine"]


def test_a_catalog_may_tune_an_engine_job_but_not_give_its_id_another_kind(tmp_path):
    path = tmp_path / "jobs.toml"
    path.write_text(
        CATALOG + '[outbox-relay]\nkind = "outbox-relay"\ninterval = "10s"\ntimezone = "UTC"\n'
    )
    relay = {job.id: job for job in load_catalog(path)}["outbox-relay"]
    assert relay.interval.total_seconds() == 10
    path.write_text(
        CATALOG
        + '[runtime-dispatch-2]\nkind = "hourly-sync"\ncron = "* * * * *"\ntimezone = "UTC"\n'
    )
    with pytest.raises(CatalogError) as caught:
        load_catalog(path)
    assert str(caught.value).startswith(
        "job 'runtime-dispatch-2': kind: 'hourly-sync' refused: this id is the engine's job "
        "of kind 'runtime-dispatch'"
    )


def test_the_setting_names_the_catalog_when_the_option_does_not(tmp_path):
    path = tmp_path / "jobs.toml"
    path.write_text(CATALOG)
    other = tmp_path / "other.toml"
    other.write_text(CATALOG.replace("[mine]", "[theirs]"))

    def validate(*argv: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "schedules", "validate", *argv],
            cwd=ROOT,
            env=os.environ | {"SCHEDULES_CATALOG": str(path)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert validate().startswith("catalog ok: 1 job(s): mine; and the engine's 5")
    assert validate("--catalog", str(other)).startswith("catalog ok: 1 job(s): theirs;")
    assert validate("--without-engine") == "catalog ok: 1 job(s): mine\n"


def test_the_worker_names_a_family_that_fails_to_import_and_exits_2(tmp_path):
    install(
        tmp_path, "late_jobs", {"late": "late_jobs"}, {"late_jobs": "raise RuntimeError('no')\n"}
    )
    done = subprocess.run(
        [sys.executable, "-m", "worker", "migrate"],
        cwd=ROOT,
        # Nothing listens there: the family is read before the database is.
        env=os.environ
        | {"PYTHONPATH": str(tmp_path), "DATABASE_URL": "postgresql://127.0.0.1:1/x"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "error: job family entry point late = 'late_jobs' (scheduled_jobs.jobs) failed to "
        "import: RuntimeError: no"
    ]
