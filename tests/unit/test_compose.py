"""The container stack, checked where it cannot run.

`docker-compose.yml` and `deploy/Dockerfile` need a Docker daemon the test machines lack, so
these tests parse them and hold them to the code: the environment names are `Settings`
fields and their values validate, the commands are the real entry points, and the health,
start-order and shutdown wiring a deploy relies on is in place.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from psycopg.conninfo import conninfo_to_dict

from devstack.temporal import temporal_binary
from worker.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"

SERVICES = {"postgres", "temporal", "temporal-ui", "migrate", "worker"}
APP_SERVICES = ("migrate", "worker")
SETTINGS_VARS = frozenset(name.upper() for name in Settings.model_fields)
# Variables an app container may set that Settings does not read (a library's own, such as
# OTEL_* once telemetry exports). None yet: every app variable is a Settings field.
NON_SETTINGS_VARS: frozenset[str] = frozenset()
# What migrate and worker must agree on, or sync registers schedules nobody polls.
SHARED_SETTINGS = ("temporal_address", "temporal_namespace", "temporal_task_queue", "database_url")

_DEFAULTED = re.compile(r"\$\{[A-Za-z_]\w*:?-(?P<default>[^}]*)\}")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)")
_SECONDS_PER_UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def resolve(value: Any) -> Any:
    """`value` as Compose interpolates it with no `.env` file and nothing exported.

    Every `${VAR:-default}` becomes its default; `$$` is a literal `$`. Any other `$` form
    fails: the stack must come up on a fresh machine without configuration.
    """
    if isinstance(value, dict):
        return {key: resolve(item) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item) for item in value]
    if not isinstance(value, str):
        return value
    text = _DEFAULTED.sub(lambda m: m["default"], value.replace("$$", "\0"))
    assert "$" not in text, f"{value!r} interpolates a variable without a ${{VAR:-default}}"
    return text.replace("\0", "$")


def seconds(duration: str) -> float:
    """A Compose duration (`45s`, `1m30s`) in seconds."""
    parts = _DURATION_PART.findall(duration)
    assert parts, f"{duration!r} is not a Compose duration"
    assert "".join(n + unit for n, unit in parts) == duration, f"{duration!r} is not a duration"
    return sum(float(n) * _SECONDS_PER_UNIT[unit] for n, unit in parts)


@functools.cache
def services() -> dict[str, dict[str, Any]]:
    return resolve(yaml.safe_load(COMPOSE_FILE.read_text()))["services"]


def env(service: str) -> dict[str, str]:
    """A service's environment as a dict, whichever of Compose's two forms it uses."""
    raw = services()[service].get("environment", {})
    if isinstance(raw, list):
        raw = dict(item.partition("=")[::2] for item in raw)
    return {name: None if value is None else str(value) for name, value in raw.items()}


def settings_of(service: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The Settings a container of `service` would build, from its environment alone."""
    for name in SETTINGS_VARS:
        monkeypatch.delenv(name, raising=False)
    variables = env(service)
    passed_through = [name for name, value in variables.items() if value is None]
    assert not passed_through, f"{service} takes {passed_through} from the host: give values"
    return Settings(**{name.lower(): value for name, value in variables.items()})


def command_lines(service: str) -> list[list[str]]:
    """A service's command as argv lists; a `sh -c` script is split on `&&`."""
    command = services()[service]["command"]
    if isinstance(command, str):
        command = shlex.split(command)
    if command[:2] == ["sh", "-c"]:
        return [shlex.split(part) for part in command[2].split("&&")]
    return [command]


def one_shot_services() -> set[str]:
    return {name for name, service in services().items() if service.get("restart") == "no"}


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions, `(KEYWORD, arguments)`, grouped by build stage."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    stages: list[list[tuple[str, str]]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, arguments = line.partition(" ")
        if keyword.upper() == "FROM":
            stages.append([])
        stages[-1].append((keyword.upper(), arguments.strip()))
    return stages


def final_stage(keyword: str) -> list[str]:
    return [arguments for kw, arguments in dockerfile_stages()[-1] if kw == keyword]


