"""The package as it ships: the wheel built from a clean export of the tree, installed
non-editable into a fresh venv, once per test session (a pytest plugin: tests/conftest.py
names it in `pytest_plugins`, so every test module shares the one session fixture).

`installed_wheel_venv` is that venv, untouched by the tests: a test that installs more (a
user's own package of jobs) makes a venv of its own on top of it (`InstalledWheel.overlay`),
so nothing it installs leaks into another test.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import ROOT


def run(argv: list, **kwargs) -> subprocess.CompletedProcess:
    """Run `argv` to completion; fail the test with its output unless it exits 0."""
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, (argv, done.returncode, done.stdout, done.stderr)
    return done


def tracked(*paths: str) -> list[str]:
    """The files git tracks (under `paths`), as the working tree has them: CI's clean
    clone has nothing else, and a build here must not see .venv, caches or stray files."""
    listed = run(["git", "ls-files", "-z", "--", *paths], cwd=ROOT).stdout
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def site_packages(python: Path) -> Path:
    """The site-packages folder of the venv whose interpreter is `python`."""
    return run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout


@dataclass(frozen=True)
class InstalledWheel:
    """The built wheel, and the interpreter of the venv it is installed in."""

    wheel: Path
    python: Path

    def overlay(self, where: Path) -> Path:
        """A new venv at `where` that sees this one's packages (a `.pth` line naming its
        site-packages) and gets its own installs: its interpreter."""
        run([self.python, "-m", "venv", "--without-pip", where])
        python = where / "bin" / "python"
        base = site_packages(self.python).strip()
        Path(site_packages(python).strip(), "scheduled_jobs_wheel.pth").write_text(base + "\n")
        return python


@pytest.fixture(scope="session")
def installed_wheel_venv(tmp_path_factory) -> Iterator[InstalledWheel]:
    """The wheel `pip wheel` builds from a clean export of the tree, installed (not
    editable) into a fresh venv with its runtime dependencies only. The venv gets no pip of
    its own: this interpreter's installs into it, so nothing but the wheel's requirements
    lands there (from PyPI, through pip's cache)."""
    export = tmp_path_factory.mktemp("export")
    for name in tracked():
        (export / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, export / name)
    dist = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "--wheel-dir", dist, export])
    shutil.rmtree(export)
    (built,) = dist.glob("*.whl")
    venv = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    interpreter = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", interpreter, "install", "-q", built])
    yield InstalledWheel(built, interpreter)
    shutil.rmtree(venv)  # 125 MB, and pytest keeps the last three sessions' directories
