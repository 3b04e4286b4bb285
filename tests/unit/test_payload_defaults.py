"""A payload model's defaults never change (`core.payloads`).

The project's data converter leaves a model's fields at their defaults out of a run's
inputs and results, so every history written since holds those defaults by omission: a
default changed in a later release would change what a running workflow reads, on the
worker of that release and on every replay. `payload_defaults.json` holds the default of
every field of every model the workers know; a new field or model is recorded with

    .venv/bin/python -m tests.unit.test_payload_defaults --update
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined, to_json
from pydantic_settings import BaseSettings

from core.payloads import data_converter

RECORDED = Path(__file__).with_name("payload_defaults.json")
# What runs' inputs and results are made of (the catalog's and the CLI's models are not).
PACKAGES = ("activities", "core", "jobs", "timing", "workflows")


def _models() -> list[type[BaseModel]]:
    for name in PACKAGES:  # every module, so the models are the same whatever ran before
        package = importlib.import_module(name)
        for module in pkgutil.walk_packages(package.__path__, f"{name}."):
            importlib.import_module(module.name)
    seen: dict[str, type[BaseModel]] = {}
    todo = list(BaseModel.__subclasses__())
    while todo:
        model = todo.pop()
        todo.extend(model.__subclasses__())
        if model.__module__.split(".")[0] in PACKAGES and not issubclass(model, BaseSettings):
            seen[f"{model.__module__}.{model.__qualname__}"] = model
    return [seen[name] for name in sorted(seen)]


def _default(field: Any) -> str | None:
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return None  # required: always written
    else:
        value = field.default
    return to_json(value, fallback=repr).decode()


def current() -> dict[str, dict[str, str]]:
    """Each model's fields that have a default, with it as JSON."""
    found: dict[str, dict[str, str]] = {}
    for model in _models():
        defaults = {
            name: default
            for name, field in model.model_fields.items()
            if (default := _default(field)) is not None
        }
        if defaults:
            found[f"{model.__module__}.{model.__qualname__}"] = defaults
    return found


def test_no_default_of_a_payload_model_ever_changes():
    recorded = json.loads(RECORDED.read_text())
    changed = [
        f"{model}.{name}: recorded {recorded[model][name]}, now {default}"
        for model, defaults in current().items()
        for name, default in defaults.items()
        if name in recorded.get(model, {}) and recorded[model][name] != default
    ]
    assert not changed, (
        "a payload model's default changed; histories written without the field would read "
        "the new one. Keep the default and add a field instead:\n" + "\n".join(changed)
    )


def test_every_default_is_recorded():
    recorded = json.loads(RECORDED.read_text())
    missing = [
        f"{model}.{name}"
        for model, defaults in current().items()
        for name in defaults
        if name not in recorded.get(model, {})
    ]
    assert not missing, (
        "defaults not yet recorded (python -m tests.unit.test_payload_defaults --update): "
        + ", ".join(missing)
    )


def test_a_model_is_written_without_its_defaults_and_read_back_whole():
    from activities.catchup.missed import PlanResult
    from workflows.models import JobRun

    converter = data_converter.payload_converter
    run = JobRun(job_name="nightly", activity="reconcile_ledger", params={"threshold": 1})
    (payload,) = converter.to_payloads([run])
    assert json.loads(payload.data) == {
        "job_name": "nightly",
        "activity": "reconcile_ledger",
        "params": {"threshold": 1},
    }
    assert converter.from_payloads([payload], [JobRun]) == [run]
    # Written whole (by an older release): read the same.
    whole = converter.to_payloads([run.model_dump(mode="json")])
    assert converter.from_payloads(whole, [JobRun]) == [run]
    # Nested models and lists too; a value that is not a model is written as before.
    (empty,) = converter.to_payloads([PlanResult()])
    assert empty.data == b"{}"
    assert converter.to_payloads([{"a": None}])[0].data == b'{"a":null}'


if __name__ == "__main__" and "--update" in sys.argv:
    recorded = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    for model, defaults in current().items():  # never overwrites a recorded default
        recorded[model] = {**defaults, **recorded.get(model, {})}
    RECORDED.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print(f"{RECORDED}: {sum(map(len, recorded.values()))} defaults of {len(recorded)} models")
