"""The project's exception hierarchy: every message names the job, field, value or id."""


class SchedulerError(Exception):
    """Base of every error this project raises on purpose."""


class SettingsError(SchedulerError):
    """An environment variable is missing or malformed."""


class MigrationError(SchedulerError):
    """A migration file is malformed or an applied one was changed."""


class CatalogError(SchedulerError):
    """The job catalog is invalid; nothing was sent to Temporal."""
