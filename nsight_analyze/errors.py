"""Errors a user can cause. The CLI prints their message as one line and exits non-zero."""


class UserError(Exception):
    """A problem with the user's input or environment, explained in one line."""

    exit_code = 2


class WorkspaceBusy(UserError):
    """Another process holds the workspace's write lock."""

    exit_code = 3
