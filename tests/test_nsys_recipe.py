"""Nsight Systems recipe outputs as input (issue 21 point 3) and our own NVTX GPU projection.

Real data: ../shared/traces/nsys-recipe/jax-toolbox/ (four processes of a JAX FSDP-4 job, each a
zip of nvtx_gpu_proj_trace output plus nsys-jax metadata; traces README). Every expected number
of the recipe tests is read from those zips in the test itself with pyarrow/zipfile, not through
the reader under test.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import TRACES

from nsight_analyze.cli import main
from nsight_analyze.ingest.run import ingest
from nsight_analyze.store.workspace import open_workspace

JAX = TRACES / "nsys-recipe" / "jax-toolbox"
ZIPS = sorted(JAX.glob("pax_fsdp4_4proc_proc*.zip")) if JAX.is_dir() else []
requires_jax = pytest.mark.skipif(
    len(ZIPS) != 4, reason="../shared/traces/nsys-recipe/jax-toolbox/ (4 recipe zips) is absent"
)
H100 = TRACES / "nsys" / "nsys-ai" / "h100_2gpu_1s.sqlite"
TRACE = "nvtx_gpu_proj_trace/trace.parquet"


def _zip_table(path: Path, member: str) -> pa.Table:
    with zipfile.ZipFile(path) as zf:
        return pq.read_table(io.BytesIO(zf.read(member)))


def _expected(path: Path) -> dict:
    """What one zip holds, read straight from its Parquet files (independent of the reader)."""
    t = _zip_table(path, TRACE)
    env = dict(
        zip(*(_zip_table(path, "system-metadata.parquet").column(c).to_pylist() for c in ("name", "value")))
    )
    procid = re.search(r"(?:^|;)SLURM_PROCID=(\d+)", env["DeviceEnvironment"])
    names = t.column("Name").to_pylist()
    with zipfile.ZipFile(path) as zf:
        members = [i.filename for i in zf.infolist() if not i.is_dir()]
    return {
        "rows": t.num_rows,
        "projected_ns": sum(t.column("Projected Duration").to_pylist()),
        "gpu_ops": sum(t.column("NumGPUOps").to_pylist()),
        "group_end": names.count("NCCL:ncclGroupEnd"),
        "pids": set(t.column("PID").to_pylist()),
        "slurm_procid": int(procid.group(1)),
        "hostname": env["Hostname"],
        # read: the .nsys-analysis, trace.parquet, files.parquet (which report each Rank is),
        # device- and system-metadata.parquet
        "unread_files": len(members) - 5,
    }


@pytest.fixture(scope="module")
def jax_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("recipe") / "jax.duckdb"
    report = ingest([JAX], db, analyze=["nvtx_projection_compare"])
    assert not report.failed, [o.message for o in report.outcomes]
    return db


@requires_jax
def test_jax_recipe_outputs_ingest_as_four_ranks(jax_db):
    expected = {e["slurm_procid"]: e for e in map(_expected, ZIPS)}
    con = duckdb.connect(str(jax_db), read_only=True)
    try:
        ranks = con.execute(
            "SELECT rank, pid, rank_source, world_size, hostname FROM ranks ORDER BY rank"
        ).fetchall()
        # the ranks are the SLURM_PROCID each process's captured environment holds (0..3)
        assert [r[0] for r in ranks] == sorted(expected) == [0, 1, 2, 3]
        for rank, pid, source, world, host in ranks:
            assert {pid} == expected[rank]["pids"]  # the recipe's PID column of that zip
            assert source == "env:SLURM_PROCID"
            assert world == 4  # SLURM_NTASKS=4 in the captured environment (traces README: FSDP-4)
            assert host == expected[rank]["hostname"]
        got = con.execute(
            """SELECT rank, count(*), sum(projected_duration_ns), sum(num_gpu_ops),
                      count(*) FILTER (WHERE name = 'NCCL:ncclGroupEnd'),
                      count(*) FILTER (WHERE projected_end_ns <> projected_start_ns + projected_duration_ns)
               FROM recipe_nvtx_gpu_proj GROUP BY rank ORDER BY rank"""
        ).fetchall()
        for rank, rows, ns, ops, group_end, bad_end in got:
            e = expected[rank]
            assert (rows, ns, ops, group_end, bad_end) == (
                e["rows"],
                e["projected_ns"],
                e["gpu_ops"],
                e["group_end"],
                0,
            )
            assert group_end == 120  # traces README: 120 NCCL:ncclGroupEnd per process
        outputs = con.execute(
            "SELECT recipe, status, rows_read FROM recipe_outputs ORDER BY file_id"
        ).fetchall()
        assert [o[:2] for o in outputs] == [("nvtx_gpu_proj_trace", "read")] * 4
        assert sorted(o[2] for o in outputs) == sorted(e["rows"] for e in expected.values())
        gpus = con.execute("SELECT DISTINCT name FROM gpus").fetchall()
        assert gpus == [("NVIDIA A100-SXM4-40GB",)]  # traces README: each process on one A100-SXM4-40GB
        # nothing dropped silently: every other file of each zip is counted as not read
        skipped = con.execute("SELECT skipped FROM files ORDER BY file_id").fetchall()
        counts = sorted(int(re.search(r"not read: (\d+)", s[0][0]).group(1)) for s in skipped)
        assert counts == sorted(e["unread_files"] for e in expected.values())
    finally:
        con.close()


@requires_jax
def test_recipe_rows_sit_beside_our_projection(jax_db):
    con = duckdb.connect(str(jax_db), read_only=True)
    try:
        rows = con.execute(
            """SELECT rank, recipe_ranges, ours_ranges, ranges_diff FROM nvtx_projection_compare
               WHERE name = 'NCCL:ncclGroupEnd' ORDER BY rank"""
        ).fetchall()
        # the recipe's 120 per rank (counted in the zips above); ours is absent: the recipe output
        # carries no kernels or CUDA API calls (traces README: the .nsys-rep was stripped)
        assert rows == [(r, 120, None, None) for r in range(4)]
        total = con.execute("SELECT sum(recipe_ranges) FROM nvtx_projection_compare").fetchone()[0]
        assert total == sum(_expected(z)["rows"] for z in ZIPS)
    finally:
        con.close()


@requires_jax
def test_info_lists_what_was_read(jax_db):
    out = CliRunner().invoke(main, ["info", "--db", str(jax_db), "--format", "json"])
    assert out.exit_code == 0, out.output
    info = json.loads(out.stdout)
    by_rank = {r["ranks"][0]: r for r in info["recipe_outputs"]}
    expected = {e["slurm_procid"]: e for e in map(_expected, ZIPS)}
    assert sorted(by_rank) == [0, 1, 2, 3]
    for rank, row in by_rank.items():
        assert (row["recipe"], row["status"], row["rows_read"]) == (
            "nvtx_gpu_proj_trace",
            "read",
            expected[rank]["rows"],
        )
    assert all(s.split(": ", 1)[1].startswith("files of the input not read") for s in info["skipped"])


@requires_jax
def test_unzipped_archive_and_bare_recipe_folder(tmp_path):
    zip0 = ZIPS[0]
    rows = _expected(zip0)["rows"]
    root = tmp_path / "traces" / "pax_proc0"
    with zipfile.ZipFile(zip0) as zf:
        zf.extractall(root)
        unpacked = sum(i.file_size for i in zf.infolist() if not i.is_dir())
    # the unzipped nsys-jax archive below a parent folder is one input, not one per file in it
    report = ingest([tmp_path / "traces"], tmp_path / "a.duckdb")
    assert [(o.path.name, o.status) for o in report.outcomes] == [("pax_proc0", "ok")]
    con = duckdb.connect(str(tmp_path / "a.duckdb"), read_only=True)
    try:  # the folder's size is its files' total (the zip's uncompressed sizes)
        assert con.execute("SELECT size_bytes FROM files").fetchall() == [(unpacked,)]
    finally:
        con.close()
    # the bare recipe output folder alone: no metadata, so the rank comes from order
    report = ingest([root / "nvtx_gpu_proj_trace"], tmp_path / "b.duckdb")
    assert [o.status for o in report.outcomes] == ["ok"]
    for name, source in (("a.duckdb", "env:SLURM_PROCID"), ("b.duckdb", "order")):
        con = duckdb.connect(str(tmp_path / name), read_only=True)
        try:
            assert con.execute("SELECT count(*) FROM recipe_nvtx_gpu_proj").fetchone()[0] == rows
            assert con.execute("SELECT rank_source FROM ranks").fetchall() == [(source,)]
        finally:
            con.close()


@requires_jax
def test_recipe_without_a_documented_layout_is_listed_not_read(tmp_path):
    root = tmp_path / "job"
    with zipfile.ZipFile(ZIPS[0]) as zf:
        for member in (
            TRACE,
            "nvtx_gpu_proj_trace/nvtx_gpu_proj_trace.nsys-analysis",
            "device-metadata.parquet",
        ):
            zf.extract(member, root)
    other = root / "cuda_gpu_kern_sum"
    other.mkdir()
    (other / "cuda_gpu_kern_sum.nsys-analysis").write_text(json.dumps({"RecipeName": "cuda_gpu_kern_sum"}))
    (other / "stats.parquet").write_bytes(b"PAR1")
    report = ingest([root], tmp_path / "ws.duckdb")
    assert [o.status for o in report.outcomes] == ["ok"]
    con = duckdb.connect(str(tmp_path / "ws.duckdb"), read_only=True)
    try:
        got = con.execute(
            "SELECT output, recipe, status, reason FROM recipe_outputs ORDER BY output"
        ).fetchall()
        assert [g[:3] for g in got] == [
            ("cuda_gpu_kern_sum", "cuda_gpu_kern_sum", "not read"),
            ("nvtx_gpu_proj_trace", "nvtx_gpu_proj_trace", "read"),
        ]
        assert "not documented" in got[0][3]
        skipped = con.execute("SELECT skipped FROM files").fetchone()[0]
        assert any(
            s.startswith("recipe output cuda_gpu_kern_sum (cuda_gpu_kern_sum): not read") for s in skipped
        )
        assert any("cuda_gpu_kern_sum/ 1" in s for s in skipped)  # its stats.parquet, counted
    finally:
        con.close()


def _recipe_folder(path: Path, analysis: str, trace: pa.Table | None = None) -> Path:
    path.mkdir(parents=True)
    (path / "out.nsys-analysis").write_text(analysis)
    if trace is not None:
        pq.write_table(trace, path / "trace.parquet")
    return path


@pytest.mark.parametrize(
    "case, expect",
    [
        ("invalid-json", "invalid JSON"),
        ("unknown-recipe", "found my_recipe (recipe not read by nsight-analyze"),
        ("undocumented", "found nccl_gpu_overlap_trace (its Parquet layout is not documented"),
        ("no-trace", "nvtx_gpu_proj_trace output without its trace.parquet"),
        ("missing-columns", "missing columns: Projected Start"),
    ],
)
def test_malformed_or_unknown_recipe_folder_fails_in_one_line(tmp_path, case, expect):
    nvtx = json.dumps({"RecipeName": "nvtx_gpu_proj_trace"})
    folder = tmp_path / "in" / case
    if case == "invalid-json":
        _recipe_folder(folder, "{not json")
    elif case == "unknown-recipe":
        _recipe_folder(folder, json.dumps({"RecipeName": "my_recipe"}))
    elif case == "undocumented":
        _recipe_folder(folder, json.dumps({"RecipeName": "nccl_gpu_overlap_trace"}))
    elif case == "no-trace":
        _recipe_folder(folder, nvtx)
    else:
        _recipe_folder(folder, nvtx, pa.table({"Name": ["a"], "Rank": [0], "PID": [1]}))
    db = tmp_path / "ws.duckdb"
    out = CliRunner().invoke(main, ["ingest", str(tmp_path / "in"), "--db", str(db)])
    assert out.exit_code != 0
    lines = [line for line in out.output.splitlines() if case in line]
    assert len(lines) == 1 and lines[0].startswith("failed:") and expect in lines[0], out.output
    assert not db.exists()  # nothing loaded: no workspace left behind


# ---------------------------------------------------------------------------- our projection


def _synthetic_workspace(db: Path) -> None:
    """One rank, two threads. Expected projection (derived by hand from these rows):
    outer [100,1000) tid 1 launches at 120, 250, 450, 800 -> 4 ops, GPU [130, 1200], level 0
    first [100,150)  tid 1 (starts with outer, inside it) launch 120 -> 1 op [130, 140], level 1
    inner [200,500)  tid 1 launches 250 (kernel), 450 (memcpy) -> 2 ops [300, 900], level 1
    after [1000,1100) tid 1 launch at 1000 (outer's end is exclusive) -> 1 op [1300, 1400], level 0
    ncclGroupEnd [1200,1300) tid 1, domain NCCL: launch 1250 -> 1 op [1500, 1600], level 0
    idle [2000,2100) tid 1: nothing launched -> no row; other [100,1000) tid 2: launches are on
    tid 1 -> no row; the launch at 99 is in no range; the mark has no end -> not a range."""
    con = open_workspace(db, analyse=False)
    con.execute(
        "INSERT INTO files (file_id, path, sha256, source_format, status) VALUES (1, 'x', 'x', 'test', 'ok')"
    )
    con.execute("INSERT INTO ranks (rank, file_id, pid) VALUES (0, 1, 7)")
    nvtx = [
        (1, 100, 1000, "outer", "push_pop"), (1, 100, 150, "first", "push_pop"),
        (1, 200, 500, "inner", "push_pop"), (1, 1000, 1100, "after", "push_pop"),
        (1, 2000, 2100, "idle", "push_pop"), (2, 100, 1000, "other", "push_pop"),
        (1, 300, None, "mark", "mark"),
    ]  # fmt: skip
    con.executemany(
        "INSERT INTO nvtx (rank, tid, start_ns, end_ns, text, event_type) VALUES (0, ?, ?, ?, ?, ?)", nvtx
    )
    con.execute(
        "INSERT INTO nvtx (rank, tid, start_ns, end_ns, text, domain, event_type) "
        "VALUES (0, 1, 1200, 1300, 'ncclGroupEnd', 'NCCL', 'push_pop')"
    )
    api = [(1, 120, 6), (1, 250, 1), (1, 450, 2), (1, 800, 3), (1, 1000, 4), (1, 99, 5), (1, 1250, 7)]
    con.executemany(
        "INSERT INTO cuda_api (rank, tid, start_ns, end_ns, name, correlation_id) "
        "VALUES (0, ?, ?, ? + 5, 'cudaLaunchKernel', ?)",
        [(t, s, s, c) for t, s, c in api],
    )
    kernels = [(130, 140, 6), (300, 400, 1), (350, 1200, 3), (1300, 1400, 4), (50, 60, 5), (1500, 1600, 7)]
    con.executemany(
        "INSERT INTO kernels (rank, device_id, stream_id, start_ns, end_ns, duration_ns, name, "
        "correlation_id, category) VALUES (0, 0, 7, ?, ?, ? - ?, 'k', ?, 'compute')",
        [(s, e, e, s, c) for s, e, c in kernels],
    )
    con.execute(
        "INSERT INTO memops (rank, device_id, stream_id, start_ns, end_ns, duration_ns, kind, bytes, "
        "correlation_id) VALUES (0, 0, 8, 700, 900, 200, 'HtoD', 64, 2)"
    )
    con.close()


def test_nvtx_gpu_projection_synthetic(tmp_path):
    db = tmp_path / "ws.duckdb"
    _synthetic_workspace(db)
    con = open_workspace(db)  # computes the stored results
    try:
        got = con.execute(
            """SELECT text, level, projected_start_ns, projected_end_ns, projected_duration_ns, num_gpu_ops
               FROM nvtx_gpu_projection ORDER BY start_ns, end_ns DESC"""
        ).fetchall()
        # expected values: _synthetic_workspace's docstring
        assert got == [
            ("outer", 0, 130, 1200, 1070, 4),
            ("first", 1, 130, 140, 10, 1),
            ("inner", 1, 300, 900, 600, 2),
            ("after", 0, 1300, 1400, 100, 1),
            ("ncclGroupEnd", 0, 1500, 1600, 100, 1),
        ]
        side = con.execute(
            "SELECT name, recipe_ranges, ours_ranges, ours_gpu_ops FROM nvtx_projection_compare ORDER BY name"
        ).fetchall()
        # no recipe output in this workspace: the recipe side is empty, ours is the rows above
        # (a named domain's range under the recipe's 'DOMAIN:text' name)
        assert side == [
            ("NCCL:ncclGroupEnd", None, 1, 1),
            ("after", None, 1, 1),
            ("first", None, 1, 1),
            ("inner", None, 1, 2),
            ("outer", None, 1, 4),
        ]
    finally:
        con.close()


def test_nvtx_projection_compare_puts_recipe_rows_beside_ours(tmp_path):
    db = tmp_path / "ws.duckdb"
    _synthetic_workspace(db)
    con = open_workspace(db, analyse=False)
    recipe = [  # name, projected start, duration, GPU ops: made-up recipe rows for rank 0
        ("NCCL:ncclGroupEnd", 1500, 100, 1),
        ("outer", 130, 1000, 3),
        ("only in the recipe", 10, 5, 2),
    ]
    con.executemany(
        "INSERT INTO recipe_nvtx_gpu_proj (rank, file_id, output, name, projected_start_ns, "
        "projected_duration_ns, num_gpu_ops) VALUES (0, 1, 'x', ?, ?, ?, ?)",
        recipe,
    )
    con.close()
    con = open_workspace(db)
    try:
        got = {
            r[0]: r[1:]
            for r in con.execute(
                """SELECT name, recipe_ranges, recipe_gpu_ops, recipe_projected_ns, ours_ranges,
                          ours_gpu_ops, ours_projected_ns, ranges_diff, projected_ns_diff
                   FROM nvtx_projection_compare"""
            ).fetchall()
        }
        # recipe side: the rows inserted above; ours: test_nvtx_gpu_projection_synthetic's rows
        assert got["NCCL:ncclGroupEnd"] == (1, 1, 100, 1, 1, 100, 0, 0)
        assert got["outer"] == (1, 3, 1000, 1, 4, 1070, 0, 70)
        assert got["only in the recipe"] == (1, 2, 5, None, None, None, None, None)
        assert got["inner"] == (None, None, None, 1, 2, 600, None, None)
        assert len(got) == 6  # 5 names of ours + 3 of the recipe, 2 of them ('outer', the NCCL range) on both
    finally:
        con.close()


@pytest.mark.skipif(not H100.is_file(), reason="../shared/traces/nsys/nsys-ai/h100_2gpu_1s.sqlite is absent")
def test_nvtx_gpu_projection_matches_brute_force_on_a_real_trace(tmp_path):
    """16.8k NVTX ranges, 2 ranks (traces README): every range checked against launches one by one."""
    db = tmp_path / "h100.duckdb"
    ingest([H100], db)
    con = open_workspace(db, read_only=True)
    try:
        ours = {
            (r[0], r[1], r[2], r[3], r[4]): r[5:]
            for r in con.execute(
                """SELECT rank, tid, start_ns, end_ns, text, projected_start_ns, projected_end_ns, num_gpu_ops
                   FROM nvtx_gpu_projection"""
            ).fetchall()
        }
        ranges = con.execute(
            """SELECT rank, tid, start_ns, end_ns, text FROM nvtx
               WHERE event_type IN ('push_pop', 'start_end') AND end_ns >= start_ns"""
        ).fetchall()
        launches: dict[tuple, list] = {}
        for rank, tid, at, start, end in con.execute(
            """SELECT a.rank, a.tid, a.start_ns, o.start_ns, o.end_ns FROM cuda_api AS a
               JOIN gpu_ops AS o ON o.rank = a.rank AND o.correlation_id = a.correlation_id"""
        ).fetchall():
            launches.setdefault((rank, tid), []).append((at, start, end))
    finally:
        con.close()
    expected = {}
    for rank, tid, start, end, text in ranges:
        inside = [(s, e) for at, s, e in launches.get((rank, tid), []) if start <= at < end]
        if inside:
            expected[(rank, tid, start, end, text)] = (
                min(s for s, _ in inside),
                max(e for _, e in inside),
                len(inside),
            )
    assert len(expected) > 1000  # the trace has thousands of projected ranges, not a vacuous check
    assert ours == expected


# ---------------------------------------------------------------------------- beside its reports


def _job_with_recipe(folder: Path) -> dict:
    """A 2-rank synthetic job (report_rank{0,1}.sqlite) and the nvtx_gpu_proj_trace output the
    generator writes for it (nsight_analyze/synth/recipe.py: computed with SQLite on the raw
    files). Returns the generator's count per report: the expected values of the tests below."""
    from nsight_analyze.synth import generate
    from nsight_analyze.synth import recipe as synth_recipe

    generate(folder, ranks=2, gpus_per_node=1, steps=2, truth=False)
    return synth_recipe.for_traces(folder)


def _beside_checks(db: Path, truth: dict) -> None:
    con = duckdb.connect(str(db), read_only=True)
    try:
        # the ranks are the reports' (env:RANK of report_rank{r}); the recipe output owns none
        owners = con.execute(
            "SELECT r.rank, f.source_format, f.path FROM ranks r JOIN files f USING (file_id) ORDER BY 1"
        ).fetchall()
        assert [(r, fmt, Path(p).name) for r, fmt, p in owners] == [
            (0, "nsys-sqlite", "report_rank0.sqlite"),
            (1, "nsys-sqlite", "report_rank1.sqlite"),
        ]
        got = con.execute(
            """SELECT rank, count(*), sum(num_gpu_ops), sum(projected_duration_ns)
               FROM recipe_nvtx_gpu_proj GROUP BY rank ORDER BY rank"""
        ).fetchall()
        want = [(r, t["rows"], t["gpu_ops"], t["projected_ns"]) for r, t in enumerate(truth.values())]
        assert got == want and all(t["rows"] > 0 for t in truth.values())  # generator's counts
        assert con.execute("SELECT recipe, status, rows_read FROM recipe_outputs").fetchall() == [
            ("nvtx_gpu_proj_trace", "read", sum(t["rows"] for t in truth.values()))
        ]
        # both sides present for every range name, and equal: the generator's SQLite projection
        # of the raw files and our nvtx_gpu_projection of the ingested rows agree
        sides = con.execute(
            """SELECT count(*), count(*) FILTER (WHERE recipe_ranges IS NULL OR ours_ranges IS NULL),
                      sum(abs(ranges_diff)), sum(abs(projected_ns_diff)),
                      sum(recipe_gpu_ops) - sum(ours_gpu_ops)
               FROM nvtx_projection_compare"""
        ).fetchone()
        assert sides[0] > 0 and sides[1:] == (0, 0, 0, 0), sides
    finally:
        con.close()


@pytest.mark.parametrize("jobs", [1, 2])  # 2: mapped on worker processes (the probe travels)
def test_recipe_output_beside_its_reports_is_read_as_their_side_table(tmp_path, jobs):
    truth = _job_with_recipe(tmp_path / "job")
    report = ingest(
        [tmp_path / "job"], tmp_path / "ws.duckdb", jobs=jobs, analyze=["nvtx_projection_compare"]
    )
    assert [o.status for o in report.outcomes] == ["ok", "ok", "ok"], [o.message for o in report.outcomes]
    _beside_checks(tmp_path / "ws.duckdb", truth)
    res = CliRunner().invoke(main, ["info", "--db", str(tmp_path / "ws.duckdb"), "--format", "json"])
    info = json.loads(res.stdout)
    assert [r["ranks"] for r in info["recipe_outputs"]] == [[0, 1]]  # info says whose rows they are
    # the recipe's runtime version is not an nsys version the ranks were exported with
    assert not [w for w in info["warnings"] if "nsys versions" in w], info["warnings"]


def test_recipe_output_ingested_after_its_reports_joins_them(tmp_path):
    """The reports first, the recipe output later into the same workspace: its rows go to their
    ranks and the stored comparison is recomputed (a file without ranks changes the job)."""
    truth = _job_with_recipe(tmp_path / "job")
    db = tmp_path / "ws.duckdb"
    ingest(sorted((tmp_path / "job").glob("*.sqlite")), db)
    ingest([tmp_path / "job" / "nvtx_gpu_proj_trace"], db)
    open_workspace(db, read_only=True).close()  # any recompute happens here
    _beside_checks(db, truth)
    # replacing the recipe output (changed content) leaves no duplicate rows behind
    analysis = tmp_path / "job" / "nvtx_gpu_proj_trace" / "nvtx_gpu_proj_trace.nsys-analysis"
    analysis.write_text(analysis.read_text().replace("15:00:01", "15:00:02"))
    ingest([tmp_path / "job" / "nvtx_gpu_proj_trace"], db, replace=True)
    _beside_checks(db, truth)
    # replacing a report keeps the recipe's rows of its rank (they belong to the recipe's file)
    ingest([tmp_path / "job" / "report_rank0.sqlite"], db, replace=True)
    _beside_checks(db, truth)


def test_recipe_output_of_other_reports_is_refused_in_one_line(tmp_path):
    """A recipe output naming reports that are not ingested with it cannot be read beside these
    ranks: the refusal says which reports it was computed from and what to do. (The job is
    written by `nsight-analyze synth --recipe-output`, the users' way to the same folder.)"""
    synth = ["synth", str(tmp_path / "job"), "--ranks", "2", "--gpus-per-node", "1", "--steps", "2"]
    res = CliRunner().invoke(main, [*synth, "--no-truth", "--recipe-output"])
    assert res.exit_code == 0 and "projected NVTX ranges of 2 report(s)" in res.output, res.output
    assert sorted(p.name for p in (tmp_path / "job" / "nvtx_gpu_proj_trace").iterdir()) == [
        "files.parquet", "nvtx_gpu_proj_trace.nsys-analysis", "trace.parquet"
    ]  # fmt: skip
    files = tmp_path / "job" / "nvtx_gpu_proj_trace" / "files.parquet"
    pq.write_table(pa.table({"File": ["other_rank0", "other_rank1"]}), files)
    out = CliRunner().invoke(main, ["ingest", str(tmp_path / "job"), "--db", str(tmp_path / "ws.duckdb")])
    assert out.exit_code == 2, out.output
    lines = [line for line in out.output.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "mix formats (nsys-recipe, nsys-sqlite)" in lines[0], out.output
    assert "was computed from other_rank0, other_rank1" in lines[0] and "alone into its own" in lines[0]
    assert "Traceback" not in out.output
