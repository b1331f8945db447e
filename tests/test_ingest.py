"""Ingest of real Nsight Systems exports: parity with nsys's own stats, bad input, integrity."""

from __future__ import annotations

import collections
import csv
import hashlib
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TRACES, nsys_traces, oracle_dir, requires_shared, shared_ingest

from nsight_analyze.ingest.run import ingest
from nsight_analyze.store.workspace import open_workspace

CLI = [sys.executable, "-m", "nsight_analyze"]
TRACE_IDS = [str(p.relative_to(TRACES / "nsys")) for p in nsys_traces()]


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=300)


def oracle_rows(trace: Path, report: str) -> list[dict]:
    path = oracle_dir(trace) / f"stats_{report}.csv"
    return list(csv.DictReader(open(path))) if path.exists() else []


def strip_abi(name: str) -> str:
    return re.sub(r"_v\d{4,}$", "", name)


class _Ingested(dict):
    """trace -> (ingest report, workspace) of the trace ingested alone, when a test first asks for
    it (conftest.shared_ingest: once per test process, shared with other modules)."""

    def __missing__(self, trace: Path) -> tuple:
        return shared_ingest([trace])


@pytest.fixture(scope="module")
def real_workspaces():
    return _Ingested()


@requires_shared
@pytest.mark.parametrize("trace", nsys_traces(), ids=TRACE_IDS)
def test_every_shared_trace_ingests(real_workspaces, trace):
    report, _ = real_workspaces[trace]
    assert [o.status for o in report.outcomes] == ["ok"], report.outcomes


@requires_shared
@pytest.mark.parametrize("trace", nsys_traces(), ids=TRACE_IDS)
def test_kernels_match_nsys_gpukernsum(real_workspaces, trace):
    expected_n, expected_ns = collections.Counter(), collections.Counter()
    for row in oracle_rows(trace, "gpukernsum"):  # one row per (name, grid, block): sum per name
        expected_n[row["Name"]] += int(row["Instances"])
        expected_ns[row["Name"]] += int(row["Total Time (ns)"])
    con = open_workspace(real_workspaces[trace][1], read_only=True)
    got = {
        n: (c, t)
        for n, c, t in con.execute(
            "SELECT name, count(*), sum(duration_ns) FROM kernels GROUP BY 1"
        ).fetchall()
    }
    assert got == {n: (expected_n[n], expected_ns[n]) for n in expected_n}


@requires_shared
@pytest.mark.parametrize("trace", nsys_traces(), ids=TRACE_IDS)
def test_memops_match_nsys_gpumem_sums(real_workspaces, trace):
    label = (
        "CASE WHEN kind = 'memset' THEN '[CUDA memset]' ELSE '[CUDA ' || replace(kind, 'Unified Memory ', "
        "'Unified Memory memcpy ') || ']' END"
    )
    label = label.replace(
        "'[CUDA ' || replace",
        "'[CUDA ' || CASE WHEN kind LIKE 'Unified%' THEN '' ELSE 'memcpy ' END || replace",
    )
    con = open_workspace(real_workspaces[trace][1], read_only=True)
    got = {
        lab: (n, t, b)
        for lab, n, t, b in con.execute(
            f"SELECT {label}, count(*), sum(duration_ns), sum(bytes) FROM memops GROUP BY 1"
        ).fetchall()
    }
    times = {
        r["Operation"]: (int(r["Count"]), int(r["Total Time (ns)"]))
        for r in oracle_rows(trace, "gpumemtimesum")
    }
    sizes = {r["Operation"]: float(r["Total (MB)"]) for r in oracle_rows(trace, "gpumemsizesum")}
    assert {k: v[:2] for k, v in got.items()} == times
    for op, mb in sizes.items():
        assert got[op][2] / 1e6 == pytest.approx(mb, abs=0.0005)


