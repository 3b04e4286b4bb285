"""deploy/k8s, checked where no cluster exists.

Every overlay, and the documented component swaps (HPA for KEDA, mTLS for the API key), is
rendered with `kubectl kustomize` and each built-in object validated strictly (no unknown
fields) against the Kubernetes OpenAPI schemas that the `kubernetes-validate` package
bundles, for the oldest and the newest Kubernetes version the manifests target. The custom
resources (KEDA, Prometheus Operator) have no bundled schema: they are held to the
documented fields here instead. Then policy: confinement, resources, probes, pinned images,
settings that exist and are all set, secrets from Secrets, the wiring between objects.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from api.app import create_app
from api.settings import ApiSettings
from tests.unit.deploy_checks import dev_server_versions, help_probe, temporal_binary
from worker.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
HELM_VALUES = K8S / "temporal-helm-values.yaml"
RULE_RENDERER = K8S / "components" / "prometheus-operator" / "render_rules.py"
KUBECTL = shutil.which("kubectl")

pytestmark = pytest.mark.skipif(
    KUBECTL is None,
    reason="kubectl not found: it renders the kustomizations (Debian/Ubuntu: kubectl package)",
)

# The Kubernetes versions the manifests must be valid for: the oldest still maintained by
# the major providers, and the newest the schema package has.
K8S_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())

OVERLAYS = sorted(p.parent.name for p in (K8S / "overlays").glob("*/kustomization.yaml"))
# (overlay, component taken out, component put in): the swaps docs/deploy.md tells of.
SWAPS = {
    "self-hosted+hpa": ("self-hosted", "keda", "hpa"),
    "temporal-cloud+hpa": ("temporal-cloud", "keda", "hpa"),
    "temporal-cloud+mtls": ("temporal-cloud", "temporal-cloud-api-key", "temporal-cloud-mtls"),
}
VARIANTS = [*OVERLAYS, *SWAPS]

NAMESPACE = "scheduled-jobs"
SECRET = "scheduled-jobs-secrets"
WORKER = "scheduled-jobs-worker"
DISPATCHER = "scheduled-jobs-dispatcher"
API = "scheduled-jobs-api"
# Kinds that come from CRDs, with what they are checked against instead of a schema.
CUSTOM_KINDS = {"ScaledObject", "TriggerAuthentication", "ServiceMonitor", "PrometheusRule"}
WORKLOAD_KINDS = {"Deployment", "Job", "CronJob"}

SETTINGS_VARS = frozenset(name.upper() for name in Settings.model_fields)
# The API's container reads the worker's settings and its own (api/settings.py).
API_SETTINGS_VARS = frozenset(name.upper() for name in ApiSettings.model_fields)
SECRET_SETTINGS = {
    "DATABASE_URL",
    "APP_DATABASE_PASSWORD",
    "TEMPORAL_API_KEY",
    "SMTP_PASSWORD",
    "WEBHOOK_URL",
    "PAYMENTS_API_KEY",
}
# Every app container must know where Temporal and the database are...
REQUIRED_EVERYWHERE = {
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    "TEMPORAL_TASK_QUEUE",
    "DATABASE_URL",
}
# ... and a worker also where its metrics, mail and webhooks go, and how long it drains.
REQUIRED_IN_WORKER = REQUIRED_EVERYWHERE | {
    "METRICS_PORT",
    "LOG_FORMAT",
    "SMTP_HOST",
    "SMTP_PORT",
    "SMTP_FROM",
    "WEBHOOK_URL",
    "PAYMENTS_URL",
    "WORKER_GRACEFUL_SHUTDOWN_SECONDS",
    "WORKER_MAX_CONCURRENT_ACTIVITIES",
}
# ... and a dispatcher (the runtime schedules' ticks only) where its metrics go and its role.
REQUIRED_IN_DISPATCHER = REQUIRED_EVERYWHERE | {
    "METRICS_PORT",
    "LOG_FORMAT",
    "WORKER_ROLE",
    "WORKER_GRACEFUL_SHUTDOWN_SECONDS",
}
# ... and the API where it listens (every interface of its pod, the port its Service targets).
REQUIRED_IN_API = REQUIRED_EVERYWHERE | {"API_HOST", "API_PORT", "LOG_FORMAT"}
# Values standing in for the Secret's keys when building Settings from a container's env.
SECRET_STAND_INS = {
    "DATABASE_URL": "postgresql://scheduled_jobs_app:pw@db.example.com:5432/scheduled_jobs",
    "DATABASE_OWNER_URL": "postgresql://scheduled_jobs:pw@db.example.com:5432/scheduled_jobs",
    "APP_DATABASE_PASSWORD": "pw",
    "TEMPORAL_API_KEY": "api-key",
    "SMTP_PASSWORD": "smtp-password",
    "WEBHOOK_URL": "https://hooks.example.com/scheduled-jobs",
    "PAYMENTS_API_KEY": "payments-key",
}
# The KEDA `temporal` trigger's metadata and authentication parameters (KEDA 2.17+ docs).
KEDA_TEMPORAL_METADATA = {
    "endpoint",
    "endpointFromEnv",
    "namespace",
    "activationTargetQueueSize",
    "targetQueueSize",
    "taskQueue",
    "queueTypes",
    "buildId",
    "selectAllActive",
    "selectUnversioned",
    "apiKeyFromEnv",
    "minConnectTimeout",
    "unsafeSsl",
    "tlsServerName",
}
KEDA_TEMPORAL_AUTH = {"apiKey", "ca", "cert", "key", "keyPassword"}
DB = "postgresql://scheduled_jobs_app:pw@db.example.com:5432/scheduled_jobs"
_EXACT_TAG = re.compile(r"^\d+\.\d+\.\d+$")
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def kustomize(directory: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [KUBECTL, "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@functools.cache
def rendered(variant: str, workdir: Path) -> tuple[dict[str, Any], ...]:
    """The objects `variant` renders to; a swap is rendered from a copy of deploy/k8s."""
    if variant in OVERLAYS:
        return tuple(kustomize(K8S / "overlays" / variant))
    overlay, out, into = SWAPS[variant]
    copy = workdir / variant
    shutil.copytree(K8S, copy)
    kustomization = copy / "overlays" / overlay / "kustomization.yaml"
    text = kustomization.read_text()
    assert f"  - ../../components/{out}\n" in text, f"{overlay} does not list {out}"
    kustomization.write_text(
        text.replace(f"  - ../../components/{out}\n", f"  - ../../components/{into}\n")
    )
    return tuple(kustomize(copy / "overlays" / overlay))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("k8s")


@pytest.fixture(params=VARIANTS)
def objects(request, workdir) -> tuple[dict[str, Any], ...]:
    return rendered(request.param, workdir)


def of_kind(objects, kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects, kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in of_kind(objects, kind) if name is None or o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def pod_template(workload: dict[str, Any]) -> dict[str, Any]:
    if workload["kind"] == "CronJob":
        return workload["spec"]["jobTemplate"]["spec"]["template"]
    return workload["spec"]["template"]


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    return pod_template(workload)["spec"]


def containers(objects) -> Iterator[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """(workload, pod spec, container) for every container and init container."""
    for workload in objects:
        if workload["kind"] in WORKLOAD_KINDS:
            spec = pod_spec(workload)
            for container in [*spec.get("initContainers", []), *spec["containers"]]:
                yield workload, spec, container


def label(workload, container) -> str:
    return f"{workload['kind']}/{workload['metadata']['name']}:{container['name']}"


def environment(objects, container) -> dict[str, str | dict]:
    """The container's variables: ConfigMap values as strings, secret refs as dicts."""
    env: dict[str, str | dict] = {}
    for source in container.get("envFrom", []):
        ref = source["configMapRef"]["name"]
        env.update(one(objects, "ConfigMap", ref)["data"])
    for var in container.get("env", []):
        env[var["name"]] = var["value"] if "value" in var else var["valueFrom"]
    return env


