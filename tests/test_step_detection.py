"""Steps without NVTX (issue 16.6): detected from the optimizer's bursts, else (settings
periodic_steps = 'on', the default; `--no-periodic-steps` turns it off) from a kernel that runs
once per step (`steps.source = 'periodic'`), else the whole capture, and said which.

Oracles: the NVTX step windows of the same synthetic trace (the generator's annotations, checked
against its ground truth in test_partition) once the annotations and optimizer kernels are
hidden; on real files, kernel start times read straight from the SQLite export with sqlite3:
CloverLeaf's calc_dt (once per timestep) for its steps, and for windows cut from inside one long
step (layers repeating, not steps) the detector's own rules recomputed on the raw kernels.
"""

from __future__ import annotations

import sqlite3
import statistics

import pytest
from click.testing import CliRunner
from conftest import TRACES

from nsight_analyze import analysis, synth
from nsight_analyze.cli import main
from nsight_analyze.ingest.run import ingest
from nsight_analyze.store.workspace import open_workspace

H100 = TRACES / "nsys" / "nsys-ai" / "h100_2gpu_1s.sqlite"
BEFORE = TRACES / "nsys" / "nsys-ai" / "mfu_2gpu_before.sqlite"
MOCK = TRACES / "nsys" / "nsys-ai" / "mock.sqlite"
CLOVER = TRACES / "nsys" / "pipit" / "perlmutter-cloverleaf-cuda.sqlite"
requires_shared = pytest.mark.skipif(not H100.exists(), reason=f"{H100} (shared real traces) is absent")


def _windows(con) -> list[tuple]:
    return con.execute(
        "SELECT rank, step, start_ns, end_ns, source FROM steps ORDER BY rank, step"
    ).fetchall()


@pytest.fixture(scope="module")
def hidden(tmp_path_factory):
    """A 2-rank, 6-step synthetic job: its NVTX step windows, then the windows detected once the
    step pattern matches nothing and the optimizer kernels are renamed."""
    out = tmp_path_factory.mktemp("periodic")
    synth.generate(out, ranks=2, steps=6, kernels_per_step=60, seed=3, truth=False)
    db = out / "ws.duckdb"
    ingest([out], db)
    con = open_workspace(db)
    try:
        nvtx = _windows(con)
        con.execute("UPDATE settings SET value = '^no step matches this$' WHERE key = 'step_pattern'")
        # periodic_steps is left at its default ('on')
        renamed = con.execute(
            "UPDATE kernels SET name = regexp_replace(lower(name), 'adam|sgd|optim', 'upd', 'g'), "
            "short_name = regexp_replace(lower(short_name), 'adam|sgd|optim', 'upd', 'g') "
            "WHERE regexp_matches(lower(name), 'adam|sgd|optim')"
        ).fetchone()[0]
        analysis.refresh(con, force=True)
        return nvtx, _windows(con), renamed, db
    finally:
        con.close()


def test_periodic_steps_match_the_annotated_ones(hidden):
    nvtx, detected, renamed, _ = hidden
    assert renamed > 0  # the optimizer kernels existed and are hidden now
    assert {w[4] for w in nvtx} == {"nvtx"} and {w[4] for w in detected} == {"periodic"}
    for rank in (0, 1):
        want = [w[3] - w[2] for w in nvtx if w[0] == rank]
        got = [w[3] - w[2] for w in detected if w[0] == rank]
        assert len(got) == len(want) == 6
        # the first window starts at the rank's first operation in both; the others are one
        # period each, delimited by another kernel of the step than the NVTX range's end
        for g, w in zip(got[1:], want[1:]):
            assert g == pytest.approx(w, rel=0.02)


