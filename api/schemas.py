"""The OpenAPI schemas of the library's models, as the library's pydantic models state
them (nothing redefined): a schedule as stored (`Schedule`), and as a request states it
(`Definition`, without the fields the API fills in)."""

from __future__ import annotations

from typing import Any

from schedules.tenants.model import Definition, Schedule

REF = "#/components/schemas/{model}"


def _schema(model: type, mode: str, defs: dict[str, Any]) -> dict[str, Any]:
    schema = model.model_json_schema(mode=mode, ref_template=REF)  # type: ignore[attr-defined]
    for name, sub in schema.pop("$defs", {}).items():
        if defs.setdefault(name, sub) != sub:
            raise AssertionError(f"two schemas named {name} differ")
    return schema


def components() -> dict[str, Any]:
    """`components.schemas` entries for the library's models: `Schedule`,
    `ScheduleDefinition` (a create's body: `tenant` implied by a tenant's key) and
    `ScheduleChanges` (an update's body: any updatable field)."""
    defs: dict[str, Any] = {}
    stored = _schema(Schedule, "serialization", defs)
    stated = _schema(Definition, "validation", defs)
    stated["properties"].pop("calendar_definition")  # resolved from `calendar`
    stated["required"] = [f for f in stated["required"] if f != "tenant"]
    stated["title"] = "ScheduleDefinition"
    stated["description"] = (
        "A runtime schedule as the application states it; `tenant` is the key's own "
        "(an operator's key names it)."
    )
    changes = {
        **stated,
        "title": "ScheduleChanges",
        "description": "The fields to change (any updatable field); the others keep their value.",
        "properties": {
            k: v
            for k, v in stated["properties"].items()
            if k not in ("tenant", "name", "paused", "note")
        },
        "required": [],
    }
    return {**defs, "Schedule": stored, "ScheduleDefinition": stated, "ScheduleChanges": changes}


def body(component: str) -> dict[str, Any]:
    """A route's `openapi_extra`: its JSON body is the `component` schema."""
    ref = {"$ref": REF.format(model=component)}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}