def settings_class(container) -> type[Settings]:
    """What the container's process reads its settings into: the API's, or the worker's."""
    return ApiSettings if container["name"] == "api" else Settings


def settings_from(objects, container, monkeypatch) -> Settings:
    """The Settings the container builds, its secret keys given stand-in values."""
    for name in API_SETTINGS_VARS:
        monkeypatch.delenv(name, raising=False)
    values = {}
    for name, value in environment(objects, container).items():
        if isinstance(value, dict):
            values[name.lower()] = SECRET_STAND_INS[value["secretKeyRef"]["key"]]
        else:
            values[name.lower()] = value
    return settings_class(container)(**values)


def worker_container(objects) -> dict[str, Any]:
    (container,) = pod_spec(one(objects, "Deployment", WORKER))["containers"]
    return container


def settings_map(objects) -> dict[str, str]:
    (config,) = of_kind(objects, "ConfigMap")
    return config["data"]


# --- rendering and schemas ---------------------------------------------------------------


def test_every_overlay_is_checked():
    assert {"self-hosted", "temporal-cloud"} <= set(OVERLAYS)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_builtin_objects_validate_strictly_against_the_kubernetes_schemas(objects, version):
    kinds = {obj["kind"] for obj in objects}
    assert {"Deployment", "PodDisruptionBudget", "Job", "CronJob", "NetworkPolicy"} <= kinds
    for obj in objects:
        if obj["kind"] in CUSTOM_KINDS:
            continue
        kubernetes_validate.validate(obj, version, strict=True)


def test_the_validator_rejects_a_misspelt_field(workdir):
    # The control for the test above: strict validation does see an unknown field.
    deployment = one(rendered("self-hosted", workdir), "Deployment", WORKER)
    broken = yaml.safe_load(yaml.safe_dump(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSIONS[0], strict=True)


def test_only_known_custom_resources_are_rendered(objects):
    builtin_groups = {"v1", "apps/v1", "batch/v1", "policy/v1", "networking.k8s.io/v1"}
    builtin_groups |= {"autoscaling/v2"}
    for obj in objects:
        if obj["apiVersion"] not in builtin_groups:
            assert obj["kind"] in CUSTOM_KINDS, f"{obj['kind']} has no check here"


def test_everything_lives_in_the_fleet_namespace(objects):
    (namespace,) = of_kind(objects, "Namespace")
    assert namespace["metadata"]["name"] == NAMESPACE
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    for obj in objects:
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["metadata"]["name"]


# --- containers: confinement, resources, images, probes ----------------------------------


def test_every_container_is_confined(objects):
    for workload, spec, container in containers(objects):
        where = label(workload, container)
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True, where
        assert pod["runAsUser"] != 0 and pod["runAsGroup"] != 0, where
        assert pod["seccompProfile"]["type"] == "RuntimeDefault", where
        assert spec["automountServiceAccountToken"] is False, where
        own = container["securityContext"]
        assert own["allowPrivilegeEscalation"] is False, where
        assert own["readOnlyRootFilesystem"] is True, where
        assert own["privileged"] is False, where
        assert own["capabilities"]["drop"] == ["ALL"], where
        assert "add" not in own["capabilities"], where


def test_pods_run_as_the_images_user(objects):
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    (user,) = re.findall(r"^USER (\d+):(\d+)$", dockerfile, re.M)
    for workload, spec, container in containers(objects):
        pod = spec["securityContext"]
        assert (str(pod["runAsUser"]), str(pod["runAsGroup"])) == user, label(workload, container)


def test_every_container_requests_cpu_and_memory_and_caps_memory(objects):
    for workload, _spec, container in containers(objects):
        resources = container["resources"]
        assert {"cpu", "memory"} <= set(resources["requests"]), label(workload, container)
        assert "memory" in resources["limits"], label(workload, container)


def test_images_are_pinned_to_an_exact_version_or_digest(objects):
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    for workload, _spec, container in containers(objects):
        image = container["image"]
        if _DIGEST.search(image):
            continue
        name, _, tag = image.rpartition(":")
        assert name and "/" not in tag, f"{label(workload, container)}: {image} has no tag"
        assert _EXACT_TAG.match(tag), f"{label(workload, container)}: {image} is not exact"
        assert tag == version, f"{image}: the project's version is {version}"


def test_long_running_containers_have_all_three_probes_on_the_health_command(objects):
    health = ["python", "-m", "worker", "health"]
    for workload, _spec, container in containers(objects):
        if workload["kind"] != "Deployment" or workload["metadata"]["name"] == API:
            continue  # the API answers HTTP probes: test_the_api_is_probed_over_http
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["exec"]["command"] == health, (
                label(workload, container),
                probe,
            )
            # The health command connects to Temporal: give it time to answer.
            assert container[probe]["timeoutSeconds"] >= 10, probe
        liveness = container["livenessProbe"]
        # A Temporal blip must not restart the fleet: only minutes without polling do.
        assert liveness["periodSeconds"] * liveness["failureThreshold"] >= 300


def test_one_shot_containers_are_bounded_in_time(objects):
    for workload in objects:
        if workload["kind"] == "Job":
            assert workload["spec"]["activeDeadlineSeconds"] > 0
        if workload["kind"] == "CronJob":
            assert workload["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] > 0
            assert workload["spec"]["concurrencyPolicy"] == "Forbid"


def test_the_read_only_root_leaves_a_writable_tmp(objects):
    for workload, spec, container in containers(objects):
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]], label(workload, container)