def test_summary_says_the_steps_are_periodic(hidden):
    db = hidden[3]
    result = CliRunner().invoke(main, ["summary", "--by", "step", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "steps from: periodic" in result.output


def _raw_kernels(path, device_sql: str = "(SELECT min(deviceId) FROM CUPTI_ACTIVITY_KIND_KERNEL)"):
    """(name, start, end) of one device's kernels, read with sqlite3 from the export itself."""
    raw = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return raw.execute(
            'SELECT s.value, k.start, k."end" FROM CUPTI_ACTIVITY_KIND_KERNEL k '
            f"JOIN StringIds s ON s.id = k.demangledName WHERE k.deviceId = {device_sql} ORDER BY k.start"
        ).fetchall()
    finally:
        raw.close()


def _regular(kernels: list[tuple]) -> dict[str, list[int]]:
    """The detector's "regular" names recomputed in Python on raw kernels (docs/metrics.md):
    >= 3 runs, every start-to-start interval within 10 % of their mean, runs spanning at least
    half of the device's kernel activity. Name -> its run starts."""
    span = max(k[2] for k in kernels) - min(k[1] for k in kernels)
    starts: dict[str, list[int]] = {}
    for name, start, _ in kernels:
        starts.setdefault(name, []).append(start)
    out = {}
    for name, s in starts.items():
        gaps = [b - a for a, b in zip(s, s[1:])]
        if len(s) < 3 or not gaps or sum(gaps) <= 0:
            continue
        mean = statistics.fmean(gaps)
        if max(gaps) <= 1.1 * mean and min(gaps) >= 0.9 * mean and sum(gaps) >= 0.5 * span:
            out[name] = s
    return out


def _sources(db) -> set[str]:
    con = open_workspace(db, read_only=True)
    try:
        return {r[4] for r in _windows(con)}
    finally:
        con.close()


@pytest.mark.skipif(not CLOVER.exists(), reason=f"{CLOVER} (shared real traces) is absent")
def test_real_cloverleaf_steps_are_its_timesteps_by_default(tmp_path):
    """CloverLeaf (no NVTX, no optimizer) calls calc_dt once per hydro timestep: by default its
    steps are the timesteps, one per calc_dt run, not double steps (its advection kernels
    alternate their sweep order, so a few of them repeat only every second timestep)."""
    db = tmp_path / "ws.duckdb"
    ingest([CLOVER], db)
    con = open_workspace(db, read_only=True)
    try:
        rows = con.execute("SELECT source, end_ns - start_ns FROM steps ORDER BY step").fetchall()
    finally:
        con.close()
    calc_dt = [k[1] for k in _raw_kernels(CLOVER) if "calc_dt_kernel" in k[0]]
    assert len(calc_dt) == 10  # sqlite3 on the raw file: 10 timesteps in the capture
    assert {r[0] for r in rows} == {"periodic"} and len(rows) == len(calc_dt)
    intervals = [b - a for a, b in zip(calc_dt, calc_dt[1:])]
    assert statistics.median(r[1] for r in rows[1:]) == pytest.approx(statistics.median(intervals), rel=0.02)
    result = CliRunner().invoke(main, ["summary", "--by", "step", "--db", str(db)])
    assert result.exit_code == 0 and "steps from: periodic" in result.output, result.output
    # turned off, the whole capture is one window again, and said so
    result = CliRunner().invoke(main, ["summary", "--no-periodic-steps", "--db", str(db)])
    assert result.exit_code == 0 and "periodic_steps set to off" in result.output, result.output
    assert _sources(db) == {"capture"}


@pytest.mark.skipif(not CLOVER.exists(), reason=f"{CLOVER} (shared real traces) is absent")
def test_ingest_takes_no_periodic_steps(tmp_path):
    db = tmp_path / "ws.duckdb"
    result = CliRunner().invoke(main, ["ingest", str(CLOVER), "--db", str(db), "--no-periodic-steps", "-q"])
    assert result.exit_code == 0, result.output
    assert _sources(db) == {"capture"}  # periodic by default (test above), off as asked


@requires_shared
def test_real_h100_encoder_layers_are_not_steps(tmp_path):
    """h100_2gpu_1s is a 1 s window of FastVideo inference: 24 FP32 encoder layers repeat every
    29 ms, then other work runs for the rest of the window. The layers are regular, but they do
    not tile the capture, so no steps are claimed: the capture is one window."""
    db = tmp_path / "ws.duckdb"
    ingest([H100], db)
    assert _sources(db) == {"capture"}
    kernels = _raw_kernels(H100)
    regular = _regular(kernels)
    assert regular  # the layer pattern exists (sqlite3 on the raw file) ...
    last_end = max(k[2] for k in kernels)
    for starts in regular.values():  # ... and leaves over two periods after its last run
        period = (starts[-1] - starts[0]) / (len(starts) - 1)
        assert last_end - starts[-1] > 2 * period
    result = CliRunner().invoke(main, ["summary", "--by", "step", "--db", str(db)])
    assert result.exit_code == 0 and "no steps found" in result.output, result.output


@pytest.mark.skipif(not BEFORE.exists(), reason=f"{BEFORE} (shared real traces) is absent")
def test_real_fsdp_blocks_of_one_forward_are_not_steps(tmp_path):
    """mfu_2gpu_before is a 300 ms window of one training step's forward pass: its NVTX ranges
    `FSDP::pre_forward (blocks.N._checkpoint_wrapped_module)` name blocks 3 to 19 once each per
    rank, one every ~16.6 ms, and no backward kernel runs in the window. The per-block kernels
    repeat, but their intervals stray over 10 % from their mean, so no two regular names share
    a run count and no steps are claimed (the former opt-in detector found 16 "steps" here)."""
    db = tmp_path / "ws.duckdb"
    ingest([BEFORE], db)
    assert _sources(db) == {"capture"}
    for device in (0, 1):  # the detector's rule recomputed on each rank's raw kernels
        counts = [len(s) for s in _regular(_raw_kernels(BEFORE, str(device))).values()]
        assert len(counts) == len(set(counts))
    raw = sqlite3.connect(f"file:{BEFORE}?mode=ro", uri=True)
    try:  # the per-block evidence, read with sqlite3: each rank enters each block once
        blocks = raw.execute(
            "SELECT count(*), count(DISTINCT substr(t, 1, instr(t, ')'))) FROM (SELECT n.globalTid AS tid, "
            "coalesce(n.text, s.value) AS t FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId) "
            "WHERE t LIKE 'FSDP::pre_forward (blocks.%' GROUP BY tid"
        ).fetchall()
        backward = raw.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName "
            "WHERE s.value LIKE '%bwd%' OR s.value LIKE '%backward%'"
        ).fetchone()[0]
    finally:
        raw.close()
    assert blocks == [(17, 17), (17, 17)] and backward == 0


@requires_shared
def test_a_capture_without_a_regular_pattern_stays_one_window(tmp_path):
    db = tmp_path / "ws.duckdb"
    ingest([MOCK], db)  # periodic_steps at its default ('on')
    con = open_workspace(db)
    try:
        assert {r[4] for r in _windows(con)} == {"capture"}
    finally:
        con.close()
