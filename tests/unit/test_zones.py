"""One time zone database: every zone comes from the `tzdata` package (`timing.zones`)."""

from __future__ import annotations

import ast
import copy
import pickle
import zoneinfo
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import pytest
import tzdata

from timing.zones import (
    TZDATA_VERSION,
    UnknownZoneError,
    ZoneInfo,
    changes,
    plain_offset,
    zone,
    zone_names,
)

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ["core", "timing", "activities", "workflows", "jobs", "worker", "schedules", "devstack"]


def test_zones_are_read_from_the_tzdata_package_whatever_the_system_has():
    assert TZDATA_VERSION == tzdata.IANA_VERSION
    name = "America/Vancouver"
    with resources.files("tzdata.zoneinfo").joinpath(name).open("rb") as data:
        packaged = zoneinfo.ZoneInfo.from_file(data, key=name)
    for month in range(1, 13):
        moment = datetime(2028, month, 15, tzinfo=UTC)
        assert moment.astimezone(zone(name)).utcoffset() == moment.astimezone(packaged).utcoffset()


def test_the_zoneinfo_stand_in_is_the_same_zone_and_survives_pickling():
    tz = ZoneInfo("Europe/London")
    assert tz is zone("Europe/London") and isinstance(tz, zoneinfo.ZoneInfo)
    local = datetime(2027, 7, 1, 12, tzinfo=tz)
    assert pickle.loads(pickle.dumps(local)).tzinfo is tz
    assert copy.deepcopy(local).tzinfo is tz


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../../etc/passwd", "europe/london"])
def test_an_unknown_zone_is_refused_as_zoneinfo_would(name):
    with pytest.raises(UnknownZoneError) as caught:
        zone(name)
    assert isinstance(caught.value, zoneinfo.ZoneInfoNotFoundError)
    assert isinstance(caught.value, ValueError)


def test_offset_changes_to_the_second():
    spring, autumn = changes(
        "America/New_York", datetime(2027, 1, 1, tzinfo=UTC), datetime(2028, 1, 1, tzinfo=UTC)
    )
    assert spring.at == datetime(2027, 3, 14, 7, tzinfo=UTC)
    assert spring.span == (datetime(2027, 3, 14, 2), datetime(2027, 3, 14, 3))
    assert autumn.at == datetime(2027, 11, 7, 6, tzinfo=UTC)
    assert plain_offset("America/New_York", spring.at.date()) is None
    assert plain_offset("America/New_York", datetime(2027, 3, 15).date()) is not None
    assert len(zone_names()) > 500


def test_no_product_code_reads_zones_past_timing_zones():
    """`zoneinfo.ZoneInfo(name)` would read the system's files first: only `timing.zones`
    may touch the `zoneinfo` module; everything else imports its stand-in. The audit's
    oracle is the exception by design: it shares no code with `timing/` (issue 18), and
    reads the `tzdata` package's files itself (`ZoneInfo.from_file`), never the system's."""
    allowed = {ROOT / "timing" / "zones.py", ROOT / "schedules" / "audit" / "oracle.py"}
    offenders = []
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            if path in allowed:
                continue
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module == "zoneinfo":
                    names = {alias.name for alias in node.names}
                    if names - {"ZoneInfoNotFoundError"}:
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
                elif isinstance(node, ast.Import) and any(a.name == "zoneinfo" for a in node.names):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders
