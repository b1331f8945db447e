"""Byte-compile the package before a benchmark times it in fresh processes.

Why: an installed package carries its bytecode (pip compiles it at install time), but a checkout
run with PYTHONDONTWRITEBYTECODE=1 (this project's CI and sandboxes set it) compiles every module
again in every process: 0.15 s of a 2.5 s Kineto ingest and 0.3 s of `report` on a 2-core
machine, time no user waits for. The bytecode goes into the package's __pycache__ folders
(ignored by git), as an import would write it.
"""

from __future__ import annotations

import compileall
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "nsight_analyze"


def package_bytecode() -> None:
    """Write the package's bytecode where imports look for it (a no-op when it is current)."""
    compileall.compile_dir(PACKAGE, quiet=1)
