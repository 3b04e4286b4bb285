"""The container stack, checked where it cannot run.

`docker-compose.yml` and `deploy/Dockerfile` need a Docker daemon the test machines lack, so
these tests validate the file against the Compose specification's schema, parse it and hold
it to the code: the environment names are `Settings` fields and their values validate, the
commands are the real entry points, the outbox relay delivers to the stack's own mail
catcher and webhook receiver, Prometheus scrapes every worker and loads the alert rules,
Grafana gets its dashboard, and the health, start-order and shutdown wiring is in place.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from psycopg.conninfo import conninfo_to_dict

from api.settings import ApiSettings
from devstack.temporal import temporal_binary
from tests.unit.deploy_checks import dev_server_versions, help_probe
from worker.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PROMETHEUS_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"

SERVICES = {
    "postgres",
    "temporal-schema",
    "temporal",
    "temporal-namespace",
    "temporal-ui",
    "migrate",
    "audit",
    "worker",
    "dispatcher",
    "api",
    "mailpit",
    "webhook",
    "payments",
    "prometheus",
    "grafana",
}
# `audit` is an on-demand one-shot (profile `audit`): `docker compose run --rm audit`.
ONE_SHOT = {"temporal-schema", "temporal-namespace", "migrate", "audit"}
APP_SERVICES = ("migrate", "worker", "dispatcher", "audit", "api")
SETTINGS_VARS = frozenset(name.upper() for name in Settings.model_fields)
# The API reads the worker's settings and its own (api/settings.py).
API_SETTINGS_VARS = frozenset(name.upper() for name in ApiSettings.model_fields)
# Variables an app container may set that Settings does not read (a library's own, such as
# OTEL_* once telemetry exports). None yet: every app variable is a Settings field.
NON_SETTINGS_VARS: frozenset[str] = frozenset()
# What migrate and worker must agree on, or sync registers schedules nobody polls.
SHARED_SETTINGS = ("temporal_address", "temporal_namespace", "temporal_task_queue")
# The variables the stack requires (`${VAR:?message}`), with the values the tests give them;
# the password has URL-safe characters only, as the file's comment asks.
REQUIRED_VARIABLES = {
    "POSTGRES_PASSWORD": "test-password-1",
    "GRAFANA_ADMIN_PASSWORD": "test-password-2",
    "APP_DB_PASSWORD": "test-password-3",
}
# check-jsonschema with its bundled copy of the Compose specification's schema.
SCHEMA_CHECK = (sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec")
# Images whose projects number releases with one integer: that integer is exact.
INTEGER_VERSIONED = {"mendhak/http-https-echo"}

_VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_]\w*)(?P<op>:?[-?])(?P<arg>[^}]*)\}")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)")
_SECONDS_PER_UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def resolve(value: Any) -> Any:
    """`value` as Compose interpolates it with only `REQUIRED_VARIABLES` exported.

    `${VAR:?message}` takes the test's value (an unknown required variable fails);
    `${VAR:-default}` its default; `$$` is a literal `$`. Any other `$` form fails.
    """
    if isinstance(value, dict):
        return {key: resolve(item) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match) -> str:
        if "?" in match["op"]:
            assert match["name"] in REQUIRED_VARIABLES, f"{match['name']} is required: add it"
            return REQUIRED_VARIABLES[match["name"]]
        return match["arg"]

    text = _VARIABLE.sub(substitute, value.replace("$$", "\0"))
    assert "$" not in text, f"{value!r} interpolates a variable in a form Compose may not know"
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
    for name in API_SETTINGS_VARS:
        monkeypatch.delenv(name, raising=False)
    variables = env(service)
    passed_through = [name for name, value in variables.items() if value is None]
    assert not passed_through, f"{service} takes {passed_through} from the host: give values"
    read = ApiSettings if service == "api" else Settings
    return read(**{name.lower(): value for name, value in variables.items()})


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


def bind_mounts(service: str) -> dict[str, Path]:
    """A service's bind mounts: container path -> host path (relative to the repository)."""
    mounts = {}
    for volume in services()[service].get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            mounts[target] = ROOT / source
    return mounts


