"""A new project of scheduled jobs, written from the template in `template/`
(`python -m schedules init DIR`): a package that is a job family (its kinds, params
models, SQL and migration), its catalog, and its tests on scheduled-jobs' pytest plugin.

The template's files end in `.tmpl` (so this package ships them as data and nothing
imports or collects them); `{{package}}`, `{{project}}`, `{{requirement}}` and
`{{requirement_local}}` in them are replaced, and its `package/` folder is named after the
package.
"""

from __future__ import annotations

import keyword
import re
import sys
from importlib import metadata, resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import NamedTuple

from core.errors import SchedulerError

DISTRIBUTION = "scheduled-jobs"
# The top-level packages of scheduled-jobs: a project's package must not hide one.
TAKEN = frozenset(
    {"core", "timing", "activities", "workflows", "jobs", "worker", "schedules", "devstack"}
)
_SUFFIX = ".tmpl"
# A job family's name (the entry point's), which is the package's.
_PACKAGE = re.compile(r"[a-z][a-z0-9_]*")


class InitError(SchedulerError):
    """Bad input to `init`: the directory or the name (exit 2)."""

    exit_code = 2


def package_name(name: str) -> str:
    """The Python package `name` gives (`Acme-Jobs` -> `acme_jobs`), or `InitError` naming
    the value and what is wrong with it."""
    normalised = re.sub(r"[-. ]+", "_", name.strip()).lower()
    if not _PACKAGE.fullmatch(normalised) or keyword.iskeyword(normalised):
        raise InitError(
            f"--name {name!r}: a project name is ASCII letters, digits, '-', '_' or '.', "
            "starting with a letter (it names the Python package and the job family)"
        )
    if normalised in TAKEN or normalised in sys.stdlib_module_names:
        raise InitError(
            f"--name {name!r}: package {normalised!r} would hide "
            f"{'a package of scheduled-jobs' if normalised in TAKEN else 'a standard module'}"
            "; choose another name"
        )
    return normalised


def requirement(version: str) -> str:
    """The version range of scheduled-jobs compatible with `version`: the same minor
    release line before 1.0 (`>=0.1.0,<0.2`), the same major one after."""
    major, minor = (int(part) for part in re.findall(r"\d+", version)[:2])
    upper = f"{major + 1}" if major >= 1 else f"0.{minor + 1}"
    return f">={version},<{upper}"


class Project(NamedTuple):
    package: str
    files: list[Path]


def write_project(directory: Path, name: str | None = None) -> Project:
    """Write a new project into `directory` (absent or empty); its package and files.

    `name` (default: the directory's name) gives the package and the project's names.
    Raises `InitError` for a directory that holds anything or is a file, or a bad name,
    before writing anything.
    """
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        what = "is not a directory" if not directory.is_dir() else "is not empty"
        raise InitError(f"init: {directory} {what}; give a new or empty directory")
    package = package_name(name if name is not None else directory.resolve().name)
    wanted = requirement(metadata.version(DISTRIBUTION))
    values = {
        "{{package}}": package,
        "{{project}}": package.replace("_", "-"),
        "{{requirement}}": f"{DISTRIBUTION}{wanted}",
        "{{requirement_local}}": f"{DISTRIBUTION}[local]{wanted}",
    }
    written = []
    for relative, source in _template_files(resources.files(__package__) / "template"):
        target = directory / Path(*relative).with_suffix("")
        if relative[0] == "package":
            target = directory / package / Path(*relative[1:]).with_suffix("")
        text = source.read_text()
        for marker, value in values.items():
            text = text.replace(marker, value)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        written.append(target)
    return Project(package, written)


def _template_files(
    folder: Traversable, under: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], Traversable]]:
    found = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.is_dir():
            found += _template_files(entry, (*under, entry.name))
        elif entry.name.endswith(_SUFFIX):
            found.append(((*under, entry.name), entry))
    return found
