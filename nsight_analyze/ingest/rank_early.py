"""What an ingest's rank pipeline hands `analysis.refresh`: the stored rank results it computed
while the files loaded (rank_pipeline.py says how and why they equal refresh's own).

Why a module of its own: `rank_pipeline` builds on `analysis` (it runs its rank-local step) and
`refresh` takes what it made, so the one type both read sits below both.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Early:
    """What the pipeline computed: its ranks' stored rank results, in tables `prefix` + name."""

    stamp: str  # analysis.global_stamp when it started
    prefix: str  # the tables' prefix (analysis.EARLY)
    names: list[str] = field(default_factory=list)  # the stored rank results it computes
    ranks: list[int] = field(default_factory=list)
    failed: bool = False  # a batch failed or was interrupted: nothing here may be used

    def tables(self) -> list[str]:
        return [f"{self.prefix}{name}" for name in self.names] if self.ranks else []
