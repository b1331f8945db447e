"""Errors a user can cause. The CLI prints their message as one line and exits non-zero."""

import math


class UserError(Exception):
    """A problem with the user's input or environment, explained in one line."""

    exit_code = 2


class WorkspaceBusy(UserError):
    """Another process holds the workspace's write lock."""

    exit_code = 3


# Exit status of a command that found nothing to work on (documented in docs/diagnose.md): distinct
# from 1 (a gate failed: findings, regression), 2 (bad input) and 3 (workspace busy), so that a CI
# gate never passes, and never looks like a plain failure, on a workspace without data.
NO_DATA_EXIT = 4


class NoData(UserError):
    """The workspace holds nothing a command can work on (no GPU operation, or no rank timeline)."""

    exit_code = NO_DATA_EXIT


def validate_positive(flag: str, value: float | None) -> None:
    """Raise UserError for a numeric option that is given but not a positive finite number: a
    peak of 0 gave MFU "inf%", a negative one a negative MFU, NaN or inf were taken as given."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UserError(f"{flag} must be a positive finite number, not {value!r}")
