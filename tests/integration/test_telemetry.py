"""Traces, metrics and logs of real runs: schedule-started workflows on real servers.

The in-process test installs the global tracer and meter providers once for the session
(OpenTelemetry allows one of each per process) with in-memory exporters; the others scrape
and read a real `python -m worker` process.
"""

from __future__ import annotations

import json
import urllib.request
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from opentelemetry import metrics, trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families
from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client, ScheduleBackfill, ScheduleOverlapPolicy
from temporalio.worker import Worker

from activities.common.telemetry import record_catchup_gap
from core import metric_names
from devstack import free_port
from tests.helpers import assert_eventually
from tests.helpers.http import LocalServer, QuietHandler
from tests.integration.jobs import executions, insert_invoices, invoice_job, registered
from tests.integration.traced_workflows import TracedChild, TracedRun, trace_of
from worker.client import connect
from worker.run import build_worker, workflow_runner
from worker.telemetry import tracing_interceptors
from worker.tracing import run_trace_id

JOB = "invoice-reminders"
OVERDUE = date.today() - timedelta(days=10)


@pytest.fixture(scope="session")
def otel():
    """The process's tracer and meter providers, in memory, installed once per session."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tracer_provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    yield spans, reader
    spans.shutdown()  # later in-process tests record nothing more


def points(reader: InMemoryMetricReader, name: str) -> dict[frozenset, object]:
    """The data points of metric `name`, keyed by their attributes."""
    found = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        found[frozenset(point.attributes.items())] = point
    return found


def completed(db, job: str = JOB, n: int = 1):
    async def check():
        rows = [r for r in executions(db, job) if r["status"] == "completed"]
        assert len(rows) == n
        return rows

    return check


async def test_a_schedule_started_run_is_one_trace_from_workflow_to_postgres(
    otel, settings, db, database_url
):
    spans, reader = otel
    spans.clear()
    insert_invoices(db, 30, due=OVERDUE)
    client = await connect(settings, interceptors=tracing_interceptors())
    job = invoice_job(chunk_size=10)
    async with AsyncConnectionPool(database_url, min_size=1, max_size=4, open=False) as pool:
        await pool.wait()
        async with (
            build_worker(client, settings, pool),
            registered(client, job, settings.temporal_task_queue),
        ):
            await client.get_schedule_handle(job.id).trigger()
            (row,) = await assert_eventually(completed(db), timeout=60)

            async def run_spans():
                finished = spans.get_finished_spans()
                assert "CompleteWorkflow:ChunkedJobWorkflow" in [s.name for s in finished]
                return finished

            finished = await assert_eventually(run_spans, timeout=30)

    workflow_id = row["workflow_id"]
    (root,) = [
        s
        for s in finished
        if s.name == "RunWorkflow:ChunkedJobWorkflow"
        and s.attributes["temporalWorkflowID"] == workflow_id
    ]
    trace_id = root.context.trace_id
    in_trace = [s for s in finished if s.context.trace_id == trace_id]
    ids = {s.context.span_id: s for s in in_trace}
    by_name = defaultdict(list)
    for span in in_trace:
        by_name[span.name].append(span)
    # The schedule started it with no trace context: the trace is derived from the run.
    assert format(trace_id, "032x") == run_trace_id(workflow_id, row["run_id"])
    assert root.parent.is_remote and root.parent.span_id not in ids
    # The run begins in its work activity, a local one (plan, claim and the first chunk of
    # 10 in one transaction), then the work activity through the server takes over.
    for name in ("db.begin_and_work", "db.take_over", "CompleteWorkflow:ChunkedJobWorkflow"):
        assert len(by_name[name]) == 1, " ".join(sorted(by_name))
    for name in ("StartActivity:send_invoice_reminders", "RunActivity:send_invoice_reminders"):
        assert len(by_name[name]) == 2, " ".join(sorted(by_name))
    # The 2 chunks of 10 left, the last of which also completes the row.
    fenced = by_name["db.fenced_transaction"]
    assert len(fenced) == 2

    def parent_name(span):
        return ids[span.parent.span_id].name

    assert parent_name(by_name["db.begin_and_work"][0]) == "RunActivity:send_invoice_reminders"
    db_work = [*fenced, by_name["db.take_over"][0]]
    assert {parent_name(s) for s in db_work} == {"RunActivity:send_invoice_reminders"}
    labels = {
        "job": JOB,
        "scheduled_at": row["scheduled_at"].isoformat(),
        "execution_id": row["id"],
    }
    for span in db_work:
        assert {k: span.attributes[k] for k in labels} == labels
    for span in fenced:  # token 1 was the begin's
        assert span.attributes["attempt"] == row["attempt"] == 2
    # Ids, times and counts only: no customer data on any span.
    for span in in_trace:
        assert not any("@" in str(v) for v in span.attributes.values()), span.name

    # The same run, counted by the in-process meter provider.
    runs = points(reader, metric_names.RUNS)
    assert runs[frozenset({"job": JOB, "status": "completed"}.items())].value >= 1
    assert points(reader, metric_names.DURATION)[frozenset({"job": JOB}.items())].count >= 1
    assert points(reader, metric_names.LATENESS)[frozenset({"job": JOB}.items())].count >= 1
    record_catchup_gap("catchup-demo", 3)
    gaps = points(reader, metric_names.CATCHUP_GAPS)
    assert gaps[frozenset({"job": "catchup-demo"}.items())].value == 3


# The spans a workflow makes (`TracingInterceptor`), none of an activity's.
WORKFLOW_SPANS = ("RunWorkflow", "StartActivity", "StartChildWorkflow", "CompleteWorkflow")


@pytest.mark.parametrize(
    "workflow_spans", [True, False], ids=["workflow-spans", "no-workflow-spans"]
)
async def test_a_run_its_activities_and_its_child_share_one_trace_with_or_without_workflow_spans(
    otel, temporal, client, task_queue, workflow_spans
):
    """Without workflow spans (a worker whose spans are not recorded) a run's activities,
    local ones and its child's included, still run in the run's trace: the one derived from
    it when nothing started it under a context (a schedule's start), the starter's else."""
    spans, _ = otel
    spans.clear()
    traced = await Client.connect(
        temporal.address, interceptors=tracing_interceptors(workflow_spans)
    )
    async with Worker(
        traced,
        task_queue=task_queue,
        workflows=[TracedRun, TracedChild],
        activities=[trace_of],
        workflow_runner=workflow_runner(),
    ):
        # Started as a schedule starts it: no context.
        handle = await client.start_workflow(
            TracedRun.run, id=f"traced-{task_queue}", task_queue=task_queue
        )
        derived = run_trace_id(handle.id, handle.result_run_id)
        assert await handle.result() == [derived] * 3
        # Started under an operator's span: that trace.
        with trace.get_tracer(__name__).start_as_current_span("operator") as operator:
            handle = await traced.start_workflow(
                TracedRun.run, id=f"traced-by-hand-{task_queue}", task_queue=task_queue
            )
        by_hand = format(operator.get_span_context().trace_id, "032x")
        assert await handle.result() == [by_hand] * 3
    assert by_hand != derived
    made = {s.name.split(":")[0] for s in spans.get_finished_spans()}
    assert "RunActivity" in made
    assert bool(made & set(WORKFLOW_SPANS)) == workflow_spans, sorted(made)


def scrape(port: int) -> dict[str, list]:
    """The worker's /metrics, parsed: metric family name -> samples."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)} | {"": text}


def sample(families: dict, name: str, **labels: str) -> float | None:
    """The value of the sample `name` whose labels include `labels`."""
    for samples in families.values():
        if isinstance(samples, str):
            continue
        for s in samples:
            if s.name == name and labels.items() <= s.labels.items():
                return s.value
    return None


def two_thirty_london(days_ago: int) -> datetime:
    london = ZoneInfo("Europe/London")
    day = datetime.now(london).date() - timedelta(days=days_ago)
    return datetime(day.year, day.month, day.day, 2, 30, tzinfo=london).astimezone(UTC)


async def test_the_worker_serves_job_outbox_and_sdk_metrics_and_logs_json(
    client, db, task_queue, start_workers
):
    insert_invoices(db, 40, due=OVERDUE)
    port = free_port()
    (worker,) = start_workers(1, METRICS_PORT=str(port), LOG_FORMAT="json")
    job = invoice_job().model_copy(update={"starting_deadline": timedelta(seconds=60)})
    async with registered(client, job, task_queue):
        handle = client.get_schedule_handle(job.id)
        await handle.trigger()
        (row,) = await assert_eventually(completed(db), timeout=60)
        # A backfilled night, days past its 60 s starting deadline: recorded skipped.
        slot = two_thirty_london(days_ago=3)
        await handle.backfill(
            ScheduleBackfill(
                start_at=slot - timedelta(minutes=1),
                end_at=slot + timedelta(minutes=1),
                overlap=ScheduleOverlapPolicy.ALLOW_ALL,
            )
        )

        async def skipped_and_scraped():
            assert [r["status"] for r in executions(db, job.id)] == ["skipped", "completed"]
            families = scrape(port)
            assert sample(families, metric_names.SKIPS, job=JOB, reason="starting_deadline") == 1
            # The SDK core's own series, read from its loopback endpoint at this scrape.
            assert sample(families, "temporal_workflow_completed_total") == 2
            return families

        families = await assert_eventually(skipped_and_scraped, timeout=60)

    assert sample(families, metric_names.RUNS, job=JOB, status="completed") == 1
    assert sample(families, metric_names.RUNS, job=JOB, status="skipped") == 1
    assert sample(families, metric_names.DURATION + "_count", job=JOB) == 1
    assert sample(families, metric_names.LATENESS + "_count", job=JOB) == 2
    # The skipped night started days late; the triggered run within seconds.
    assert sample(families, metric_names.LATENESS + "_sum", job=JOB) > 2 * 86400
    assert sample(families, metric_names.LAST_SUCCESS, job=JOB) == pytest.approx(
        row["finished_at"].timestamp(), abs=0.01
    )
    # The not-completed threshold, recorded with the claims from the schedule's run input.
    assert sample(families, metric_names.ALERT_AFTER, job=JOB) == 90900  # 25h + 15m grace
    assert sample(families, metric_names.OUTBOX_PENDING) == 40
    assert sample(families, metric_names.OUTBOX_DEAD) == 0
    text = families[""]
    for name in metric_names.ALL:
        if name != metric_names.CATCHUP_GAPS:  # none happened: no series yet
            assert f"# TYPE {name} " in text, name
    # The Temporal SDK's own metrics, through the same endpoint.
    assert sample(families, "temporal_request_total", service_name="temporal-core-sdk") >= 1
    assert sample(families, "temporal_worker_start_total", task_queue=task_queue) == 1
    # No scope labels: alert rules match on job, status and reason only.
    assert "otel_scope_name" not in text

    worker.stop()
    lines = [line for line in worker.log.read_text().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    (claimed,) = [e for e in entries if e["message"] == "execution claimed"]
    assert claimed["job"] == JOB
    assert claimed["scheduled_at"] == row["scheduled_at"].isoformat()
    assert claimed["workflow_id"] == row["workflow_id"]
    assert claimed["execution_id"] == row["id"]
    # Claimed by the work activity that begins the run (a chunked kind's, run locally).
    assert claimed["activity_type"] == "send_invoice_reminders" and claimed["attempt"] == 1
    assert len(claimed["trace_id"]) == 32 and len(claimed["span_id"]) == 16
    # No exporter: spans are not recorded, yet the line carries the run's own trace id.
    assert claimed["trace_id"] == run_trace_id(row["workflow_id"], row["run_id"])
    assert {"time", "level", "logger"} <= claimed.keys()


class _Collector(QuietHandler):
    """An OTLP/HTTP trace receiver: keeps every request body it is sent."""

    bodies: list[bytes]

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        type(self).bodies.append((self.path, self.rfile.read(length)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()


@pytest.fixture
def collector():
    handler = type("Collector", (_Collector,), {"bodies": []})
    server = LocalServer(handler)
    yield server.port, handler.bodies
    server.stop()


async def test_the_worker_exports_one_trace_per_run_over_otlp_when_asked(
    client, db, task_queue, start_workers, collector
):
    port, bodies = collector
    insert_invoices(db, 10, due=OVERDUE)
    start_workers(
        1,
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        OTEL_BSP_SCHEDULE_DELAY="100",
        OTEL_SERVICE_NAME="jobs-under-test",
    )
    # Two chunks: the begin does the first, the work activity (its take-over labelled with
    # the execution) the second.
    job = invoice_job(chunk_size=5)
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job.id).trigger()
        (row,) = await assert_eventually(completed(db), timeout=60)

        async def exported():
            spans, services = [], set()
            for path, body in list(bodies):
                assert path == "/v1/traces"
                request = ExportTraceServiceRequest.FromString(body)
                for resource_spans in request.resource_spans:
                    services |= {
                        a.value.string_value
                        for a in resource_spans.resource.attributes
                        if a.key == "service.name"
                    }
                    for scope_spans in resource_spans.scope_spans:
                        spans.extend(scope_spans.spans)
            names = {s.name for s in spans}
            assert {"CompleteWorkflow:ChunkedJobWorkflow", "db.begin_and_work"} <= names
            return spans, services

        spans, services = await assert_eventually(exported, timeout=30)
    assert services == {"jobs-under-test"}
    (root,) = [s for s in spans if s.name == "RunWorkflow:ChunkedJobWorkflow"]
    run = [s for s in spans if s.trace_id == root.trace_id]
    assert {"db.take_over", "RunActivity:send_invoice_reminders"} <= {s.name for s in run}
    assert len(run) == len(spans)
    claim = next(s for s in run if s.name == "db.take_over")
    attributes = {a.key: a.value for a in claim.attributes}
    assert attributes["execution_id"].int_value == row["id"]
    assert attributes["job"].string_value == JOB
