"""Per-tenant quotas, from the operator's settings: how many schedules a tenant may keep,
and how often one may fire. A refusal is one line naming the tenant, the limit and the
value; nothing is written."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from core.errors import QuotaError
from schedules.tenants.model import Definition
from worker.settings import Settings, load_settings


@dataclass(frozen=True)
class Quotas:
    """`TENANT_MAX_SCHEDULES` and `TENANT_MIN_PERIOD_SECONDS` (worker/settings.py)."""

    max_schedules: int = Settings.model_fields["tenant_max_schedules"].default
    min_period: timedelta = timedelta(
        seconds=Settings.model_fields["tenant_min_period_seconds"].default
    )

    @classmethod
    def of(cls, settings: Settings) -> Quotas:
        return cls(
            max_schedules=settings.tenant_max_schedules,
            min_period=timedelta(seconds=settings.tenant_min_period_seconds),
        )

    @classmethod
    def from_environment(cls) -> Quotas:
        """The quotas this process is configured with (read from the environment)."""
        return cls.of(load_settings())

    def check_period(self, schedule: Definition) -> None:
        """Refuse a cron that fires more often than `min_period` (by the wall clock)."""
        period = schedule.timing.period()
        if period < self.min_period:
            raise QuotaError(
                f"tenant {schedule.tenant!r}: schedule {schedule.name!r} fires every "
                f"{_span(period)} ({schedule.cron!r}), more often than the minimum period "
                f"{_span(self.min_period)} (TENANT_MIN_PERIOD_SECONDS); nothing was written"
            )

    def check_count(self, tenant: str, stored: int, adding: int) -> None:
        """Refuse `adding` more schedules to a tenant that has `stored`."""
        if stored + adding > self.max_schedules:
            raise QuotaError(
                f"tenant {tenant!r}: {stored} schedule(s) stored and {adding} more would "
                f"exceed the limit of {self.max_schedules} (TENANT_MAX_SCHEDULES); "
                "nothing was written"
            )


def _span(period: timedelta) -> str:
    seconds = int(period.total_seconds())
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"
