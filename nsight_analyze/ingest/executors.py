"""Where the per-file tasks run: local worker processes (`--jobs N`) or a Dask cluster (`--dask`).

Both executors offer one call, `run(fn, items, done)`: `fn(item)` runs on a worker for every
item, and `done(item, result)` runs in the calling thread as each finishes (the client lands
it in the workspace meanwhile). A worker that dies mid-task costs its task one retry; a task
whose worker dies twice comes back as a `WorkerDied` result. The task functions themselves
return errors as values (rank_task), so nothing else is retried.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import UserError

DASK_TIMEOUT_ENV = "NSIGHT_ANALYZE_DASK_TIMEOUT"
DASK_TIMEOUT_S = 10.0
DASK_HINT = "pip install 'nsight-analyze[dask]' (it brings `distributed` from PyPI)"


@dataclass
class WorkerDied:
    """A task whose worker process died on it twice (killed, out of memory, crashed)."""

    message: str


Done = Callable[[Any, Any], None]


class Executor(Protocol):
    workers: int

    def run(self, fn: Callable[[Any], Any], items: Iterable[Any], done: Done) -> None: ...

    def close(self) -> None: ...


class LocalProcesses:
    """N worker processes on this machine (forkserver: clean processes, modules preloaded)."""

    def __init__(self, workers: int):
        self.workers = workers
        methods = multiprocessing.get_all_start_methods()
        self.context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        if "forkserver" in methods:
            self.context.set_forkserver_preload(["nsight_analyze.ingest.rank_task"])
        self.pool = self._new_pool(workers)

    def _new_pool(self, workers: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=workers, mp_context=self.context)

    def run(self, fn: Callable[[Any], Any], items: Iterable[Any], done: Done) -> None:
        futures = {self.pool.submit(fn, item): item for item in items}
        broken = []
        for future in as_completed(futures):
            try:
                result = future.result()
            except BrokenProcessPool:  # a worker died: every task still in flight fails with it
                broken.append(futures[future])
                continue
            done(futures[future], result)
        if broken:
            self._retry_alone(fn, broken, done)

    def _retry_alone(self, fn: Callable[[Any], Any], items: list, done: Done) -> None:
        """Each task caught in a broken pool once more, alone in a fresh worker, so that a
        second death is its own."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        for item in items:
            pool = self._new_pool(1)
            try:
                result = pool.submit(fn, item).result()
            except BrokenProcessPool:
                result = WorkerDied("its worker process died twice (killed, out of memory or crashed)")
            finally:
                pool.shutdown(wait=False, cancel_futures=True)
            done(item, result)
        self.pool = self._new_pool(self.workers)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _dask_timeout() -> float:
    """$NSIGHT_ANALYZE_DASK_TIMEOUT in seconds (default DASK_TIMEOUT_S): a positive number."""
    text = os.environ.get(DASK_TIMEOUT_ENV, "").strip()
    if not text:
        return DASK_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise UserError(f"${DASK_TIMEOUT_ENV}={text!r}: give the seconds to wait for the scheduler, e.g. 30")
    return value


class DaskCluster:
    """The tasks on a Dask cluster: `local:N`, a scheduler address or a scheduler file."""

    def __init__(self, address: str):
        try:
            import dask
            import distributed
        except ImportError:
            raise UserError(f"--dask needs the Dask extra: {DASK_HINT}") from None
        self.cluster = None
        timeout = _dask_timeout()
        try:
            if address.startswith("local:"):
                workers = _local_workers(address)
                # a task whose worker dies is retried once, then reported (KilledWorker)
                dask.config.set({"distributed.scheduler.allowed-failures": 1})
                self.cluster = distributed.LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                    silence_logs=50,
                )
                self.client = distributed.Client(self.cluster, timeout=timeout)
            elif address.endswith(".json") or Path(address).is_file():
                _check_scheduler_file(address)
                self.client = distributed.Client(scheduler_file=address, timeout=timeout)
            else:
                self.client = distributed.Client(address, timeout=timeout)
        except UserError:
            self.close()
            raise
        except (OSError, TimeoutError, ValueError) as exc:
            self.close()
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UserError(
                f"cannot reach the Dask scheduler at {address} within {timeout:g} s ({reason}); "
                f"check the address or set ${DASK_TIMEOUT_ENV}"
            ) from None
        except Exception as exc:  # something answered, but not Dask's handshake (a dashboard, a proxy:
            # distributed read an HTTP reply as a frame length and asked numpy for exabytes)
            self.close()
            raise UserError(
                f"the server at {address} did not answer as a Dask scheduler ({type(exc).__name__} in "
                "the handshake): give the scheduler's address (tcp://HOST:8786 by default), not its "
                "dashboard's or another service's"
            ) from None
        self.workers = max(1, len(self.client.scheduler_info().get("workers", {})))

    def run(self, fn: Callable[[Any], Any], items: Iterable[Any], done: Done) -> None:
        from distributed import as_completed as dask_completed

        items = list(items)
        futures = {self.client.submit(fn, item, pure=False): item for item in items}
        for future in dask_completed(futures):
            item = futures[future]
            try:
                result = future.result()
            except Exception as exc:  # KilledWorker: the scheduler gave up on it
                if type(exc).__name__ != "KilledWorker":
                    raise
                result = WorkerDied("its Dask worker died on it twice (killed, out of memory or crashed)")
            done(item, result)

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()
        if self.cluster is not None:
            self.cluster.close()


def _check_scheduler_file(address: str) -> None:
    """A scheduler file is JSON with the scheduler's "address" (what `dask scheduler
    --scheduler-file` writes). Why checked here: distributed read an empty or garbled one as a
    handshake failure, which blamed a server that was never contacted."""
    import json

    path = Path(address)
    if not path.is_file():
        raise UserError(f"--dask {address}: no such scheduler file")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(
            f"--dask {address}: not a Dask scheduler file ({str(exc).splitlines()[0]}): give the file "
            "`dask scheduler --scheduler-file FILE` writes, or the scheduler's address"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("address"), str):
        raise UserError(
            f'--dask {address}: not a Dask scheduler file (no "address" in it): give the file '
            "`dask scheduler --scheduler-file FILE` writes, or the scheduler's address"
        )


def _local_workers(address: str) -> int:
    text = address.partition(":")[2]
    if not text.isdigit() or int(text) < 1:
        raise UserError(f"--dask {address}: use local:N with N worker processes, e.g. local:4")
    return int(text)


def open_executor(jobs: int, dask: str | None) -> Executor:
    """The Dask cluster when `dask` is given, else `jobs` local worker processes."""
    return DaskCluster(dask) if dask is not None else LocalProcesses(jobs)
