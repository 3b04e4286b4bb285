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
    closest_zone,
    plain_offset,
    second_occurrence_of,
    zone,
    zone_names,
    zone_problem,
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


@pytest.mark.parametrize(
    ("name", "closest"),
    [
        ("europe/london", "Europe/London"),  # case
        ("London", "Europe/London"),  # a city alone
        ("new york", "America/New_York"),  # spaces for underscores
        ("Europe/Londn", "Europe/London"),  # a typo
        ("America/New_Yrok", "America/New_York"),
        ("Mars/Olympus", None),
        ("Z" * 5000, None),
    ],
)
def test_an_unknown_zone_is_answered_with_the_closest_known_one(name, closest):
    assert closest_zone(name) == closest
    problem = zone_problem(name)
    assert problem.startswith("is not a known IANA time zone: ")
    assert (f"(did you mean {closest!r}?)" in problem) == (closest is not None)
    with pytest.raises(UnknownZoneError, match="did you mean" if closest else "known IANA"):
        zone(name)


@pytest.mark.parametrize(
    ("name", "region", "fixed"),
    [
        ("EST", "America/New_York", "Etc/GMT+5"),
        ("MST", "America/Denver", "Etc/GMT+7"),
        ("HST", "Pacific/Honolulu", "Etc/GMT+10"),
        ("EST5EDT", "America/New_York", None),
        ("CST6CDT", "America/Chicago", None),
        ("MST7MDT", "America/Denver", None),
        ("PST8PDT", "America/Los_Angeles", None),
    ],
)
def test_a_legacy_zone_is_refused_for_a_new_job_pointing_at_the_region(name, region, fixed):
    problem = zone_problem(name)
    assert f"{name!r} is a legacy POSIX zone, not a region's local time" in problem
    assert f"e.g. {region!r}" in problem
    assert (f"for a fixed offset give {fixed!r}" in problem) == (fixed is not None)
    # The zone the message points at is a region's, and the fixed one has the legacy
    # zone's standard offset all year.
    assert zone_problem(region) is None
    if fixed is not None:
        assert zone_problem(fixed) is None
        january, july = datetime(2027, 1, 15, tzinfo=UTC), datetime(2027, 7, 15, tzinfo=UTC)
        for instant in (january, july):
            assert (
                instant.astimezone(zone(fixed)).utcoffset()
                == instant.astimezone(zone(name)).utcoffset()
            )
    # A timing already stored or recorded with one still reads (`legacy=True`).
    assert zone_problem(name, legacy=True) is None


def test_the_second_of_a_repeated_wall_clock_time_names_the_first():
    first = datetime(2027, 11, 7, 5, 30, tzinfo=UTC)  # 01:30 EDT
    second = datetime(2027, 11, 7, 6, 30, tzinfo=UTC)  # 01:30 EST
    assert second_occurrence_of(second, "America/New_York") == first
    assert second_occurrence_of(first, "America/New_York") is None
    assert second_occurrence_of(second, "UTC") is None
    # A spring-forward night repeats nothing.
    assert (
        second_occurrence_of(datetime(2027, 3, 14, 7, 30, tzinfo=UTC), "America/New_York") is None
    )
