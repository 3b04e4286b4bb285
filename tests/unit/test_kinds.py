"""A job kind is declared in one line (`activities.run.kinds.JobKind`): its params model and its
description are read from the method that does its work."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from activities.run.kinds import JobKind, RuntimeKind
from jobs import kinds, runtime_kinds
from jobs.card_settlement.activities import SettlementActivities, SettlementParams
from jobs.monthly_billing.activities import BillingParams


class _Params(BaseModel):
    n: int = 1


class _Work:
    async def annotated(self, work: Any, params: _Params) -> None:
        """Do the slot's work.

        More detail that is not the description."""

    async def bare(self, work, params) -> None:
        pass


def test_the_params_model_and_description_come_from_the_work():
    kind = JobKind("k", _Work, activity="annotated")
    assert kind.params is _Params
    assert kind.description == "Do the slot's work."
    given = JobKind("k", _Work, activity="bare", params=_Params, description="told")
    assert (given.params, given.description) == (_Params, "told")


def test_work_without_a_params_model_is_refused():
    with pytest.raises(ValueError, match="job kind 'k': annotate its work's `params`"):
        JobKind("k", _Work, activity="bare")


def test_the_declared_kinds_read_their_models():
    declared = kinds()
    assert declared["card-settlement"].params is SettlementParams
    assert declared["card-settlement"].owner is SettlementActivities
    assert declared["monthly-billing"].params is BillingParams  # from its first step
    assert all(kind.description for kind in declared.values())


def test_a_runtime_kind_is_timed_by_its_heartbeat_timeout_and_allowance():
    kind = RuntimeKind("timed", SettlementParams)
    assert (kind.heartbeat, kind.timeout, kind.attempts, kind.allowance) == (
        timedelta(seconds=20),
        timedelta(minutes=10),
        10,
        timedelta(minutes=5),
    )
    given = RuntimeKind("timed", SettlementParams, heartbeat=timedelta(seconds=5))
    assert given.heartbeat == timedelta(seconds=5)
    # A heartbeat that is no shorter than the allowance would let a lost worker's slot be
    # late before it is handed on; a timeout no longer than the heartbeat is no timeout.
    with pytest.raises(ValueError, match="heartbeat must be positive and shorter than allowance"):
        RuntimeKind("timed", SettlementParams, allowance=timedelta(seconds=20))
    with pytest.raises(ValueError, match="heartbeat must be positive"):
        RuntimeKind("timed", SettlementParams, heartbeat=timedelta(0))
    with pytest.raises(ValueError, match="timeout must be longer than heartbeat"):
        RuntimeKind("timed", SettlementParams, timeout=timedelta(seconds=20))
    with pytest.raises(ValueError, match="attempts must be >= 1"):
        RuntimeKind("timed", SettlementParams, attempts=0)
    # Every runtime run is bounded (activities/common/lifetime.py): 10 series of 100 attempts of
    # 10 min (and 99 waits of 1 min) is over 7 days.
    with pytest.raises(ValueError, match="may take 7 days, 15:10:00 with retries, over the 7 days"):
        RuntimeKind("timed", SettlementParams, attempts=100)
    RuntimeKind("timed", SettlementParams, attempts=50)  # 10 x (500 + 49) min: under 4 days


def test_every_declared_runtime_kind_is_timed_and_the_audit_reads_its_allowance():
    from schedules.tenants.kinds import DEFAULT_ALLOWANCE, allowance_of

    for name, kind in runtime_kinds().items():
        assert kind.heartbeat < kind.allowance and kind.heartbeat < kind.timeout
        assert allowance_of(name) == kind.allowance
    assert allowance_of("a-kind-no-worker-knows") == DEFAULT_ALLOWANCE


def test_the_engine_reads_from_the_work_whether_a_kind_works_in_chunks():
    # No field: a kind whose work method hands its plan and step to `run_in_chunks`.
    chunked = {name for name, kind in kinds().items() if kind.chunked}
    assert chunked == {"card-settlement", "hourly-sync", "invoice-reminders", "weekly-cleanup"}
    assert not kinds()["nightly-reconcile"].chunked  # its slot fits in one transaction
    assert not kinds()["monthly-billing"].chunked  # a workflow of steps
    assert not JobKind("k", _Work, activity="annotated").chunked


def test_a_chunked_job_runs_as_chunked_job_workflow():
    from schedules.catalog.compile import job_run
    from schedules.catalog.model import default_catalog
    from workflows import ChunkedJobWorkflow, LocalTransactionJobWorkflow, workflow_for

    catalog = default_catalog()
    reminders = job_run(catalog["invoice-reminders"])
    assert reminders.chunked and not reminders.one_transaction
    assert workflow_for(reminders) == ChunkedJobWorkflow.run
    reconcile = job_run(catalog["nightly-reconcile"].model_copy(update={"depends_on": []}))
    assert workflow_for(reconcile) == LocalTransactionJobWorkflow.run