def project_packages() -> list[str]:
    """Top-level packages pyproject.toml ships (`[tool.setuptools.packages.find] include`)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    return [pattern.rstrip("*") for pattern in patterns]


def help_probe(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m module *args --help`: argparse checks `args` against its choices first."""
    return subprocess.run(
        [sys.executable, "-m", module, *args, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_stack_has_its_services_on_pinned_images():
    assert set(services()) >= SERVICES
    images = {name: service["image"] for name, service in services().items()}
    assert images["postgres"].startswith("postgres:16")
    assert images["temporal"].startswith("temporalio/auto-setup:")
    assert images["temporal-ui"].startswith("temporalio/ui:")
    for name, image in images.items():
        tag = image.rpartition(":")[2]
        assert "/" not in tag and tag not in ("", "latest"), f"{name} must pin its image tag"


@pytest.mark.parametrize("service", APP_SERVICES)
def test_app_services_set_only_settings_variables(service):
    names = set(env(service))
    assert names, f"{service} sets no environment"
    unknown = names - SETTINGS_VARS - NON_SETTINGS_VARS
    assert not unknown, f"{service} sets {sorted(unknown)}, which Settings does not read"
    assert all(name == name.upper() for name in names)


@pytest.mark.parametrize("service", APP_SERVICES)
def test_app_environment_validates_and_points_at_the_stack(service, monkeypatch):
    settings = settings_of(service, monkeypatch)

    host, _, port = settings.temporal_address.rpartition(":")
    assert host == "temporal" and port == "7233"
    database = conninfo_to_dict(settings.database_url.get_secret_value())
    postgres = env("postgres")
    assert database["host"] == "postgres"
    assert database["dbname"] == postgres["POSTGRES_DB"]
    assert database["user"] == postgres["POSTGRES_USER"]
    assert database["password"] == postgres["POSTGRES_PASSWORD"]


def test_migrate_and_worker_agree_on_temporal_and_database(monkeypatch):
    migrate = settings_of("migrate", monkeypatch)
    worker = settings_of("worker", monkeypatch)
    for field in SHARED_SETTINGS:
        assert getattr(migrate, field) == getattr(worker, field), field


def test_worker_leaves_migrations_to_the_one_shot(monkeypatch):
    assert settings_of("worker", monkeypatch).migrate_on_start is False
    assert ["python", "-m", "worker", "migrate"] in command_lines("migrate")


def test_temporal_persists_to_postgres_beside_the_app_database():
    temporal, postgres = env("temporal"), env("postgres")
    assert temporal["DB"] == "postgres12"
    assert temporal["POSTGRES_SEEDS"] == "postgres"
    assert temporal["POSTGRES_USER"] == postgres["POSTGRES_USER"]
    assert temporal["POSTGRES_PWD"] == postgres["POSTGRES_PASSWORD"]
    temporal_databases = {temporal["DBNAME"], temporal["VISIBILITY_DBNAME"]}
    assert len(temporal_databases) == 2
    assert postgres["POSTGRES_DB"] not in temporal_databases


def test_temporal_serves_the_namespace_the_apps_use(monkeypatch):
    worker = settings_of("worker", monkeypatch)
    assert env("temporal")["DEFAULT_NAMESPACE"] == worker.temporal_namespace
    assert env("temporal-ui")["TEMPORAL_ADDRESS"] == worker.temporal_address
    probe = services()["temporal"]["healthcheck"]["test"]
    assert probe[probe.index("--namespace") + 1] == worker.temporal_namespace
    assert probe[probe.index("--address") + 1] == worker.temporal_address


def test_temporal_healthcheck_is_a_valid_cli_command():
    probe = services()["temporal"]["healthcheck"]["test"]
    assert probe[:2] == ["CMD", "temporal"]
    words = [arg for arg in probe[1:] if not arg.startswith("-")][:3]
    result = subprocess.run(
        [temporal_binary(), *probe[2:], "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"Usage:\n  {' '.join(words)} [flags]" in result.stdout


def test_worker_command_is_the_entry_point_in_exec_form():
    command = services()["worker"]["command"]
    assert command == ["python", "-m", "worker"], "exec form, so SIGTERM reaches python"


def test_migrate_runs_migrations_then_sync():
    assert command_lines("migrate") == [
        ["python", "-m", "worker", "migrate"],
        ["python", "-m", "schedules", "sync"],
    ]


@pytest.mark.parametrize(
    "argv",
    [argv for service in APP_SERVICES for argv in command_lines(service)],
    ids=shlex.join,
)
def test_commands_are_real_entry_points(argv):
    assert argv[:2] == ["python", "-m"]
    module, args = argv[2], argv[3:]
    assert importlib.util.find_spec(f"{module}.__main__") is not None
    result = help_probe(module, *args)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("module", ["worker", "schedules"])
def test_help_probe_rejects_an_unknown_command(module):
    # The control for the test above: the probe does fail on a command argparse lacks.
    result = help_probe(module, "no-such-command")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_worker_runs_three_interchangeable_replicas():
    worker = services()["worker"]
    assert worker["deploy"]["replicas"] == 3
    assert "container_name" not in worker, "replicas need generated names"
    assert "ports" not in worker, "replicas cannot share a host port"


def test_only_migrate_is_one_shot_and_everything_else_has_a_healthcheck():
    assert one_shot_services() == {"migrate"}
    for name, service in services().items():
        if name in one_shot_services():
            continue
        check = service.get("healthcheck")
        assert check, f"{name} runs for good and needs a healthcheck"
        assert not check.get("disable", False), name
        assert check["test"][0] in ("CMD", "CMD-SHELL"), name


def test_dependencies_wait_for_health_or_completion():
    one_shot = one_shot_services()
    for name, service in services().items():
        depends_on = service.get("depends_on", {})
        assert isinstance(depends_on, dict), f"{name}: depends_on needs conditions"
        for dependency, spec in depends_on.items():
            expected = (
                "service_completed_successfully" if dependency in one_shot else "service_healthy"
            )
            assert spec["condition"] == expected, f"{name} -> {dependency}"
    assert {"migrate", "temporal"} <= set(services()["worker"]["depends_on"])
    assert {"postgres", "temporal"} <= set(services()["migrate"]["depends_on"])


def test_worker_healthcheck_is_the_health_command(monkeypatch):
    probe = services()["worker"]["healthcheck"]["test"]
    assert probe == ["CMD", "python", "-m", "worker", "health"]
    # The probe finds this replica's poller by the SDK's default `<pid>@<hostname>`.
    assert settings_of("worker", monkeypatch).worker_identity is None


@pytest.mark.parametrize(("text", "expected"), [("45s", 45), ("1m30s", 90), ("1h", 3600)])
def test_seconds_reads_compose_durations(text, expected):
    assert seconds(text) == expected


def test_worker_drains_before_it_is_killed(monkeypatch):
    worker = services()["worker"]
    graceful = settings_of("worker", monkeypatch).worker_graceful_shutdown_seconds
    assert graceful > 0
    assert seconds(worker["stop_grace_period"]) > graceful
    assert worker.get("stop_signal", "SIGTERM") == "SIGTERM"
    assert final_stage("STOPSIGNAL") == ["SIGTERM"]


def test_postgres_has_connections_for_everyone(monkeypatch):
    """Temporal, every worker's pool and the migration fit under max_connections.

    The auto-setup image runs frontend, history, matching and worker in one process, and
    each opens its own pools for the default and the visibility store.
    """
    command = services()["postgres"]["command"]
    given = [arg.partition("=")[2] for arg in command if arg.startswith("max_connections=")]
    max_connections = int(given[0]) if given else 100
    temporal = env("temporal")
    temporal_conns = 4 * (int(temporal["SQL_MAX_CONNS"]) + int(temporal["SQL_VIS_MAX_CONNS"]))
    replicas = services()["worker"]["deploy"]["replicas"]
    worker_conns = replicas * settings_of("worker", monkeypatch).database_pool_size
    migrate_conns, superuser_reserved = 1, 3
    needed = temporal_conns + worker_conns + migrate_conns + superuser_reserved
    assert needed <= max_connections


def test_app_services_build_the_one_image():
    builds = {name: services()[name] for name in APP_SERVICES}
    for name, service in builds.items():
        assert Path(service["build"]["context"]) == Path("."), name
        assert service["build"]["dockerfile"] == DOCKERFILE.relative_to(ROOT).as_posix(), name
    assert len({service["image"] for service in builds.values()}) == 1


def test_dockerfile_cmd_is_the_worker_command():
    (cmd,) = final_stage("CMD")
    assert json.loads(cmd) == services()["worker"]["command"]


def test_image_is_python_slim_and_runs_as_non_root():
    (base,) = final_stage("FROM")
    assert base == "python:3.11-slim"
    (user,) = final_stage("USER")
    assert user.partition(":")[0] not in ("", "root", "0")


def test_dockerfile_installs_every_package_the_project_ships():
    instructions = [instruction for stage in dockerfile_stages() for instruction in stage]
    copied = {
        source
        for keyword, arguments in instructions
        if keyword == "COPY" and not arguments.startswith("--from")
        for source in arguments.split()[:-1]
    }
    assert "pyproject.toml" in copied
    for package in project_packages():
        assert package in copied, f"deploy/Dockerfile does not copy {package}/"
    runs = [arguments for keyword, arguments in instructions if keyword == "RUN"]
    assert any(re.search(r"\bpip install\b.*\s\.$", run) for run in runs)


def test_dockerignore_lets_in_what_the_image_needs():
    lines = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*", "an allow-list keeps .venv, .git and .env out of the context"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert {"pyproject.toml", *project_packages()} <= allowed