@requires_shared
@pytest.mark.parametrize("trace", nsys_traces(), ids=TRACE_IDS)
def test_cuda_api_matches_nsys_cudaapisum(real_workspaces, trace):
    """Per API name (ABI suffix stripped) the calls and total time of nsys's cudaapisum.

    nsys 2022.4 strips only a 6-character `_vNNNN` tail and pools all processes; calls of
    processes that ran no GPU work are not ranks here, so they are read from the file and
    added back before comparing.
    """
    expected = collections.Counter()
    expected_ns = collections.Counter()
    for row in oracle_rows(trace, "cudaapisum"):
        expected[strip_abi(row["Name"])] += int(row["Num Calls"])
        expected_ns[strip_abi(row["Name"])] += int(row["Total Time (ns)"])
    db = real_workspaces[trace][1]
    con = open_workspace(db, read_only=True)
    pids = [r[0] for r in con.execute("SELECT global_pid FROM ranks").fetchall()]
    got = collections.Counter()
    got_ns = collections.Counter()
    for name, n, t in con.execute(
        "SELECT name, count(*), sum(duration_ns) FROM cuda_api GROUP BY 1"
    ).fetchall():
        got[name] += n
        got_ns[name] += t
    if expected:
        src = sqlite3.connect(f"{trace.as_uri()}?mode=ro&immutable=1", uri=True)
        marks = ",".join(str(p // (1 << 24)) for p in pids)
        for name, n, t in src.execute(
            f"SELECT s.value, count(*), sum(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
            f"JOIN StringIds s ON s.id = r.nameId WHERE r.globalTid / {1 << 24} NOT IN ({marks}) GROUP BY 1"
        ):
            got[strip_abi(name)] += n
            got_ns[strip_abi(name)] += t
    assert dict(got) == dict(expected)
    assert dict(got_ns) == dict(expected_ns)


@requires_shared
def test_two_processes_in_one_file_are_two_ranks(real_workspaces):
    trace = TRACES / "nsys/nsys-ai/mfu_2gpu_before.sqlite"
    con = open_workspace(real_workspaces[trace][1], read_only=True)
    ranks = con.execute("SELECT rank, pid, device_id FROM ranks ORDER BY rank").fetchall()
    assert ranks == [(0, 144, 0), (1, 145, 1)]
    src = sqlite3.connect(f"{trace.as_uri()}?mode=ro&immutable=1", uri=True)
    per_device = dict(
        src.execute("SELECT deviceId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1").fetchall()
    )
    got = dict(con.execute("SELECT device_id, count(*) FROM kernels GROUP BY 1").fetchall())
    assert got == per_device


@requires_shared
def test_rank_from_environment_and_gpu_by_cuda_ordinal(real_workspaces):
    saxpy = TRACES / "nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
    con = open_workspace(real_workspaces[saxpy][1], read_only=True)
    assert con.execute("SELECT rank, rank_source, world_size FROM ranks").fetchall() == [
        (0, "env:PMI_RANK", 2)
    ]
    clover = TRACES / "nsys/pipit/perlmutter-cloverleaf-cuda.sqlite"
    con = open_workspace(real_workspaces[clover][1], read_only=True)
    # TARGET_INFO_GPU.id 3 is cuDevice 0: the kernels' device. Its bus location says which.
    bus = (
        sqlite3.connect(f"{clover.as_uri()}?mode=ro&immutable=1", uri=True)
        .execute("SELECT busLocation FROM TARGET_INFO_GPU WHERE cuDevice = 0")
        .fetchone()[0]
    )
    assert con.execute("SELECT name, bus_location FROM gpus").fetchall() == [("NVIDIA A100-SXM4-80GB", bus)]


@requires_shared
def test_secrets_never_reach_the_workspace(real_workspaces):
    secret = re.compile(
        r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|ACCESS_KEY|PRIVATE|CREDENTIAL|AUTH)", re.I
    )
    for _, db in real_workspaces.values():
        con = open_workspace(db, read_only=True)
        names = [r[0] for r in con.execute("SELECT name FROM env").fetchall()]
        assert not [n for n in names if secret.search(n)]
        assert not con.execute("SELECT count(*) FROM env WHERE value LIKE '%REDACTED%'").fetchone()[0]


@requires_shared
def test_inputs_are_never_modified(tmp_path):
    trace = TRACES / "nsys/nsys-ai/mock.sqlite"
    before = hashlib.sha256(trace.read_bytes()).hexdigest()
    ingest([trace], tmp_path / "w.duckdb")
    assert hashlib.sha256(trace.read_bytes()).hexdigest() == before
    assert not list(trace.parent.glob("*-journal")) and not list(trace.parent.glob("*.wal"))


@requires_shared
def test_same_content_is_a_no_op_and_replace_reloads(tmp_path):
    trace = TRACES / "nsys/nsys-ai/h100_2gpu_1s.sqlite"
    db = tmp_path / "w.duckdb"
    first = ingest([trace], db)
    con = open_workspace(db, read_only=True)
    counts = con.execute("SELECT (SELECT count(*) FROM kernels), (SELECT count(*) FROM nvtx)").fetchone()
    con.close()
    again = ingest([trace], db)
    assert [o.status for o in first.outcomes] == ["ok"] and [o.status for o in again.outcomes] == [
        "unchanged"
    ]
    replaced = ingest([trace], db, replace=True)
    assert [o.status for o in replaced.outcomes] == ["ok"]
    con = open_workspace(db, read_only=True)
    assert (
        con.execute("SELECT (SELECT count(*) FROM kernels), (SELECT count(*) FROM nvtx)").fetchone() == counts
    )
    assert con.execute("SELECT count(*) FROM files").fetchone()[0] == 1
    assert con.execute("SELECT count(*) FROM ranks").fetchone()[0] == 2


@requires_shared
def test_new_files_add_ranks_and_duplicate_rank_names_both_files(tmp_path):
    db = tmp_path / "w.duckdb"
    saxpy = TRACES / "nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
    clover = TRACES / "nsys/pipit/perlmutter-cloverleaf-cuda.sqlite"  # SLURM_PROCID=0 as well
    ingest([saxpy], db)
    # both name rank 0: two jobs (issue 16), the second numbered after the first, said in one note
    result = run_cli("ingest", str(clover), "--db", str(db), "-q")
    assert result.returncode == 0, result.stderr
    # the workspace keeps resolved paths: compare names (../shared may be a symbolic link)
    assert "rank 0" in result.stderr and saxpy.name in result.stderr and clover.name in result.stderr
    assert "2 jobs found" in result.stderr and "Traceback" not in result.stderr
    mock = TRACES / "nsys/nsys-ai/mock.sqlite"  # no rank variable: the next free rank
    assert [o.status for o in ingest([mock], db).outcomes] == ["ok"]
    con = open_workspace(db, read_only=True)
    assert con.execute("SELECT rank, rank_source, job, job_rank FROM ranks ORDER BY rank").fetchall() == [
        (0, "env:PMI_RANK", 1, 0),
        (1, "env:PMI_RANK", 2, 0),
        (2, "order", 3, 2),
    ]


def _bad_inputs(folder: Path) -> dict[str, str]:
    """File name -> the words its one-line error must contain."""
    (folder / "empty.sqlite").write_bytes(b"")
    (folder / "random.sqlite").write_bytes(os.urandom(8192))
    other = sqlite3.connect(folder / "other.sqlite")
    other.execute("CREATE TABLE t (x)")
    other.commit()
    other.close()
    (folder / "dangling.sqlite").symlink_to(folder / "does-not-exist.sqlite")
    expected = {
        "empty.sqlite": "empty file",
        "random.sqlite": "not an SQLite database",
        "other.sqlite": "not an Nsight Systems export",
        "dangling.sqlite": "unreadable",
    }
    if TRACES.is_dir():
        real = (TRACES / "nsys/nsys-ai/mfu_2gpu_after.sqlite").read_bytes()
        (folder / "truncated.sqlite").write_bytes(real[: len(real) // 3])
        expected["truncated.sqlite"] = "SQLite"
    return expected


def test_bad_inputs_get_one_line_each_and_good_files_still_load(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    expected = _bad_inputs(folder)
    if TRACES.is_dir():
        shutil.copy(TRACES / "nsys/nsys-ai/mock.sqlite", folder / "good.sqlite")
    db = tmp_path / "w.duckdb"
    result = run_cli("ingest", str(folder), "--db", str(db), "-q")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    failed = [line for line in result.stderr.splitlines() if line.startswith("failed:")]
    for name, words in expected.items():
        lines = [line for line in failed if f"/{name}:" in line]
        assert len(lines) == 1 and words in lines[0], (name, failed)
    if TRACES.is_dir():
        con = open_workspace(db, read_only=True)
        assert con.execute("SELECT count(*) FROM kernels").fetchone()[0] == 2


def test_nsys_reports_without_nsys_are_skipped_and_counted(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "rank0.nsys-rep").write_bytes(b"not really a report")
    env = dict(os.environ, PATH=str(Path(sys.executable).parent))
    result = run_cli("ingest", str(folder), "--db", str(tmp_path / "w.duckdb"), "-q", env=env)
    assert "nsys CLI not found on PATH: 1 .nsys-rep/.qdrep file(s) skipped" in result.stderr
    assert "1 skipped" in result.stdout
    assert "Traceback" not in result.stderr


def test_missing_input_is_one_line(tmp_path):
    result = run_cli("ingest", str(tmp_path / "nope"), "--db", str(tmp_path / "w.duckdb"))
    assert result.returncode != 0 and "no such file or directory" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _distinct_copies(src: Path, folder: Path, n: int) -> None:
    """n copies of one export with distinct content (an extra empty table), so none is a duplicate."""
    for i in range(n):
        dst = folder / f"rank{i}.sqlite"
        shutil.copy(src, dst)
        con = sqlite3.connect(dst)
        con.execute(f"CREATE TABLE nsight_analyze_test_copy_{i} (x)")
        con.commit()
        con.close()


@requires_shared
def test_killed_ingest_leaves_a_consistent_workspace(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    _distinct_copies(TRACES / "nsys/nsys-ai/mfu_2gpu_before.sqlite", folder, 6)
    db = tmp_path / "w.duckdb"
    proc = subprocess.Popen(
        [*CLI, "ingest", str(folder), "--db", str(db)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # off a terminal the ingest writes one line per file as it lands ("ok: PATH ..."): kill it
    # right after the first, so the kill lands mid-ingest (5 files and the analysis still to do)
    first = proc.stderr.readline()
    running = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    assert first.startswith("ok: "), first
    assert running and proc.returncode == -signal.SIGKILL  # killed, not finished
    result = run_cli("ingest", str(folder), "--db", str(db), "-q")
    assert result.returncode == 0, result.stderr
    con = open_workspace(db, read_only=True)
    # sqlite3 on mfu_2gpu_before.sqlite: 4010 rows in CUPTI_ACTIVITY_KIND_KERNEL from 2 processes
    # (globalPid), so 6 files, 12 ranks and 4010 kernels per file
    assert con.execute("SELECT count(*) FROM files").fetchone()[0] == 6
    assert con.execute("SELECT count(*) FROM ranks").fetchone()[0] == 12
    per_file = con.execute(
        "SELECT r.file_id, count(*) FROM kernels k JOIN ranks r USING (rank) GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert [n for _, n in per_file] == [4010] * 6


def _real_nsys_report(folder: Path) -> Path:
    """A small real report: nsys profiling a CPU-only Python process (OS runtime trace)."""
    cmd = [
        "nsys",
        "profile",
        "--trace",
        "osrt",
        "--sample",
        "none",
        "--cpuctxsw",
        "none",
        "-o",
        "rank0",
        sys.executable,
        "-c",
        "import time; time.sleep(0.2)",
    ]
    subprocess.run(cmd, cwd=folder, capture_output=True, timeout=180)
    report = folder / "rank0.nsys-rep"
    stream = folder / "rank0.qdstrm"
    if not report.exists() and stream.exists():  # Debian's nsys leaves the import to QdstrmImporter
        nsys_root = Path(shutil.which("nsys")).resolve().parents[1]
        candidates = [
            *nsys_root.glob("host-linux-*/QdstrmImporter"),
            *Path("/usr/lib").glob("nsight-systems/host-*/QdstrmImporter"),
        ]
        for importer in candidates:
            if importer.exists():
                subprocess.run([str(importer), "-i", str(stream)], capture_output=True, timeout=180)
                break
        stream.unlink()
    if not report.exists():
        pytest.skip("this nsys could not write a report here")
    return report


@pytest.mark.skipif(shutil.which("nsys") is None, reason="the nsys CLI is not installed (it is optional)")
def test_nsys_report_is_exported_and_ingested(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    report = _real_nsys_report(folder)
    db = tmp_path / "w.duckdb"
    result = ingest([folder], db)
    assert [(o.path, o.status) for o in result.outcomes] == [(report, "ok")]
    con = open_workspace(db, read_only=True)
    assert con.execute("SELECT path, source_format FROM files").fetchall() == [(str(report), "nsys-sqlite")]
    assert con.execute("SELECT count(*) FROM ranks").fetchone()[0] == 1
    assert any("OSRT_API" in s for s in con.execute("SELECT skipped FROM files").fetchone()[0])
    # the export is cached beside the workspace, never beside the user's report
    assert list((tmp_path / "w.duckdb.exports").glob("*.sqlite")) and not list(folder.glob("*.sqlite"))


@requires_shared
def test_rank_from_nccl_init_payload(tmp_path):
    """Two processes in one file without rank variables: NCCL's ncclCommInitRank payload decides."""
    copy = tmp_path / "job.sqlite"
    shutil.copy(TRACES / "nsys/nsys-ai/mfu_2gpu_before.sqlite", copy)
    con = sqlite3.connect(copy)
    rows = con.execute("SELECT deviceId, globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1").fetchall()
    by_device = dict(rows)
    for device, rank in ((0, 1), (1, 0)):  # deliberately not the device order
        con.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId, jsonText) "
            "VALUES (1, 2, 59, 'ncclCommInitRank', ?, 1, ?)",
            [by_device[device] + 7, f'{{"NCCL communicator ID": 42, "Rank": {rank}, "No. of ranks": 2}}'],
        )
    con.commit()
    con.close()
    db = tmp_path / "w.duckdb"
    ingest([copy], db)
    ws = open_workspace(db, read_only=True)
    assert ws.execute("SELECT device_id, rank, rank_source FROM ranks ORDER BY device_id").fetchall() == [
        (0, 1, "nccl"),
        (1, 0, "nccl"),
    ]


@pytest.mark.skipif(shutil.which("nsys") is None, reason="the nsys CLI is not installed (it is optional)")
def test_nsys_stats_reads_a_generated_trace_like_our_ingest(tmp_path):
    """NVIDIA's own `nsys stats` on a synthetic 2022.4-schema export agrees with our ingest."""
    from nsight_analyze.synth import generate

    generate(tmp_path / "t", ranks=1, gpus_per_node=1, steps=2, schema="2022.4", injections=("sync-stall",))
    trace = tmp_path / "t" / "report_rank0.sqlite"
    subprocess.run(
        ["nsys", "stats", "-r", "gpukernsum,cudaapisum", "-f", "csv", "-o", str(tmp_path / "st"), str(trace)],
        capture_output=True,
        timeout=300,
        check=True,
    )
    expected = collections.Counter()
    for row in csv.DictReader(open(tmp_path / "st_gpukernsum.csv")):
        expected[row["Name"], "n"] += int(row["Instances"])
        expected[row["Name"], "ns"] += int(row["Total Time (ns)"])
    api = collections.Counter()
    for row in csv.DictReader(open(tmp_path / "st_cudaapisum.csv")):
        api[strip_abi(row["Name"])] += int(row["Num Calls"])
    db = tmp_path / "w.duckdb"
    ingest([trace], db)
    con = open_workspace(db, read_only=True)
    got = collections.Counter()
    rows = con.execute("SELECT name, count(*), sum(duration_ns) FROM kernels GROUP BY 1").fetchall()
    for name, n, ns in rows:
        got[name, "n"], got[name, "ns"] = n, ns
    assert got == expected
    assert dict(con.execute("SELECT name, count(*) FROM cuda_api GROUP BY 1").fetchall()) == dict(api)


@pytest.mark.parametrize("jobs", [1, 2])
def test_rows_that_end_before_they_start_are_counted_and_said(tmp_path, jobs):
    """Kernels whose end precedes their start (a tracer clock error) loaded without a word: the
    partition counts them as zero time, so its compute fell short of the kernels' own sum with
    nothing to say why. Each file now warns with the count and the worst inversion, in this
    process and in workers alike. Expected values: the 15 rows this test inverts by 1,000 ns;
    the unmodified rank 1 has none."""
    sample = Path(__file__).resolve().parents[1] / "sample_traces"
    folder = tmp_path / "traces"
    folder.mkdir()
    for name in ("report_rank0.sqlite", "report_rank1.sqlite"):
        shutil.copy(sample / name, folder / name)
    with sqlite3.connect(folder / "report_rank0.sqlite") as lite:
        lite.execute(
            'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 1000 '
            "WHERE rowid IN (SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 15)"
        )
    db = tmp_path / "w.duckdb"
    report = ingest([folder], db, jobs=jobs)
    assert [o.status for o in report.outcomes] == ["ok", "ok"]
    con = open_workspace(db, read_only=True)
    try:
        rows = con.execute("SELECT path, warnings FROM files ORDER BY path").fetchall()
        inverted = con.execute("SELECT count(*) FROM kernels WHERE end_ns < start_ns").fetchone()[0]
    finally:
        con.close()
    assert inverted == 15
    said = {Path(path).name: [w for w in warnings if "end before they start" in w] for path, warnings in rows}
    assert said == {
        "report_rank0.sqlite": [
            "corrupt timing: 15 row(s) of kernels end before they start (by up to 1,000 ns: a tracer "
            "clock error); the time partition counts them as zero time, duration sums as recorded"
        ],
        "report_rank1.sqlite": [],
    }
    # summary repeats it beside the partition it changes (JSON and the terminal alike)
    from nsight_analyze import open as open_ws

    doc = open_ws(db).summary()
    assert doc["warnings"] == [f"{folder / 'report_rank0.sqlite'}: {said['report_rank0.sqlite'][0]}"]


def test_gpu_work_ending_long_after_the_capture_is_said(tmp_path):
    """One kernel with a garbled end 1,000 s late stretched rank 0's window to 1,000 s and the
    partition read "memory 100 %" with nothing to say why. The file now warns with the count and
    how far past the capture's stop (ANALYSIS_DETAILS.stopTime) it ends; the expected distance
    is computed here from the export itself."""
    sample = Path(__file__).resolve().parents[1] / "sample_traces" / "report_rank0.sqlite"
    trace = tmp_path / "rank0.sqlite"
    shutil.copy(sample, trace)
    with sqlite3.connect(trace) as lite:
        row = lite.execute(
            "SELECT rowid, start FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 1"
        ).fetchone()
        lite.execute(
            'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start + 1000000000000 WHERE rowid = ?', [row[0]]
        )
        past = lite.execute(
            "SELECT ? + 1000000000000 - max(stopTime) FROM ANALYSIS_DETAILS", [row[1]]
        ).fetchone()[0]
    db = tmp_path / "w.duckdb"
    ingest([trace], db)
    con = open_workspace(db, read_only=True)
    try:
        warnings = con.execute("SELECT warnings FROM files").fetchone()[0]
    finally:
        con.close()
    expected = (
        f"corrupt timing: 1 row(s) of kernels end more than 1 s after the capture stopped (by up to "
        f"{past / 1e9:,.1f} s: a corrupt timestamp); the time partition's window stretches to them, so its "
        "shares of that rank are not the run's"
    )
    assert [w for w in warnings if "after the capture stopped" in w] == [expected]
    assert 999 < past / 1e9 < 1000
    from click.testing import CliRunner

    from nsight_analyze.cli import main

    shown = CliRunner().invoke(main, ["summary", "--db", str(db)], env={"COLUMNS": "1000"})
    assert shown.exit_code == 0 and shown.output.splitlines()[0] == f"warning: {trace}: {expected}", (
        shown.output
    )
    # diagnose puts it first, as a capture note on rank 0, with the warning as its evidence
    from nsight_analyze import open as open_ws

    first = open_ws(db).diagnose()[0]
    assert (first.id, first.kind, first.severity, first.ranks) == ("corrupt-timing", "capture", "medium", [0])
    assert first.evidence[0].rows[0]["warning"] == expected.removeprefix("corrupt timing: ")


FAKE_NSYS = """#!{python}
import os, shutil, sqlite3, sys
out = sys.argv[sys.argv.index("--output") + 1]
shutil.copy(os.environ["FAKE_NSYS_SRC"], out)
with sqlite3.connect(out) as c:  # a real export's bytes differ from an earlier export's
    c.execute("CREATE TABLE fake_export_marker (a)")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="a shell-script nsys")
@pytest.mark.parametrize("with_nsys", [False, True])
def test_a_report_and_its_export_beside_it_are_read_once(tmp_path, with_nsys):
    """`nsys stats report.nsys-rep` leaves report.sqlite beside the report. With nsys on PATH both
    were read: the same rank twice, and the second became a phantom second job ("rank 0 is
    claimed by both ..."). Without nsys the report was skipped with "put nsys on PATH", though its
    export was right there. Now one of the pair is read: the export, or the report when the
    export is older than it and nsys can export it again (the stand-in nsys here copies the
    sample rank 0 and changes its bytes, as a new export would)."""
    sample = Path(__file__).resolve().parents[1] / "sample_traces" / "report_rank0.sqlite"
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(sample, folder / "report_rank0.sqlite")
    (folder / "report_rank0.nsys-rep").write_bytes(b"a report")
    env = dict(os.environ, FAKE_NSYS_SRC=str(sample), PATH=str(Path(sys.executable).parent))
    if with_nsys:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "nsys").write_text(FAKE_NSYS.format(python=sys.executable))
        (bin_dir / "nsys").chmod(0o755)
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
        later = (folder / "report_rank0.sqlite").stat().st_mtime + 60
        os.utime(folder / "report_rank0.nsys-rep", (later, later))  # the export is older
    db = tmp_path / "w.duckdb"
    result = run_cli("ingest", str(folder), "--db", str(db), env=env)
    assert result.returncode == 0, result.stderr
    assert "claimed by both" not in result.stderr and "nsys CLI not found" not in result.stderr
    if with_nsys:
        skipped = (
            f"skipped: {folder}/report_rank0.sqlite: older than its report report_rank0.nsys-rep beside it"
        )
        read = "report_rank0.nsys-rep"
    else:
        skipped = f"skipped: {folder}/report_rank0.nsys-rep: its export report_rank0.sqlite beside it is read"
        read = "report_rank0.sqlite"
    assert any(line.startswith(skipped) for line in result.stderr.splitlines()), result.stderr
    con = open_workspace(db, read_only=True)
    try:
        assert [
            Path(p).name for (p,) in con.execute("SELECT path FROM files WHERE status = 'ok'").fetchall()
        ] == [read]
        assert con.execute("SELECT count(DISTINCT job), count(*) FROM ranks").fetchone() == (1, 1)
    finally:
        con.close()


@pytest.mark.skipif(sys.platform == "win32", reason="a shell-script nsys")
def test_an_export_written_after_its_report_was_ingested_is_not_a_second_job(tmp_path):
    """A report ingested (exported by us), then `nsys stats` writes its .sqlite beside it, then
    the folder is ingested again: the export was a new file claiming the report's rank, a phantom
    second job. Now the workspace keeps the report (unchanged) and skips the export; --replace
    reads the export in the report's place. Expected: one file loaded, one rank, one job."""
    sample = Path(__file__).resolve().parents[1] / "sample_traces" / "report_rank0.sqlite"
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "report_rank0.nsys-rep").write_bytes(b"a report")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nsys").write_text(FAKE_NSYS.format(python=sys.executable))
    (bin_dir / "nsys").chmod(0o755)
    env = dict(
        os.environ, FAKE_NSYS_SRC=str(sample), PATH=f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}"
    )
    db = tmp_path / "w.duckdb"

    def loaded() -> tuple[list[str], tuple]:
        con = open_workspace(db, read_only=True)
        try:
            names = [
                Path(p).name for (p,) in con.execute("SELECT path FROM files WHERE status = 'ok'").fetchall()
            ]
            return names, con.execute("SELECT count(DISTINCT job), count(*) FROM ranks").fetchone()
        finally:
            con.close()

    assert run_cli("ingest", str(folder), "--db", str(db), "-q", env=env).returncode == 0
    shutil.copy(sample, folder / "report_rank0.sqlite")  # what nsys stats leaves beside the report
    again = run_cli("ingest", str(folder), "--db", str(db), "-q", env=env)
    assert again.returncode == 0, again.stderr
    assert "the export of report_rank0.nsys-rep, which the workspace holds already" in again.stderr
    assert "0 file(s) ingested, 1 unchanged" in again.stdout, again.stdout
    assert loaded() == (["report_rank0.nsys-rep"], (1, 1))
    replaced = run_cli("ingest", str(folder), "--db", str(db), "-q", "--replace", env=env)
    assert replaced.returncode == 0, replaced.stderr
    assert loaded() == (["report_rank0.sqlite"], (1, 1))
