"""A job kind is declared in one line (`activities.kinds.JobKind`): its params model and its
description are read from the method that does its work."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from activities.kinds import JobKind
from jobs import kinds
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