def test_every_command_is_a_real_entry_point(workdir):
    commands = set()
    every = [c for variant in VARIANTS for _w, _s, c in containers(rendered(variant, workdir))]
    for container in every:
        commands.add(tuple(container["command"]))
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            if "exec" in container.get(probe, {}):
                commands.add(tuple(container[probe]["exec"]["command"]))
    for command in sorted(commands):
        assert command[:2] == ("python", "-m"), command
        result = help_probe(*command[2:])
        assert result.returncode == 0, f"{command}: {result.stderr}"


# --- settings and secrets ----------------------------------------------------------------


def test_containers_set_only_settings_variables(objects):
    for workload, _spec, container in containers(objects):
        names = set(environment(objects, container))
        known = API_SETTINGS_VARS if settings_class(container) is ApiSettings else SETTINGS_VARS
        unknown = names - known
        assert not unknown, f"{label(workload, container)} sets {sorted(unknown)}, unread"


def test_every_setting_a_deploy_needs_is_set(objects):
    for workload, _spec, container in containers(objects):
        names = set(environment(objects, container))
        needed = {
            WORKER: REQUIRED_IN_WORKER,
            DISPATCHER: REQUIRED_IN_DISPATCHER,
            API: REQUIRED_IN_API,
        }.get(workload["metadata"]["name"], REQUIRED_EVERYWHERE)
        assert needed <= names, f"{label(workload, container)} lacks {sorted(needed - names)}"


def test_every_container_environment_validates(objects, monkeypatch):
    for _workload, _spec, container in containers(objects):
        settings_from(objects, container, monkeypatch)


def test_worker_settings_are_production_values_not_local_defaults(objects, monkeypatch):
    settings = settings_from(objects, worker_container(objects), monkeypatch)
    defaults = Settings.model_fields
    # Mail to the local stack's sink would go to the pod's own loopback and die.
    assert settings.smtp_host != defaults["smtp_host"].default
    assert settings.smtp_starttls or settings.smtp_tls, "mail leaves the cluster encrypted"
    assert settings.temporal_address != defaults["temporal_address"].default
    assert settings.metrics_port is not None
    assert settings.log_format == "json"


def test_secrets_come_from_the_secret_and_never_from_the_config_map(objects):
    data = settings_map(objects)
    assert not SECRET_SETTINGS & set(data), "a secret in the ConfigMap"
    for workload, _spec, container in containers(objects):
        for name, value in environment(objects, container).items():
            if name in SECRET_SETTINGS:
                assert isinstance(value, dict), f"{label(workload, container)}: {name} inline"
                ref = value["secretKeyRef"]
                # The migration alone connects as the owner; everyone else as the app role.
                owner = container["name"] == "migrate" and name == "DATABASE_URL"
                assert (ref["name"], ref["key"]) == (
                    SECRET,
                    "DATABASE_OWNER_URL" if owner else name,
                )
                required = name in ("DATABASE_URL", "APP_DATABASE_PASSWORD")
                assert ref.get("optional", False) is not required, name


def test_only_the_migration_connects_as_the_owner_and_creates_the_app_role(objects):
    for workload, _spec, container in containers(objects):
        env = environment(objects, container)
        key = env["DATABASE_URL"]["secretKeyRef"]["key"]
        if container["name"] == "migrate":
            assert key == "DATABASE_OWNER_URL"
            assert env["APP_DATABASE_ROLE"] == "scheduled_jobs_app"
        else:
            assert key == "DATABASE_URL", label(workload, container)
            assert "APP_DATABASE_PASSWORD" not in env, label(workload, container)


def test_all_containers_share_one_settings_config_map(objects, monkeypatch):
    """Worker, migrate, sync and check agree on Temporal and the task queue."""
    shared = ("temporal_address", "temporal_namespace", "temporal_task_queue")
    seen = {}
    for workload, _spec, container in containers(objects):
        settings = settings_from(objects, container, monkeypatch)
        seen[label(workload, container)] = tuple(getattr(settings, f) for f in shared)
    assert len(set(seen.values())) == 1, seen


