"""nsight-analyze: answers from the Nsight traces of distributed GPU training.

The Python API (nsight_analyze.api, docs/python-api.md)::

    import nsight_analyze as na
    ws = na.open("job.duckdb")          # or na.ingest("traces/", db="job.duckdb")
    ws.partition(by="rank")             # pandas DataFrames (arrow=True: pyarrow Tables), ns
    na.compare("before.duckdb", "after.duckdb")

Its names are loaded on first use (module `__getattr__`), so `import nsight_analyze` and
`nsight-analyze --help` import neither duckdb nor pandas.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__version__ = "0.1.0"

# na.<name> -> nsight_analyze.api.<name>, imported when first asked for.
_API = ("open", "Workspace", "rank_report", "run_sql")
# na.ingest and na.compare are also the names of subpackages (nsight_analyze.ingest, .compare),
# which the import system sets as attributes of this package whenever they are imported. So that
# `na.ingest(...)` always works, those submodules are made callable: calling one calls the API
# function of the same name (nsight_analyze.api.ingest / .compare); as modules they are unchanged
# (`from nsight_analyze.ingest.run import ingest` is the library's own function).
_CALLABLE_SUBMODULES = ("ingest", "compare")


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from . import api

        return getattr(api, self.__name__.rsplit(".", 1)[-1])(*args, **kwargs)


def _callable(module: types.ModuleType) -> types.ModuleType:
    if type(module) is types.ModuleType:
        module.__class__ = _CallableModule
    return module


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        if name in _CALLABLE_SUBMODULES and isinstance(value, types.ModuleType):
            value = _callable(value)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name in _API:
        from . import api

        return getattr(api, name)
    if name in _CALLABLE_SUBMODULES:
        import importlib

        return _callable(importlib.import_module(f"{__name__}.{name}"))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API) | set(_CALLABLE_SUBMODULES))


__all__ = ["Workspace", "__version__", "compare", "ingest", "open"]
