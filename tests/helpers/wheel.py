"""The package as it ships: wheels of this project built from a clean export of a tree (the
working tree, or an earlier commit for tests/integration/test_upgrade.py), installed
non-editable into fresh venvs, run from a directory outside the checkout.

`installed_wheel_venv` builds the working tree's wheel once per test session (a pytest
plugin: tests/conftest.py names it in `pytest_plugins`, so every test module shares it).

`installed_wheel_venv` is that venv, untouched by the tests: a test that installs more (a
user's own package of jobs) makes a venv of its own on top of it (`InstalledWheel.overlay`),
so nothing it installs leaks into another test.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
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


def export_tree(out: Path) -> Path:
    """The working tree's tracked files, copied to `out`."""
    for name in tracked():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, out / name)
    return out


def export_commit(commit: str, out: Path) -> Path:
    """The tree of `commit` (`git archive`), unpacked in `out`. No such commit in this
    clone fails the test: a clone without the history (`--depth 1`) cannot run it."""
    found = subprocess.run(
        ["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True
    )
    assert found.returncode == 0, (
        f"commit {commit} is not in {ROOT}: this test needs main's history "
        "(a full clone, e.g. actions/checkout with fetch-depth: 0)"
    )
    with tempfile.TemporaryFile() as archive:
        subprocess.run(["git", "archive", commit], cwd=ROOT, stdout=archive, check=True)
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(out, filter="data")
    return out


def build_wheel(source_dir: Path, out_dir: Path) -> Path:
    """The wheel `pip wheel` builds from `source_dir`, in `out_dir`."""
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "--wheel-dir",
            out_dir,
            source_dir,
        ]
    )
    (built,) = Path(out_dir).glob("*.whl")
    return built


def make_venv(directory: Path, wheels: list[Path]) -> Path:
    """A fresh venv in `directory` holding `wheels` (not editable) and their runtime
    dependencies only; its interpreter. The venv gets no pip of its own: this one installs
    into it, so nothing but the wheels' requirements lands there (through pip's cache)."""
    run([sys.executable, "-m", "venv", "--without-pip", directory])
    interpreter = Path(directory) / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", interpreter, "install", "-q", *wheels])
    return interpreter


def venv_with(python: Path, directory: Path, wheel: Path) -> Path:
    """A venv in `directory` like `python`'s, with `wheel` installed in place of the
    release of the same project there, and any requirement the wheel adds; its
    interpreter. Hard links make the copy cheap (a fresh venv's install costs 10-30 s), and
    pip only ever unlinks and writes files, so the original venv is left as it was."""
    run(["cp", "-al", Path(python).parent.parent, directory])
    interpreter = Path(directory) / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", interpreter, "install", "-q"]
    run([*pip, "--no-deps", "--force-reinstall", wheel])
    run([*pip, wheel])  # a requirement the new release adds
    return interpreter


def installed_env(env: dict[str, str]) -> dict[str, str]:
    """`env` without anything that would put the checkout on sys.path (PYTHONPATH and the
    like): a process run with it, from a directory outside the checkout, imports the
    installed release."""
    return {k: v for k, v in env.items() if not k.startswith("PYTHON")} | {"PYTHONUNBUFFERED": "1"}


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
    export = export_tree(tmp_path_factory.mktemp("export"))
    built = build_wheel(export, tmp_path_factory.mktemp("dist"))
    shutil.rmtree(export)
    venv = tmp_path_factory.mktemp("venv")
    interpreter = make_venv(venv, [built])
    yield InstalledWheel(built, interpreter)
    shutil.rmtree(venv)  # 125 MB, and pytest keeps the last three sessions' directories
