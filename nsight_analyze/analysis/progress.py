"""The progress bar a long analysis shows on a terminal.

Why a module of its own: the analysis reports progress through a plain callback
(`update(done, total)`); only the caller that owns the terminal (the workspace opening for a
command) builds the bar, and pipes and CI get none.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

# What the analysis calls as it goes: update(batches done, batches in all).
Progress = Callable[[int, int], None]


def tty_progress(label: str) -> tuple[Progress | None, Callable[[], None]]:
    """A rich progress bar on stderr when it is a terminal (nothing in pipes and CI)."""
    if not sys.stderr.isatty():
        return None, lambda: None
    from rich.console import Console
    from rich.progress import Progress as Bar

    bar = Bar(transient=True, console=Console(stderr=True))
    bar.start()
    task = bar.add_task(label, total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return update, bar.stop
