"""The HTTP API's contract is committed (`api/openapi.json`, issue 38, item 5): the
document the code serves must equal it, so a change of the API shows in review as a diff
of the contract. A deliberate change is recorded with

    .venv/bin/python -m tests.unit.test_api_openapi --update
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from api.app import create_app
from api.settings import ApiSettings

COMMITTED = Path(__file__).resolve().parents[2] / "api" / "openapi.json"


def served() -> dict[str, Any]:
    """The document the app serves at /openapi.json."""
    return create_app(ApiSettings()).openapi()


def text(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def test_the_served_document_is_the_committed_one():
    assert COMMITTED.read_text() == text(served()), (
        "api/openapi.json differs from what the code serves: review the change, then "
        "record it (python -m tests.unit.test_api_openapi --update)"
    )


def test_every_operation_needs_a_key_and_answers_problems():
    document = served()
    operations = [
        (path, method, operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    ]
    for path, method, operation in operations:
        if path in ("/healthz", "/readyz"):
            continue
        assert operation.get("security") == [{"apiKey": []}], (method, path)
        assert {"401", "404", "422", "429"} <= set(operation["responses"]), (method, path)


if __name__ == "__main__" and "--update" in sys.argv:
    COMMITTED.write_text(text(served()))
    print(f"{COMMITTED}: {len(served()['paths'])} paths")
