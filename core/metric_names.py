"""The names of the metrics the workers export, as Prometheus sees them.

One list shared by the instrumentation (worker/telemetry.py), the alert rules in
`deploy/prometheus/` and their test, so a renamed metric breaks a test, not an alert.
"""

# Counter: finished runs per job and outcome
# (status: completed, failed, compensated, skipped, already_completed, superseded).
RUNS = "scheduled_job_runs_total"
# Histogram: how long a run's work took, per job.
DURATION = "scheduled_job_duration_seconds"
# Histogram: actual start minus scheduled time, per job.
LATENESS = "scheduled_job_lateness_seconds"
# Gauge: Unix time of the job's last completed run.
LAST_SUCCESS = "scheduled_job_last_success_timestamp_seconds"
# Gauge: how long after its last success a job's next one is overdue (the longest gap
# between its fire times + jitter + alert_grace, from the catalog).
ALERT_AFTER = "scheduled_job_alert_after_seconds"
# Counter: runs recorded as skipped, per job and reason
# (reason: starting_deadline, catchup_policy, repeated_local_time, ...).
SKIPS = "scheduled_job_skips_total"
# Counter: missed fire times dropped because they exceeded the job's catch-up cap.
CATCHUP_GAPS = "scheduled_job_catchup_gap_runs_total"
# Gauges: outbox messages waiting for delivery, and those given up on.
OUTBOX_PENDING = "outbox_messages_pending"
OUTBOX_DEAD = "outbox_messages_dead"
# Gauges, per runtime kind (never per tenant or schedule): active runtime schedules whose
# next slot has been due over 5 minutes (their dispatcher is down or behind), and those
# whose last run failed. Runtime slots' runs, lateness and duration are the counters and
# histograms above, labelled job="runtime:<kind>".
RUNTIME_BEHIND = "scheduled_job_runtime_behind"
RUNTIME_FAILING = "scheduled_job_runtime_failing"
# Active runtime schedules whose due slot their tenant's limit defers (issue 40), by kind.
RUNTIME_DEFERRED = "scheduled_job_runtime_deferred"

ALL = (
    RUNS,
    DURATION,
    LATENESS,
    LAST_SUCCESS,
    ALERT_AFTER,
    SKIPS,
    CATCHUP_GAPS,
    OUTBOX_PENDING,
    OUTBOX_DEAD,
    RUNTIME_BEHIND,
    RUNTIME_FAILING,
    RUNTIME_DEFERRED,
)