def test_mtls_files_are_mounted_where_the_settings_point(workdir, monkeypatch):
    objects = rendered("temporal-cloud+mtls", workdir)
    for workload, spec, container in containers(objects):
        settings = settings_from(objects, container, monkeypatch)
        if container["name"] == "migrate":  # it talks to PostgreSQL only
            continue
        mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
        volumes = {v["name"]: v for v in spec["volumes"]}
        for path in (settings.temporal_tls_client_cert_path, settings.temporal_tls_client_key_path):
            mount = mounts[str(path.parent)]
            assert mount["readOnly"] is True
            secret = volumes[mount["name"]]["secret"]
            assert secret["secretName"] == "temporal-client-tls", label(workload, container)
            # kubectl create secret tls names the files tls.crt and tls.key.
            assert path.name in {"tls.crt", "tls.key"}


# --- the worker Deployment, its budget and its shutdown ----------------------------------


def autoscaler(objects) -> dict[str, Any] | None:
    found = [o for o in objects if o["kind"] in {"ScaledObject", "HorizontalPodAutoscaler"}]
    assert len(found) <= 1
    return found[0] if found else None


def test_three_workers_at_least_and_the_autoscaler_owns_the_count(objects):
    deployment = one(objects, "Deployment", WORKER)
    scaler = autoscaler(objects)
    if scaler is None:
        assert deployment["spec"]["replicas"] == 3
        return
    assert "replicas" not in deployment["spec"], "kubectl apply would reset the scaler's count"
    spec = scaler["spec"]
    minimum = spec.get("minReplicaCount", spec.get("minReplicas"))
    maximum = spec.get("maxReplicaCount", spec.get("maxReplicas"))
    assert minimum == 3 and maximum > minimum
    target = spec["scaleTargetRef"]
    assert target["name"] == WORKER and target.get("kind", "Deployment") == "Deployment"


def test_base_runs_three_replicas():
    base = kustomize(K8S / "base")
    assert one(base, "Deployment", WORKER)["spec"]["replicas"] == 3


def test_workers_drain_before_they_are_killed(objects, monkeypatch):
    deployment = one(objects, "Deployment", WORKER)
    settings = settings_from(objects, worker_container(objects), monkeypatch)
    grace = pod_spec(deployment)["terminationGracePeriodSeconds"]
    assert settings.worker_graceful_shutdown_seconds > 0
    assert grace > settings.worker_graceful_shutdown_seconds + 10


def test_rollouts_never_drop_below_the_replica_count(objects):
    rolling = one(objects, "Deployment", WORKER)["spec"]["strategy"]["rollingUpdate"]
    assert rolling["maxUnavailable"] == 0 and rolling["maxSurge"] >= 1


def test_workers_spread_across_nodes(objects):
    deployment = one(objects, "Deployment", WORKER)
    selector = deployment["spec"]["selector"]["matchLabels"]
    spread = {c["topologyKey"]: c for c in pod_spec(deployment)["topologySpreadConstraints"]}
    node = spread["kubernetes.io/hostname"]
    assert node["maxSkew"] == 1 and node["whenUnsatisfiable"] == "DoNotSchedule"
    assert node["labelSelector"]["matchLabels"] == selector


def test_the_disruption_budget_covers_the_workers_and_leaves_two(objects):
    deployment = one(objects, "Deployment", WORKER)
    budget = one(objects, "PodDisruptionBudget", WORKER)["spec"]
    assert budget["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert 3 - budget["maxUnavailable"] >= 2


def test_worker_identity_is_left_to_the_sdk_so_health_finds_the_pod(objects, monkeypatch):
    # `python -m worker health` looks for a poller `<pid>@<hostname>`; the pod name is the
    # hostname, so each pod is told apart.
    assert settings_from(objects, worker_container(objects), monkeypatch).worker_identity is None


def test_the_dispatchers_run_in_workers_of_their_own(objects, monkeypatch):
    """Both task queues are served, each by its own pods (core/queues.py): the workers run
    every job's runs, two dispatchers only the ticks, one drained at a time."""
    dispatcher = one(objects, "Deployment", DISPATCHER)
    (container,) = pod_spec(dispatcher)["containers"]
    roles = {
        name: settings_from(objects, c, monkeypatch).task_queues()
        for name, c in ((WORKER, worker_container(objects)), (DISPATCHER, container))
    }
    assert roles == {WORKER: ["scheduled-jobs"], DISPATCHER: ["scheduled-jobs-dispatch"]}
    assert dispatcher["spec"]["replicas"] == 2
    budget = one(objects, "PodDisruptionBudget", DISPATCHER)["spec"]
    assert budget["selector"]["matchLabels"] == dispatcher["spec"]["selector"]["matchLabels"]
    assert budget["maxUnavailable"] == 1
    worker_pods = one(objects, "Deployment", WORKER)["spec"]["selector"]["matchLabels"]
    assert worker_pods.items() - pod_template(dispatcher)["metadata"]["labels"].items()


# --- the HTTP API: Deployment, Service, budget, probes, network -------------------------


def api_container(objects) -> dict[str, Any]:
    (container,) = pod_spec(one(objects, "Deployment", API))["containers"]
    return container


def test_the_api_serves_on_the_port_its_service_targets(objects, monkeypatch):
    deployment = one(objects, "Deployment", API)
    container = api_container(objects)
    assert container["command"] == ["python", "-m", "api", "serve"]
    settings = settings_from(objects, container, monkeypatch)
    assert settings.api_host == "0.0.0.0", "the Service reaches the pod on its own address"
    (port,) = container["ports"]
    assert (port["name"], port["containerPort"]) == ("http", settings.api_port)
    service = one(objects, "Service", API)
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert "clusterIP" not in service["spec"], "load-balanced, not headless"
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] == "http"
    # Its own pods: neither the workers' Service nor their autoscaler counts them.
    worker_pods = one(objects, "Deployment", WORKER)["spec"]["selector"]["matchLabels"]
    assert worker_pods.items() - pod_template(deployment)["metadata"]["labels"].items()


