"""`python -m schedules init DIR` writes a project from the template, or refuses in one line
and writes nothing (the project itself is installed and run by
tests/integration/test_init_project.py)."""

from __future__ import annotations

import ast
import tomllib
from importlib import metadata

import pytest

from schedules.cli.main import main
from schedules.starter import package_name, requirement, write_project
from worker.migrate import _NAME as MIGRATION_NAME


def test_the_project_has_a_family_its_catalog_and_tests(tmp_path, capsys):
    where = tmp_path / "Acme-Jobs"

    assert main(["init", str(where)]) == 0

    out = capsys.readouterr().out
    assert out.startswith(f"wrote 9 file(s) into {where} (package acme_jobs):"), out
    written = sorted(str(p.relative_to(where)) for p in where.rglob("*") if p.is_file())
    assert written == [
        "README.md",
        "acme_jobs/__init__.py",
        "acme_jobs/activities.py",
        "acme_jobs/migrations/0001_sales.sql",
        "acme_jobs/queries.sql",
        "catalog.toml",
        "pyproject.toml",
        "tests/conftest.py",
        "tests/test_job.py",
    ]
    assert not [p for p in written if "{{" in (where / p).read_text()]
    for path in where.rglob("*.py"):
        ast.parse(path.read_text(), filename=str(path))
    assert MIGRATION_NAME.match("0001_sales.sql")
    project = tomllib.loads((where / "pyproject.toml").read_text())["project"]
    version = metadata.version("scheduled-jobs")
    assert project["name"] == "acme-jobs"
    assert project["dependencies"] == [f"scheduled-jobs{requirement(version)}"]
    assert (
        f"scheduled-jobs[local]{requirement(version)}" in project["optional-dependencies"]["test"]
    )
    assert project["entry-points"]["scheduled_jobs.jobs"] == {"acme_jobs": "acme_jobs"}
    catalog = tomllib.loads((where / "catalog.toml").read_text())
    assert catalog["daily-sales-totals"]["kind"] == "daily-sales-totals"
    conftest = (where / "tests" / "conftest.py").read_text()
    assert 'pytest_plugins = ["devstack.pytest_plugin"]' in conftest


@pytest.mark.parametrize(
    ("version", "wanted"),
    [("0.1.0", ">=0.1.0,<0.2"), ("0.12.3", ">=0.12.3,<0.13"), ("1.4.0", ">=1.4.0,<2")],
)
def test_the_dependency_is_this_release_line(version, wanted):
    assert requirement(version) == wanted


@pytest.mark.parametrize(
    ("name", "package"), [("acme", "acme"), ("Acme-Jobs", "acme_jobs"), ("a.b c", "a_b_c")]
)
def test_a_name_gives_its_package(name, package):
    assert package_name(name) == package


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--name", "9lives"], "error: --name '9lives': a project name is ASCII letters"),
        (["--name", "_x"], "error: --name '_x': a project name is ASCII letters"),
        (["--name", "class"], "error: --name 'class': a project name is ASCII letters"),
        (["--name", "jobs"], "error: --name 'jobs': package 'jobs' would hide a package of"),
        (["--name", "json"], "error: --name 'json': package 'json' would hide a standard module"),
    ],
)
def test_a_bad_name_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, argv, error):
    where = tmp_path / "new"
    assert main(["init", str(where), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(error) and err.count("\n") == 1, err
    assert not where.exists()


def test_a_directory_holding_anything_is_refused(tmp_path, capsys):
    where = tmp_path / "old"
    where.mkdir()
    (where / "notes.txt").write_text("mine")
    assert main(["init", str(where)]) == 2
    assert capsys.readouterr().err == (
        f"error: init: {where} is not empty; give a new or empty directory\n"
    )
    assert [p.name for p in where.iterdir()] == ["notes.txt"]
    assert main(["init", str(where / "notes.txt")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_an_empty_directory_is_written_into(tmp_path):
    where = tmp_path / "empty"
    where.mkdir()
    assert write_project(where, "shop").package == "shop"
    assert (where / "shop" / "activities.py").is_file()
