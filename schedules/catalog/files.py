"""The catalog's files: the user's catalog read as TOML tables, and the engine's own jobs
(the packaged `schedules/engine.toml`) that every catalog runs beside its own.

Unvalidated tables only: `schedules.catalog.model` validates them as `JobSpec`s.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from activities.runtime.shards import BUCKETS, DEFAULT_SHARDS
from core.errors import CatalogError
from schedules.catalog.problems import short

__all__ = ["engine_catalog", "engine_job_ids", "read_catalog", "with_engine_jobs"]

DISPATCHER = "runtime-dispatch-{}"  # the dispatcher of shard N
SESSION_STAGGER = 14  # minutes between the starts of the engine's sessions


def with_engine_jobs(data: dict[str, Any], shards: int = DEFAULT_SHARDS) -> dict[str, Any]:
    """`data` (a catalog's tables) and the engine's own jobs (the packaged
    `schedules/engine.toml`: the outbox relay, the runtime dispatchers), which a fleet runs
    whatever catalog it keeps.

    A catalog may restate an engine job's id with the same kind, to tune it: its table then
    replaces the engine's. It cannot give the id another kind (`CatalogError`), nor remove
    an engine job: one it leaves out is the engine's as packaged. `shards`: the dispatch
    shards, one dispatcher job each (`engine_catalog`)."""
    merged = dict(data)
    for job_id, table in engine_catalog(shards).items():
        mine = data.get(job_id)
        if mine is None:
            merged[job_id] = table
        elif not isinstance(mine, dict) or mine.get("kind") != table["kind"]:
            got = mine.get("kind") if isinstance(mine, dict) else mine
            raise CatalogError(
                f"job {job_id!r}: kind: {short(got)} refused: this id is the engine's job of "
                f"kind {table['kind']!r} (schedules/engine.toml); a catalog may restate it "
                "with that kind to tune it, not give the id to another kind; nothing was changed"
            )
    return merged


@cache
def engine_catalog(shards: int = DEFAULT_SHARDS) -> dict[str, Any]:
    """The engine's own jobs' tables (the packaged `schedules/engine.toml`), with one
    dispatcher per dispatch shard: `runtime-dispatch-0` as packaged, and copies of it
    `runtime-dispatch-1` .. `-(shards-1)` with their own shard."""
    tables = tomllib.loads(resources.files("schedules").joinpath("engine.toml").read_text())
    first = tables[DISPATCHER.format(0)]
    for shard in range(1, shards):
        tables[DISPATCHER.format(shard)] = first | {
            "description": first["description"].replace("shard 0", f"shard {shard}"),
            "params": first["params"] | {"shard": shard},
            "cron": session_cron(shard + 1),
        }
    return tables


def session_cron(order: int) -> str:
    """When the `order`-th of the engine's sessions starts (the relay 0, the dispatcher of
    shard N N+1): every 4 hours, `SESSION_STAGGER` minutes after the one before, so no two
    of the 17 there can be start within the same 10 minutes (issue 43, item 1)."""
    minutes = order * SESSION_STAGGER
    return f"{minutes % 60} {minutes // 60}-23/4 * * *"


def engine_job_ids() -> frozenset[str]:
    """The ids of the engine's own jobs, a dispatcher for every shard there can be: a sync
    never prunes their schedules, but for the dispatchers beyond the count it was told to
    retire (`schedules.sync.shards`)."""
    return frozenset(engine_catalog(BUCKETS))


def read_catalog(path: Path | None = None) -> dict[str, Any]:
    """The catalog file's tables (default: the packaged `schedules/jobs.toml`), unvalidated."""
    try:
        if path is None:
            text = resources.files("schedules").joinpath("jobs.toml").read_text()
            where = "schedules/jobs.toml"
        else:
            text, where = path.read_bytes().decode("utf-8"), str(path)
        data = tomllib.loads(text)
    except OSError as exc:
        raise CatalogError(f"cannot read the catalog {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise CatalogError(
            f"{path} is not UTF-8 text: byte 0x{exc.object[exc.start]:02x} on line {line} "
            "cannot be read; save the catalog as UTF-8"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        # Duplicate job ids land here too: TOML refuses a table defined twice.
        raise CatalogError(f"{where} is not valid TOML: {exc}") from None
    return data
