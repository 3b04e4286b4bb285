"""The project's exception hierarchy: every message names the job, field, value or id."""


class SchedulerError(Exception):
    """Base of every error this project raises on purpose."""

    # What a command-line entry point exits with when this error stops it.
    exit_code = 2


class SettingsError(SchedulerError):
    """An environment variable is missing or malformed."""


class MigrationError(SchedulerError):
    """A migration file is malformed or an applied one was changed."""


class CatalogError(SchedulerError):
    """The job catalog is invalid; nothing was sent to Temporal."""


class TemporalUnreachableError(SchedulerError):
    """Temporal did not answer within the allowed time."""

    exit_code = 1