def test_the_api_is_probed_over_http(objects):
    container = api_container(objects)
    paths = {
        probe: (container[probe]["httpGet"]["path"], container[probe]["httpGet"]["port"])
        for probe in ("startupProbe", "readinessProbe", "livenessProbe")
    }
    # Liveness asks only whether the process serves: a database outage takes the pods out
    # of the Service (readiness), it does not restart them.
    assert paths == {
        "startupProbe": ("/healthz", "http"),
        "readinessProbe": ("/readyz", "http"),
        "livenessProbe": ("/healthz", "http"),
    }
    routes = set(create_app(ApiSettings(database_url=DB)).openapi()["paths"])
    assert {"/healthz", "/readyz"} <= routes


def test_two_api_replicas_and_a_drain_takes_one_at_a_time(objects):
    deployment = one(objects, "Deployment", API)
    assert deployment["spec"]["replicas"] == 2
    rolling = deployment["spec"]["strategy"]["rollingUpdate"]
    assert rolling["maxUnavailable"] == 0 and rolling["maxSurge"] >= 1
    budget = one(objects, "PodDisruptionBudget", API)["spec"]
    assert budget["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert budget["maxUnavailable"] == 1


def test_the_api_takes_requests_on_its_http_port_only(objects):
    policy = one(objects, "NetworkPolicy", API)["spec"]
    pods = one(objects, "Deployment", API)["spec"]["selector"]["matchLabels"]
    assert policy["podSelector"]["matchLabels"] == pods
    assert policy["policyTypes"] == ["Ingress"], "egress stays the fleet's policy"
    (ingress,) = policy["ingress"]
    assert [(p["port"], p["protocol"]) for p in ingress["ports"]] == [("http", "TCP")]
    # From this namespace, and from the namespaces labelled as the API's clients; no
    # rule without a `from` (which would admit the whole internet through a LoadBalancer).
    assert ingress["from"] and all(peer for peer in ingress["from"])


# --- migrate + sync, check ---------------------------------------------------------------


def test_each_deploy_migrates_then_syncs(objects):
    job = one(objects, "Job", "scheduled-jobs-migrate-sync")
    spec = pod_spec(job)
    (migrate,) = spec["initContainers"]
    (sync,) = spec["containers"]
    assert migrate["command"] == ["python", "-m", "worker", "migrate"]
    # Not the deprecated `--wait SECONDS` before the command.
    assert sync["command"] == ["python", "-m", "schedules", "sync", "--wait-for-cluster", "300"]
    assert spec["restartPolicy"] == "Never"
    worker = one(objects, "Deployment", WORKER)
    assert (
        migrate["image"]
        == sync["image"]
        == worker_container(objects)["image"]
        == (pod_spec(worker)["containers"][0]["image"])
    )


def test_the_check_cronjob_is_the_didnt_run_probe(objects):
    cron = one(objects, "CronJob", "scheduled-jobs-check")
    (container,) = pod_spec(cron)["containers"]
    assert container["command"][:4] == ["python", "-m", "schedules", "check"]
    job = cron["spec"]["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0, "a failed check is an answer: no retries"
    minutes = re.fullmatch(r"\*/(\d+) \* \* \* \*", cron["spec"]["schedule"])
    assert minutes and int(minutes[1]) <= 15
    assert job["activeDeadlineSeconds"] < int(minutes[1]) * 60


# --- metrics and alerts ------------------------------------------------------------------


def test_the_metrics_service_reaches_every_worker_pod(objects, monkeypatch):
    service = one(objects, "Service", WORKER)
    deployment = one(objects, "Deployment", WORKER)
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["clusterIP"] == "None"
    (port,) = service["spec"]["ports"]
    (container_port,) = worker_container(objects)["ports"]
    assert port["targetPort"] == container_port["name"] == port["name"] == "metrics"
    settings = settings_from(objects, worker_container(objects), monkeypatch)
    assert container_port["containerPort"] == port["port"] == settings.metrics_port


def test_alert_rules_see_the_scrape_job_they_match():
    assert f'up{{job="{WORKER}"}}' in ALERTS.read_text()


def test_the_service_monitor_scrapes_the_service_with_honor_labels(objects):
    monitors = of_kind(objects, "ServiceMonitor")
    if not monitors:
        return
    (monitor,) = monitors
    service = one(objects, "Service", WORKER)
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["honorLabels"] is True, "the metrics' job label is the scheduled job"
    assert "jobLabel" not in monitor["spec"], "the scrape job is the Service's name"


def test_the_prometheus_rule_is_alerts_yml(objects):
    (rule,) = of_kind(objects, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"] == yaml.safe_load(ALERTS.read_text())


def test_the_prometheus_rule_file_is_generated_from_alerts_yml():
    loader = importlib.util.spec_from_file_location("render_rules", RULE_RENDERER)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    expected = module.render(ALERTS.read_text())
    actual = (RULE_RENDERER.parent / "prometheusrule.yaml").read_text()
    assert actual == expected, f"stale: run {sys.executable} {RULE_RENDERER.relative_to(ROOT)}"


# --- autoscaling -------------------------------------------------------------------------


def test_keda_scales_on_the_workers_task_queue(objects, monkeypatch):
    scaler = autoscaler(objects)
    if scaler is None or scaler["kind"] != "ScaledObject":
        return
    assert scaler["apiVersion"] == "keda.sh/v1alpha1"
    container = worker_container(objects)
    settings = settings_from(objects, container, monkeypatch)
    (trigger,) = scaler["spec"]["triggers"]
    assert trigger["type"] == "temporal"
    meta = trigger["metadata"]
    assert set(meta) <= KEDA_TEMPORAL_METADATA, set(meta) - KEDA_TEMPORAL_METADATA
    assert all(isinstance(value, str) for value in meta.values()), "KEDA metadata are strings"
    # KEDA reads *FromEnv from the scale target's container.
    assert environment(objects, container)[meta["endpointFromEnv"]] == settings.temporal_address
    assert meta["namespace"] == settings.temporal_namespace
    assert meta["taskQueue"] == settings.temporal_task_queue
    assert set(meta["queueTypes"].split(",")) == {"workflow", "activity"}
    # Two waiting tasks per connection a new replica adds (its DATABASE_POOL_SIZE).
    assert int(meta["targetQueueSize"]) == 2 * settings.database_pool_size
    host = settings.temporal_address.rpartition(":")[0]
    if host.endswith((".tmprl.cloud", ".api.temporal.io")) or settings.temporal_tls:
        ref = trigger["authenticationRef"]["name"]
        auth = one(objects, "TriggerAuthentication", ref)
        params = {t["parameter"]: t for t in auth["spec"]["secretTargetRef"]}
        assert set(params) <= KEDA_TEMPORAL_AUTH
        if settings.temporal_tls_client_cert_path:
            assert {"cert", "key"} <= set(params)
            assert "apiKey" not in params
        else:
            assert (params["apiKey"]["name"], params["apiKey"]["key"]) == (
                SECRET,
                "TEMPORAL_API_KEY",
            )
    else:
        assert "authenticationRef" not in trigger


def test_the_hpa_fallback_scales_on_cpu(workdir):
    hpa = one(rendered("self-hosted+hpa", workdir), "HorizontalPodAutoscaler")
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] >= 300


# --- network -----------------------------------------------------------------------------


def test_the_network_policy_admits_only_scrapes_and_lets_out_only_what_is_used(objects):
    policy = one(objects, "NetworkPolicy", NAMESPACE)["spec"]
    assert policy["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "scheduled-jobs"}
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
    (ingress,) = policy["ingress"]
    assert [p["port"] for p in ingress["ports"]] == ["metrics"]
    ports = {p["port"] for rule in policy["egress"] for p in rule["ports"]}
    assert {53, 7233, 5432, 587, 465, 443} == ports
    for workload in objects:
        if workload["kind"] in WORKLOAD_KINDS:
            labels = pod_template(workload)["metadata"]["labels"]
            assert policy["podSelector"]["matchLabels"].items() <= labels.items()


def test_self_hosted_temporal_is_reached_in_its_own_namespace_only(workdir):
    policy = one(rendered("self-hosted", workdir), "NetworkPolicy", NAMESPACE)["spec"]
    (temporal,) = [r for r in policy["egress"] if {p["port"] for p in r["ports"]} == {7233}]
    (peer,) = temporal["to"]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "temporal"}
    address = settings_map(rendered("self-hosted", workdir))["TEMPORAL_ADDRESS"]
    assert address.split(".")[1] == "temporal", "the Helm release's namespace"


# --- the Temporal cluster of the self-hosted overlay (official Helm chart) --------------


def helm_values() -> dict[str, Any]:
    return yaml.safe_load(HELM_VALUES.read_text())


def test_helm_installs_the_temporal_version_the_tests_run():
    values, versions = helm_values(), dev_server_versions()
    assert values["server"]["image"] == {
        "repository": "temporalio/server",
        "tag": versions["Server"],
    }
    assert values["admintools"]["image"]["tag"] == versions["Server"]
    assert values["web"]["image"] == {"repository": "temporalio/ui", "tag": versions["UI"]}


def test_helm_persists_history_and_visibility_on_postgresql():
    persistence = helm_values()["server"]["config"]["persistence"]
    stores = persistence["datastores"]
    assert set(stores) == {persistence["defaultStore"], persistence["visibilityStore"]}
    databases = set()
    for store in stores.values():
        sql = store["sql"]
        assert sql["pluginName"] == sql["driverName"] == "postgres12"
        assert sql["createDatabase"] is True and sql["manageSchema"] is True
        assert "password" not in sql, "the password comes from existingSecret"
        assert sql["existingSecret"] and sql["secretKey"]
        databases.add(sql["databaseName"])
    assert len(databases) == 2


def test_helm_creates_the_namespace_the_self_hosted_workers_poll(workdir):
    namespaces = helm_values()["server"]["config"]["namespaces"]
    assert namespaces["create"] is True
    config = settings_map(rendered("self-hosted", workdir))
    assert config["TEMPORAL_NAMESPACE"] in {n["name"] for n in namespaces["namespace"]}
    # Release `temporal` of chart `temporal` in namespace `temporal`: <release>-frontend.
    host, port = config["TEMPORAL_ADDRESS"].rsplit(":", 1)
    assert host == "temporal-frontend.temporal.svc.cluster.local" and port == "7233"


# The chart as released (tests/unit/data/README.md): the values it declares and the
# `.Values...` paths its templates read. No `helm` here, so a misspelt key, which helm
# would silently ignore, is caught by holding every path the values set to the chart.
HELM_CHART = ROOT / "tests" / "unit" / "data" / "temporal-helm-chart-1.6.0"
UI_IMAGE_CONFIG = ROOT / "tests" / "unit" / "data" / "temporal-ui-docker.yaml"
# Keys of Temporal's server TLS config (temporalio/temporal common/config/config.go:
# RootTLS, GroupTLS, ServerTLS, ClientTLS, WorkerTLS), which the chart passes through as is.
_CLIENT_TLS = {"serverName", "disableHostVerification", "rootCaFiles", "rootCaData", "forceTLS"}
_SERVER_TLS = {
    "certFile", "keyFile", "clientCaFiles", "certData", "keyData", "clientCaData",
    "requireClientAuth",
}  # fmt: skip
_GROUP_TLS = {"client": _CLIENT_TLS, "server": _SERVER_TLS, "hostOverrides": None}
_WORKER_TLS = {"certFile": None, "keyFile": None, "certData": None, "keyData": None}
SERVER_TLS_KEYS = {
    "internode": _GROUP_TLS,
    "frontend": _GROUP_TLS,
    "systemWorker": _WORKER_TLS | {"client": _CLIENT_TLS},
    "remoteClusters": None,
    "expirationChecks": None,
    "refreshInterval": None,
}


def _leaf_paths(tree: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(tree, dict) and tree:
        for key, value in tree.items():
            yield from _leaf_paths(value, (*prefix, str(key)))
    else:
        yield prefix


def _chart_knows(path: tuple[str, ...], defaults: dict, read: set[str]) -> bool:
    """The chart declares `path` (or a prefix of it that holds a free-form list or map, such
    as `additionalEnv`), or a template reads it."""
    node: Any = defaults
    for depth, key in enumerate(path):
        if ".".join(path[: depth + 1]) in read and not isinstance(node.get(key), dict):
            return True  # a template takes this value whole (toYaml)
        if not isinstance(node, dict) or key not in node:
            return any(".".join(path[: n + 1]) in read for n in range(len(path)))
        node = node[key]
    return True


def _check_keys(tree: dict, allowed: dict | set, where: str) -> None:
    for key, value in tree.items():
        assert key in allowed, f"{where}.{key} is no key of Temporal's TLS config"
        if isinstance(allowed, dict) and allowed[key] is not None:
            _check_keys(value, allowed[key], f"{where}.{key}")


def _env(section: dict) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in section["additionalEnv"]}


def _mounted(section: dict, path: str) -> str:
    """The Secret whose file `path` is, through the section's volumes and mounts."""
    volumes = {v["name"]: v for v in section["additionalVolumes"]}
    for mount in section["additionalVolumeMounts"]:
        if path.startswith(mount["mountPath"].rstrip("/") + "/"):
            secret = volumes[mount["name"]]["secret"]
            filename = path[len(mount["mountPath"].rstrip("/")) + 1 :]
            items = secret.get("items")
            assert items is None or filename in {i["path"] for i in items}, path
            return secret["secretName"]
    raise AssertionError(f"{path} is on no mounted volume")


def test_every_helm_value_is_one_the_chart_reads():
    defaults = yaml.safe_load((HELM_CHART / "values.yaml").read_text())
    read = set()
    for template in (HELM_CHART / "templates").iterdir():
        read |= set(re.findall(r"\.Values\.([A-Za-z0-9_.]+)", template.read_text()))
    read |= {"server.internal-frontend"}  # read with `index $.Values.server "internal-frontend"`
    unknown = [
        ".".join(path)
        for path in _leaf_paths(helm_values())
        if not _chart_knows(path, defaults, read)
    ]
    assert not unknown, f"values chart 1.6.0 neither declares nor reads: {unknown}"
    # server.config.tls goes to Temporal's config as written: its keys are Temporal's.
    _check_keys(helm_values()["server"]["config"]["tls"], SERVER_TLS_KEYS, "server.config.tls")


def test_every_client_of_the_mtls_frontend_presents_a_certificate():
    """The frontend requires client certificates: the server's own system workers (the
    scheduler fires every schedule from there), the admin tools (the chart's namespace Job)
    and the UI each present one from a mounted Secret, and check the frontend by the CA."""
    values = helm_values()
    tls = values["server"]["config"]["tls"]
    assert tls["frontend"]["server"]["requireClientAuth"] is True
    (ca,) = tls["frontend"]["server"]["clientCaFiles"]
    frontend_name = "temporal-frontend.temporal.svc.cluster.local"
    server = values["server"]
    system = tls["systemWorker"]
    assert _mounted(server, system["certFile"]) == _mounted(server, system["keyFile"])
    assert system["client"] == {"serverName": frontend_name, "rootCaFiles": [ca]}

    cli_env = set(re.findall(r"\bTEMPORAL_[A-Z_]+\b", temporal_options_text()))
    admin = values["admintools"]
    env = _env(admin)
    assert set(env) <= cli_env, set(env) - cli_env
    assert _mounted(admin, env["TEMPORAL_TLS_CLIENT_CERT_PATH"]) == _mounted(
        admin, env["TEMPORAL_TLS_CLIENT_KEY_PATH"]
    )
    assert _mounted(admin, env["TEMPORAL_TLS_SERVER_CA_CERT_PATH"]) == "temporal-frontend-tls"
    assert env["TEMPORAL_TLS_SERVER_NAME"] == frontend_name

    ui_env = set(re.findall(r"\bTEMPORAL_[A-Z_]+\b", UI_IMAGE_CONFIG.read_text()))
    web = values["web"]
    env = _env(web)
    assert set(env) <= ui_env, set(env) - ui_env
    assert _mounted(web, env["TEMPORAL_TLS_CERT"]) == _mounted(web, env["TEMPORAL_TLS_KEY"])
    assert _mounted(web, env["TEMPORAL_TLS_CA"]) == "temporal-frontend-tls"
    assert env["TEMPORAL_TLS_SERVER_NAME"] == frontend_name
    clients = {
        _mounted(server, system["certFile"]),
        _mounted(admin, _env(admin)["TEMPORAL_TLS_CLIENT_CERT_PATH"]),
        _mounted(web, env["TEMPORAL_TLS_CERT"]),
    }
    assert len(clients) == 3 and "temporal-frontend-tls" not in clients, clients


def test_the_web_ui_asks_for_a_login_and_its_secret_comes_from_a_secret():
    env = _env(helm_values()["web"])
    assert env["TEMPORAL_AUTH_ENABLED"] == "true"
    for name in ("TEMPORAL_AUTH_PROVIDER_URL", "TEMPORAL_AUTH_CALLBACK_URL"):
        assert env[name].startswith("https://"), name
    assert env["TEMPORAL_AUTH_CLIENT_ID"] and "openid" in env["TEMPORAL_AUTH_SCOPES"]
    secret = env["TEMPORAL_AUTH_CLIENT_SECRET"]
    assert isinstance(secret, dict) and secret["secretKeyRef"]["name"], secret


def test_the_deploy_page_creates_every_secret_the_helm_values_mount():
    text = DEPLOY_DOC.read_text()
    values = helm_values()
    secrets = {
        volume["secret"]["secretName"]
        for section in (values["server"], values["admintools"], values["web"])
        for volume in section["additionalVolumes"]
    } | {_env(values["web"])["TEMPORAL_AUTH_CLIENT_SECRET"]["secretKeyRef"]["name"]}
    for secret in sorted(secrets):
        assert f"-n temporal create secret generic {secret}" in text or (
            f"-n temporal create secret tls {secret}" in text
        ), secret


@functools.cache
def temporal_options_text() -> str:
    """`temporal options`: the CLI's connection options and the variables they read."""
    return subprocess.run(
        [temporal_binary(), "options"], capture_output=True, text=True, timeout=60, check=True
    ).stdout


# --- docs/deploy.md: the steps name what the manifests have ------------------------------

DEPLOY_DOC = ROOT / "docs" / "deploy.md"
_KUBECTL_REF = re.compile(r"\b(job|deployment|cronjob|deploy)/([a-z0-9-]+)")


def test_the_deploy_page_names_only_files_that_exist():
    # `kubectl exec deploy/NAME` names a Deployment, not a file.
    paths = set(re.findall(r"(?<!exec )(?<![\w/-])(deploy/[\w./-]*\w)", DEPLOY_DOC.read_text()))
    assert paths
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, missing


def test_the_deploy_pages_commands_name_the_rendered_objects(workdir):
    objects = rendered("self-hosted", workdir)
    names = {(o["kind"].lower(), o["metadata"]["name"]) for o in objects}
    kinds = {"job": "job", "deployment": "deployment", "deploy": "deployment", "cronjob": "cronjob"}
    checked = 0
    for line in DEPLOY_DOC.read_text().splitlines():
        if f"-n {NAMESPACE} " not in line:
            continue
        for kind, name in _KUBECTL_REF.findall(line):
            if name == "check-now":  # the Job the page creates itself
                continue
            assert (kinds[kind], name) in names, line
            checked += 1
    assert checked >= 5


def test_the_deploy_page_creates_every_secret_the_manifests_read(workdir):
    text = DEPLOY_DOC.read_text()
    wanted: set[tuple[str, str]] = set()
    for variant in VARIANTS:
        objects = rendered(variant, workdir)
        for _workload, spec, container in containers(objects):
            for value in environment(objects, container).values():
                if isinstance(value, dict):
                    wanted.add((value["secretKeyRef"]["name"], value["secretKeyRef"]["key"]))
            for volume in spec["volumes"]:
                if "secret" in volume:
                    wanted.add((volume["secret"]["secretName"], ""))
    for secret, key in sorted(wanted):
        assert f"create secret generic {secret}" in text or f"create secret tls {secret}" in text
        if key:
            assert f"--from-literal={key}=" in text, key


def ledger_retention_days() -> int:
    jobs = tomllib.loads((ROOT / "schedules" / "jobs.toml").read_text())
    return int(jobs["weekly-cleanup"]["params"]["executions_retention_days"])


def test_temporal_keeps_history_as_long_as_the_ledger_keeps_runs():
    (namespace,) = helm_values()["server"]["config"]["namespaces"]["namespace"]
    assert namespace["retention"] == f"{ledger_retention_days()}d"


def test_the_frontend_requires_client_certificates_and_the_ui_a_login():
    values = helm_values()
    frontend = values["server"]["config"]["tls"]["frontend"]["server"]
    assert frontend["requireClientAuth"] is True and frontend["clientCaFiles"]
    web = {e["name"]: e for e in values["web"]["additionalEnv"]}
    assert web["TEMPORAL_AUTH_ENABLED"]["value"] == "true"
    assert web["TEMPORAL_AUTH_PROVIDER_URL"]["value"].startswith("https://")
    assert "value" not in web["TEMPORAL_AUTH_CLIENT_SECRET"], "the OIDC secret from a Secret"
    assert {"TEMPORAL_TLS_CERT", "TEMPORAL_TLS_KEY", "TEMPORAL_TLS_CA"} <= set(web)


def test_the_self_hosted_workers_present_a_certificate(workdir, monkeypatch):
    objects = rendered("self-hosted", workdir)
    settings = settings_from(objects, worker_container(objects), monkeypatch)
    assert settings.temporal_tls
    assert settings.temporal_tls_client_cert_path and settings.temporal_tls_server_ca_cert_path


def test_no_workload_connects_as_a_superuser(objects):
    for workload, _spec, container in containers(objects):
        ref = environment(objects, container)["DATABASE_URL"]["secretKeyRef"]
        user = SECRET_STAND_INS[ref["key"]].split("//")[1].split(":")[0]
        assert user not in ("postgres", "root", "admin"), label(workload, container)