def mounted_script(service: str) -> Path:
    """The host file of the script a one-shot service runs with its `/bin/sh` entrypoint."""
    entrypoint = services()[service]["entrypoint"]
    assert entrypoint[0] == "/bin/sh" and len(entrypoint) == 2, entrypoint
    for target, source in bind_mounts(service).items():
        if entrypoint[1].startswith(target + "/"):
            return source / entrypoint[1].removeprefix(target + "/")
    raise AssertionError(f"{service} runs {entrypoint[1]}, which no bind mount provides")


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


def image_tag(service: str) -> tuple[str, str]:
    name, _, tag = services()[service]["image"].rpartition(":")
    return name, tag


def test_compose_file_validates_against_the_compose_schema():
    done = subprocess.run(
        [*SCHEMA_CHECK, str(COMPOSE_FILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_schema_check_rejects_an_unknown_service_key(tmp_path):
    # The control for the test above: the bundled schema does refuse a misspelt key.
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    data["services"]["worker"]["healthchek"] = data["services"]["worker"].pop("healthcheck")
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(yaml.safe_dump(data))
    done = subprocess.run(
        [*SCHEMA_CHECK, str(broken)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and "healthchek" in done.stdout


def test_stack_has_its_services_on_exactly_pinned_images():
    assert set(services()) == SERVICES
    for name, service in services().items():
        image, tag = image_tag(name)
        if "build" in service or "@sha256:" in service["image"]:
            continue  # built here from deploy/Dockerfile, or pinned by digest
        pattern = r"v?\d+" if image in INTEGER_VERSIONED else r"v?\d+\.\d+(\.\d+)?"
        assert re.fullmatch(pattern, tag), f"{name}: {image}:{tag} is not an exact version"
    assert image_tag("postgres")[0] == "postgres" and image_tag("postgres")[1].startswith("16.")


def test_temporal_images_match_the_dev_server_make_run_uses():
    versions = dev_server_versions()
    assert image_tag("temporal") == ("temporalio/server", versions["Server"])
    assert image_tag("temporal-schema") == ("temporalio/admin-tools", versions["Server"])
    assert image_tag("temporal-namespace") == image_tag("temporal-schema")
    assert image_tag("temporal-ui") == ("temporalio/ui", versions["UI"])


def test_passwords_are_required_and_never_defaulted():
    text = COMPOSE_FILE.read_text()
    used = {m["name"]: m["op"] for m in _VARIABLE.finditer(text)}
    assert set(used) == set(REQUIRED_VARIABLES), used
    assert set(used.values()) == {":?"}, "a password must not fall back to a default"


def test_a_missing_password_stops_interpolation():
    # The same rule Compose applies: `${VAR:?...}` with VAR unset is an error, not "".
    with pytest.raises(AssertionError, match="UNSET_PASSWORD is required"):
        resolve("${UNSET_PASSWORD:?set it}")


@pytest.mark.parametrize("service", APP_SERVICES)
def test_app_services_set_only_settings_variables(service):
    names = set(env(service))
    assert names, f"{service} sets no environment"
    known = API_SETTINGS_VARS if service == "api" else SETTINGS_VARS
    unknown = names - known - NON_SETTINGS_VARS
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
    if service == "migrate":  # the owner, for the DDL, creating the application role
        assert database["user"] == postgres["POSTGRES_USER"]
        assert database["password"] == postgres["POSTGRES_PASSWORD"]
    else:
        assert database["user"] != postgres["POSTGRES_USER"], "workers never as the superuser"


def test_workers_connect_as_the_role_migrate_creates(monkeypatch):
    migrate = settings_of("migrate", monkeypatch)
    worker = conninfo_to_dict(settings_of("worker", monkeypatch).database_url.get_secret_value())
    assert worker["user"] == migrate.app_database_role
    assert worker["password"] == migrate.app_database_password.get_secret_value()
    owner = conninfo_to_dict(migrate.database_url.get_secret_value())
    assert (worker["host"], worker["port"], worker["dbname"]) == (
        owner["host"],
        owner["port"],
        owner["dbname"],
    )


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
    schema = env("temporal-schema")
    for name in ("DB", "DB_PORT", "POSTGRES_SEEDS", "POSTGRES_USER", "DBNAME", "VISIBILITY_DBNAME"):
        assert schema[name] == temporal[name], name
    assert schema["SQL_PASSWORD"] == postgres["POSTGRES_PASSWORD"]


@pytest.mark.parametrize("service", ["temporal-schema", "temporal-namespace"])
def test_one_shot_scripts_read_only_what_their_service_sets(service):
    script = mounted_script(service)
    text = script.read_text()
    assert text.startswith("#!/bin/sh\n") and "set -eu" in text
    read = set(re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", text))
    assert read, f"{script.name} reads no variable"
    assert read <= set(env(service)), f"{script.name} reads {sorted(read - set(env(service)))}"
    done = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_temporal_schema_applies_both_stores_of_the_image_version():
    text = mounted_script("temporal-schema").read_text()
    for store in ("temporal", "visibility"):
        assert f"/etc/temporal/schema/postgresql/v12/{store}/versioned" in text
    assert text.count("setup-schema -v 0.0") == 2


def test_temporal_serves_the_namespace_the_apps_use(monkeypatch):
    worker = settings_of("worker", monkeypatch)
    namespace = env("temporal-namespace")
    assert namespace["NAMESPACE"] == worker.temporal_namespace
    assert namespace["TEMPORAL_ADDRESS"] == worker.temporal_address
    assert env("temporal-ui")["TEMPORAL_ADDRESS"] == worker.temporal_address
    host, _, port = worker.temporal_address.rpartition(":")
    assert host == "temporal"
    assert services()["temporal"]["healthcheck"]["test"][-1] == port


def test_the_namespace_script_runs_valid_cli_commands():
    """Each `temporal operator ...` command of the script, flags too, against the real CLI."""
    text = mounted_script("temporal-namespace").read_text()
    commands = [
        line[line.index("temporal operator") :]
        for line in text.splitlines()
        if "temporal operator" in line
    ]
    assert len(commands) >= 3, commands
    for command in commands:
        words = re.match(r"temporal(?: [a-z][a-z-]*)+", command)[0].split()
        result = subprocess.run(
            [temporal_binary(), *words[1:], "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert f"Usage:\n  {' '.join(words)} [flags]" in result.stdout, command
        for flag in re.findall(r"(?<!\S)(--[a-z][a-z-]*)", command):
            assert f"{flag} " in result.stdout, f"{command}: the CLI has no {flag}"


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


def test_the_dispatchers_run_in_a_worker_of_their_own(monkeypatch):
    """The workers serve every job's runs, the dispatcher only the ticks (core/queues.py):
    both task queues are served, each by its own process."""
    worker, dispatcher = (settings_of(n, monkeypatch) for n in ("worker", "dispatcher"))
    assert (worker.worker_role, dispatcher.worker_role) == ("jobs", "dispatch")
    assert worker.task_queues() == ["scheduled-jobs"]
    assert dispatcher.task_queues() == ["scheduled-jobs-dispatch"]

    def shape(name: str) -> dict[str, Any]:
        return {k: v for k, v in services()[name].items() if k not in ("environment", "deploy")}

    assert shape("dispatcher") == shape("worker")  # the image, command, health check, ...


def test_only_the_setup_steps_are_one_shot_and_everything_else_has_a_healthcheck():
    assert one_shot_services() == ONE_SHOT
    for name, service in services().items():
        if name in one_shot_services():
            continue
        check = service.get("healthcheck")
        assert check, f"{name} runs for good and needs a healthcheck"
        assert not check.get("disable", False), name
        assert check["test"][0] in ("CMD", "CMD-SHELL"), name
        assert service["restart"] == "unless-stopped", name


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
    assert {"migrate", "temporal", "mailpit", "webhook", "payments"} <= set(
        services()["worker"]["depends_on"]
    )
    assert {"postgres", "temporal", "temporal-namespace"} <= set(
        services()["migrate"]["depends_on"]
    )
    assert "temporal-schema" in services()["temporal"]["depends_on"]


def test_every_bind_mount_exists_and_is_read_only():
    for name, service in services().items():
        for volume in service.get("volumes", []):
            source, _target, *options = volume.split(":")
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts {source}, which is missing"
                assert options == ["ro"], f"{name} mounts {source} writable"
            else:
                assert source in yaml.safe_load(COMPOSE_FILE.read_text())["volumes"], volume


def test_outbox_mail_goes_to_the_mail_catcher(monkeypatch):
    worker = settings_of("worker", monkeypatch)
    assert worker.smtp_host == "mailpit", "the default would mail the worker's own loopback"
    # Mailpit listens for SMTP on 1025 (MP_SMTP_BIND_ADDR unset) and needs no login.
    assert worker.smtp_port == 1025
    assert "MP_SMTP_BIND_ADDR" not in env("mailpit")
    assert worker.smtp_username is None and not (worker.smtp_starttls or worker.smtp_tls)
    assert "mailpit" in services()["mailpit"]["image"]


def test_outbox_webhooks_go_to_the_webhook_receiver(monkeypatch):
    worker = settings_of("worker", monkeypatch)
    assert worker.webhook_url is not None, "without it every webhook waits in the outbox"
    url = urlsplit(worker.webhook_url.get_secret_value())
    assert (url.scheme, url.hostname) == ("http", "webhook")
    assert url.port == int(env("webhook")["HTTP_PORT"])
    probe = services()["webhook"]["healthcheck"]["test"]
    assert f"127.0.0.1:{url.port}" in probe[-1]


def test_prometheus_scrapes_every_worker_and_loads_the_alert_rules(monkeypatch):
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    mounts = bind_mounts("prometheus")
    assert mounts["/etc/prometheus/prometheus.yml"] == PROMETHEUS_CONFIG
    (rules,) = config["rule_files"]
    assert mounts[rules] == ROOT / "deploy" / "prometheus" / "alerts.yml"
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "scheduled-jobs-worker"]
    assert job["honor_labels"] is True, "the metrics' job label is the scheduled job's id"
    (discovery,) = job["dns_sd_configs"]
    assert discovery["names"] == ["worker", "dispatcher"] and discovery["type"] == "A"
    assert discovery["port"] == settings_of("worker", monkeypatch).metrics_port
    assert "--config.file=/etc/prometheus/prometheus.yml" in services()["prometheus"]["command"]


def test_grafana_gets_its_datasource_and_dashboard():
    mounts = bind_mounts("grafana")
    provisioning = mounts["/etc/grafana/provisioning"]
    (source,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())[
        "datasources"
    ]
    prometheus_port = services()["prometheus"]["ports"][0].rsplit(":", 1)[1]
    assert source["url"] == f"http://prometheus:{prometheus_port}"
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "scheduled-jobs.yml").read_text())[
        "providers"
    ]
    dashboards = mounts[provider["options"]["path"]]
    assert json.loads((dashboards / "scheduled-jobs.json").read_text())["uid"] == "scheduled-jobs"
    home = env("grafana")["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == provider["options"]["path"] + "/scheduled-jobs.json"


def test_app_containers_are_confined():
    for name in APP_SERVICES:
        service = services()[name]
        assert service["read_only"] is True, name
        assert service["cap_drop"] == ["ALL"], name
        assert "no-new-privileges:true" in service["security_opt"], name
        assert "/tmp" in service["tmpfs"], name


def test_worker_healthcheck_is_the_health_command(monkeypatch):
    probe = services()["worker"]["healthcheck"]["test"]
    assert probe == ["CMD", "python", "-m", "worker", "health"]
    # The probe finds this replica's poller by the SDK's default `<pid>@<hostname>`.
    assert settings_of("worker", monkeypatch).worker_identity is None


def test_the_api_serves_on_its_published_port_and_is_ready_when_its_database_is(monkeypatch):
    api = services()["api"]
    assert api["command"] == ["python", "-m", "api", "serve"]
    settings = settings_of("api", monkeypatch)
    assert settings.api_host == "0.0.0.0", "other containers and the host reach it"
    assert api["ports"] == [f"127.0.0.1:{settings.api_port}:{settings.api_port}"]
    probe = " ".join(api["healthcheck"]["test"])
    assert f"http://127.0.0.1:{settings.api_port}/readyz" in probe
    assert "migrate" in api["depends_on"], "no request before the schema is there"


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
    worker_conns = sum(
        services()[name].get("deploy", {}).get("replicas", 1)
        * settings_of(name, monkeypatch).database_pool_size
        for name in ("worker", "dispatcher", "api")
    )
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


def test_image_is_an_exact_python_slim_and_runs_as_non_root():
    bases = {
        arguments.split()[0]
        for stage in dockerfile_stages()
        for kw, arguments in stage
        if kw == "FROM"
    }
    (base,) = bases
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", base), base
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


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)"
)
def test_promtool_accepts_the_prometheus_config(tmp_path):
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    # The rule file where the container sees it, here where the repository has it.
    config["rule_files"] = [str(bind_mounts("prometheus")[config["rule_files"][0]])]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [shutil.which("promtool"), "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# The variables each third-party image documents and this file may set (anything else is a
# typo the image would ignore): the Temporal server's config template, the admin tools'
# sql tool, and each project's own prefix.
IMAGE_VARIABLES = {
    "temporalio/server": {
        "DB",
        "DB_PORT",
        "POSTGRES_SEEDS",
        "POSTGRES_USER",
        "POSTGRES_PWD",
        "DBNAME",
        "VISIBILITY_DBNAME",
        "SQL_MAX_CONNS",
        "SQL_MAX_IDLE_CONNS",
        "SQL_VIS_MAX_CONNS",
        "SQL_VIS_MAX_IDLE_CONNS",
        "BIND_ON_IP",
    },
    "temporalio/ui": {"TEMPORAL_ADDRESS"},
    "postgres": {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"},
    "mendhak/http-https-echo": {"HTTP_PORT", "LOG_IGNORE_PATH"},
    "prom/prometheus": set(),  # configured by its command line and prometheus.yml
}
IMAGE_PREFIXES = {"axllent/mailpit": "MP_", "grafana/grafana": "GF_"}


def test_third_party_services_set_only_their_images_variables():
    for name, service in services().items():
        if "build" in service:
            continue
        image = image_tag(name)[0]
        names = set(env(name))
        if image == "temporalio/admin-tools":
            # The one-shot scripts read their own variables (checked above) and the sql tool's.
            continue
        if image in IMAGE_PREFIXES:
            assert all(n.startswith(IMAGE_PREFIXES[image]) for n in names), (name, names)
        else:
            assert names <= IMAGE_VARIABLES[image], (name, sorted(names - IMAGE_VARIABLES[image]))


def test_the_workers_charge_the_stand_in_payment_provider():
    url = urlsplit(env("worker")["PAYMENTS_URL"])
    assert (url.scheme, url.hostname, url.port) == ("http", "payments", 8090)
    command = services()["payments"]["command"]
    assert command[:3] == ["python", "-m", "devstack.payments"]
    assert command[command.index("--port") + 1] == "8090"


def test_temporal_keeps_history_as_long_as_the_ledger_keeps_runs():
    jobs = tomllib.loads((ROOT / "schedules" / "jobs.toml").read_text())
    days = int(jobs["weekly-cleanup"]["params"]["executions_retention_days"])
    assert env("temporal-namespace")["RETENTION"] == f"{days * 24}h"
