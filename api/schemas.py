"""The OpenAPI schemas of the library's models, as the library's pydantic models state
them (nothing redefined): a schedule as stored (`Schedule`), and as a request states it
(`Definition`, without the fields the API fills in)."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from schedules.tenants import ApplyReport, FireTime
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
    return {
        **defs,
        "Schedule": stored,
        "ScheduleDefinition": stated,
        "ScheduleChanges": changes,
        "FireTime": _adapted(FireTime, defs),
        "ApplyReport": _adapted(ApplyReport, defs),
        **ENVELOPES,
    }


def _adapted(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    """The schema of a library dataclass, as pydantic reads it."""
    schema = TypeAdapter(cls).json_schema(mode="serialization", ref_template=REF)
    for name, sub in schema.pop("$defs", {}).items():
        defs.setdefault(name, sub)
    return schema


def _ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


_TIME = {"type": "string", "format": "date-time"}
_TIMES = {"type": "array", "items": _TIME}
_ROW = {"type": "object", "additionalProperties": True}
# The API's own envelopes around the library's answers.
ENVELOPES: dict[str, Any] = {
    "Problem": {
        "type": "object",
        "description": "RFC 9457 problem details; `detail` names the field and the value.",
        "properties": {
            "type": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
            "code": {"type": "string"},
        },
        "required": ["type", "title", "status", "detail", "code"],
    },
    "SchedulePage": {
        "type": "object",
        "properties": {
            "schedules": {"type": "array", "items": _ref("Schedule")},
            "next_cursor": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "required": ["schedules", "next_cursor"],
    },
    "Requested": {
        "type": "object",
        "description": "Slots asked for: recorded now, recorded before, or (a dry run) "
        "those that would be recorded.",
        "properties": {
            "schedule_id": {"type": "integer"},
            "recorded": _TIMES,
            "already": _TIMES,
            "would_run": _TIMES,
            "workflow_ids": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["schedule_id", "recorded", "already", "would_run", "workflow_ids"],
    },
    "FireTimes": {
        "type": "object",
        "properties": {
            "schedule_id": {"type": "integer"},
            "timezone": {"type": "string"},
            "fire_times": {"type": "array", "items": _ref("FireTime")},
        },
        "required": ["schedule_id", "timezone", "fire_times"],
    },
    "Explanation": {
        "type": "object",
        "properties": {
            "schedule_id": {"type": "integer"},
            "slot": _TIME,
            "fire_time": {"type": "boolean"},
            "workflow_id": {"type": "string"},
            "intent": {"anyOf": [_ROW, {"type": "null"}]},
            "execution": {"anyOf": [_ROW, {"type": "null"}]},
            "ran": {"type": "boolean"},
            "verdict": {"type": "string"},
        },
        "required": [
            "schedule_id",
            "slot",
            "fire_time",
            "workflow_id",
            "intent",
            "execution",
            "ran",
            "verdict",
        ],
    },
    "Runs": {
        "type": "object",
        "properties": {
            "schedule_id": {"type": "integer"},
            "runs": {"type": "array", "items": _ROW},
        },
        "required": ["schedule_id", "runs"],
    },
    "DesiredSet": {
        "type": "object",
        "description": "Every schedule the tenant should have; the others are deleted.",
        "properties": {
            "schedules": {"type": "array", "items": _ref("ScheduleDefinition")},
            "dry_run": {"type": "boolean", "default": False},
        },
        "required": ["schedules"],
        "additionalProperties": False,
    },
}


def body(component: str) -> dict[str, Any]:
    """A route's `openapi_extra`: its JSON body is the `component` schema."""
    ref = {"$ref": REF.format(model=component)}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}
