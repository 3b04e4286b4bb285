"""The wheel `pip wheel` builds from a clean export of the tree, and a fresh venv holding it,
once per test session: what `deploy/Dockerfile`'s `pip install .` and a user's
`pip install scheduled-jobs` install (tests/integration/test_installed_wheel.py,
tests/integration/test_init_project.py).

Enabled as a plugin by tests/conftest.py: its fixtures are the session's.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.helpers.worker import settings_env
from worker.settings import Settings


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


def installed_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The settings' environment, with nothing that would put the checkout on sys.path."""
    env = settings_env(settings, **extra)
    for name in [name for name in env if name.startswith("PYTHON")]:
        del env[name]
    return env | {"PYTHONUNBUFFERED": "1"}


def venv_site_packages(python: Path) -> Path:
    """The site-packages folder of the venv whose interpreter is `python`."""
    code = "import sysconfig; print(sysconfig.get_path('purelib'))"
    return Path(run([python, "-c", code]).stdout.strip())


def pip_install(python: Path, *args: str | Path) -> None:
    """Install into `python`'s venv with this interpreter's pip: the venv needs none of its
    own, and packages come from PyPI through pip's cache."""
    run([sys.executable, "-m", "pip", "--python", python, "install", "-q", *args], timeout=600)


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel` builds from a clean export of the tree."""
    export = tmp_path_factory.mktemp("export")
    for name in tracked():
        (export / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, export / name)
    dist = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "--wheel-dir", dist, export])
    shutil.rmtree(export)
    (built,) = dist.glob("*.whl")
    return built


@pytest.fixture(scope="session")
def installed_wheel_venv(
    built_wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """The interpreter of a fresh venv holding the wheel (not editable) and its runtime
    dependencies only: nothing else may be installed into it (a test that needs more
    layers a venv of its own over it, `layered_venv`)."""
    venv = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    interpreter = venv / "bin" / "python"
    pip_install(interpreter, built_wheel)
    yield interpreter
    shutil.rmtree(venv)  # 125 MB, and pytest keeps the last three sessions' directories


def layered_venv(base: Path, where: Path) -> Path:
    """A fresh venv at `where` that sees everything installed in `base`'s venv (a `.pth`
    file names its site-packages) and installs into its own: the wheel's runtime install,
    shared, stays as it is. Its interpreter."""
    run([sys.executable, "-m", "venv", "--without-pip", where])
    interpreter = where / "bin" / "python"
    (venv_site_packages(interpreter) / "_base_venv.pth").write_text(f"{venv_site_packages(base)}\n")
    return interpreter
