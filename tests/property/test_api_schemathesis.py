"""Schemathesis against the live HTTP API (issue 38, acceptance): every operation of the
committed OpenAPI document, generated requests sent with a tenant's key to uvicorn on a
free port over the real pool and PostgreSQL. No answer may be a server error, and every
answer must be one the document declares (status, content type, body schema).

The ids 1-3 are the fuzzing tenant's schedules and 4 another tenant's, so generated ids
reach real schedules, and the other tenant's must answer as missing ones. The budget is a
fraction of the Hypothesis profile's (tests/property/conftest.py): `ci` keeps it under a
minute; `HYPOTHESIS_PROFILE=long` is the run by hand.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest
import schemathesis
from hypothesis import given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.settings import ApiSettings
from tests.helpers import TEMPLATE_DB
from tests.helpers.api import LiveApi, serving
from tests.unit.test_api_openapi import COMMITTED

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
SEED = {
    "kind": "test-noop",
    "cron": "0 8 * * 1",
    "timezone": "America/New_York",
}
_numbers = itertools.count()


@pytest.fixture(scope="module")
async def fuzzed(postgres) -> AsyncIterator[tuple[LiveApi, str]]:
    """The live API on a database of its own for the module, and the fuzzing tenant's key."""
    url = postgres.create_database(f"api_fuzz_{next(_numbers)}", template=TEMPLATE_DB)
    # No rate limit to speak of: the fuzzer sends as fast as the server answers.
    unlimited = ApiSettings(database_url=url, api_rate_per_second=1e5, api_rate_burst=10**6)
    async with serving(unlimited) as live:
        key, other = await live.key("fuzz"), await live.key("other")
        with live.client(key) as mine, live.client(other) as theirs:
            for name in ("a", "b", "c"):
                assert mine.post("/v1/schedules", json=SEED | {"name": name}).status_code == 201
            assert theirs.post("/v1/schedules", json=SEED | {"name": "a"}).status_code == 201
        yield live, key


# Schemathesis's own pytest integration (`from_fixture`) fails on pytest 9 ('Function'
# object has no attribute '_nodeid'); each operation's strategy under `given` is the same.
SCHEMA = schemathesis.openapi.from_path(COMMITTED)
OPERATIONS = {op.label: op for op in (found.ok() for found in SCHEMA.get_all_operations())}


@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_no_server_error_and_no_answer_outside_the_document(label, fuzzed):
    live, key = fuzzed
    headers = {"Authorization": f"Bearer {key}"}

    @given(case=OPERATIONS[label].as_strategy())
    @settings(max_examples=max(8, settings.default.max_examples // 6))
    def answers_as_documented(case):
        case.call_and_validate(base_url=live.url, headers=headers, checks=CHECKS)

    answers_as_documented()
