"""Kernel classification rules, user rules, the classify command and the NCCL name parser."""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import TRACES, nsys_traces, requires_shared

from nsight_analyze.analysis import refresh
from nsight_analyze.classify import _NAME_MAP_CACHE, classify_kernels, classify_names, reclassify_all
from nsight_analyze.errors import UserError
from nsight_analyze.store.workspace import open_workspace

# Kernels whose names carry no library or framework marker: application code that a name
# heuristic cannot place. They are `other` on purpose (users add a --rules line for them).
TRULY_UNKNOWN = [
    r"^void clover::par_ranged[12]d_kernel<",  # CloverLeaf's own stencil loops (pipit trace)
    r"^void probe_group_by_GPU2<",  # Mordred GPU database operators
    r"^void build_GPU2<",
    r"nvfuser_none_",  # manually scheduled nvFuser kernel: the name says nothing of what it does
]


def _sqlite_kernel_names(path: Path) -> list[str]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
            return []
        rows = con.execute(
            "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.demangledName"
        )
        return [r[0] for r in rows]
    finally:
        con.close()


def _kineto_kernel_names() -> list[str]:
    names: set[str] = set()
    for path in sorted((TRACES / "kineto").rglob("*.json.gz")):
        with gzip.open(path, "rt") as fh:
            events = json.load(fh).get("traceEvents", [])
        names.update(e["name"] for e in events if e.get("cat") == "kernel" and "name" in e)
    return sorted(names)


@pytest.fixture(scope="module")
def con():
    import duckdb

    c = duckdb.connect()
    yield c
    c.close()


@pytest.fixture
def ws(tmp_path):
    c = open_workspace(tmp_path / "ws.duckdb")
    yield c
    c.close()


def _add_kernels(con, rows: list[tuple[int, str, int, int]], category: str | None = None) -> None:
    con.executemany(
        "INSERT INTO kernels (rank, name, start_ns, end_ns, duration_ns, category) VALUES (?, ?, ?, ?, ?, ?)",
        [(r, n, s, e, e - s, category) for r, n, s, e in rows],
    )


# --- coverage of the real traces ---------------------------------------------------------------


@requires_shared
def test_every_shared_trace_kernel_is_classified_or_known_unknown(con):
    names = sorted({n for t in nsys_traces() for n in _sqlite_kernel_names(t)} | set(_kineto_kernel_names()))
    assert len(names) > 500  # the traces hold ~580 distinct kernel names
    result = classify_names(con, names)
    other = result[result["category"] == "other"]["name"]
    unexpected = [n for n in other if not any(re.search(p, n) for p in TRULY_UNKNOWN)]
    assert unexpected == [], f"{len(unexpected)} kernels fall to 'other': {unexpected[:5]}"
    # each allow-list entry still earns its place
    for pattern in TRULY_UNKNOWN:
        assert any(re.search(pattern, n) for n in other), pattern


@requires_shared
def test_comms_agree_with_hta_communication_kernels(con):
    """HTA 0.5 calls `^nccl.*Kernel` COMMUNICATION; we add non-NCCL collectives on purpose."""
    import pandas as pd

    pattern = "*/default/gpu_kernel_breakdown_per_kernel_all.csv"
    frames = [pd.read_csv(p) for p in sorted((TRACES / "oracles" / "hta-0.5").glob(pattern))]
    assert frames, "HTA oracles missing"
    hta = pd.concat(frames)[["name", "kernel_type"]].drop_duplicates()
    hta = hta[hta["kernel_type"] != "MEMORY"]  # memcpy/memset rows, not kernels
    ours = classify_names(con, list(hta["name"])).merge(hta, on="name")
    disagree = ours[(ours["kernel_type"] == "COMMUNICATION") != (ours["category"] == "comms")]
    # PyTorch symmetric-memory all-reduce is a collective that HTA's name rule does not know
    assert list(disagree["name"].str.extract(r"(multimem_all_reduce)")[0]) == ["multimem_all_reduce"]
    assert (ours["kernel_type"] == "COMMUNICATION").sum() >= 4


@requires_shared
def test_ingest_classifies_kernels_and_coverage_is_high(workspace_of):
    trace = TRACES / "nsys" / "nsys-ai" / "mfu_2gpu_before.sqlite"
    w = workspace_of(trace)
    rows = w.execute("SELECT category, sum(end_ns - start_ns) AS t FROM kernels GROUP BY category").fetchall()
    by = dict(rows)
    assert None not in by and set(by) <= {"compute", "memory", "comms", "other"}
    assert by.get("other", 0) == 0
    # NCCL kernels are comms; this workload is attention + GEMM heavy
    assert by["comms"] > 0 and by["compute"] > by["comms"]
    nccl = w.execute(
        "SELECT DISTINCT category, subcategory FROM kernels WHERE name LIKE 'ncclDevKernel%'"
    ).fetchall()
    assert nccl == [("comms", "sendrecv")]


# --- expected classes of known library kernels -------------------------------------------------

# category, subcategory, name (long names split over lines)
EXPECTED = [
    ("compute", "gemm", "ampere_sgemm_128x64_nn"),
    ("compute", "gemm", "volta_sgemm_64x64_tn"),
    (
        "compute",
        "gemm",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_ker"
        "nel__5x_cublas",
    ),
    ("compute", "gemm", "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN"),
    (
        "compute",
        "gemm",
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2>(x::Params)",
    ),
    ("compute", "gemm", "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2>()"),
    (
        "compute",
        "conv",
        "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_execute_kernel_cudnn",
    ),
    ("compute", "conv", "cudnn_infer_volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1"),
    (
        "compute",
        "attention",
        "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 4, cutlass::bfloat16_t>>(fla"
        "sh::Flash_fwd_params)",
    ),
    (
        "compute",
        "attention",
        "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext",
    ),
    ("comms", "allgather", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
    ("comms", "allreduce", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"),
    ("comms", "allreduce", "ncclAllReduceRingLLKernel_sum_f32"),
    ("comms", "reducescatter", "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"),
    ("comms", "allreduce", "ncclSymkDevKernel_AllReduce_RSxLD_AGxST_sum_bf16"),
    ("comms", "alltoall", "void deep_ep::intranode::dispatch<8>(int*)"),
    ("memory", "elementwise", "triton_poi_fused_add_mul_0"),
    ("memory", "reduction", "triton_red_fused_sum_1"),
    ("compute", "gemm", "triton_tem_fused_mm_2"),
    (
        "memory",
        "elementwise",
        "<unnamed>::nvfuser_pointwise_f0_c1_r0_g0(<unnamed>::Tensor<float, (int)2, (int)2>)",
    ),
    (
        "memory",
        "elementwise",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)",
    ),
    (
        "memory",
        "copy",
        "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::Tenso"
        "rIteratorBase&)>()",
    ),
    (
        "memory",
        "reduction",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, MeanOps<float>>>()",
    ),
    (
        "memory",
        "norm",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int)",
    ),
    (
        "memory",
        "softmax",
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true>(float*)",
    ),
    ("memory", "optimizer", "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>>(int)"),
    (
        "memory",
        "sort",
        "void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int>>(int*)",
    ),
    # fbgemm_gpu kernels are not GEMMs, whatever their library's name says
    ("memory", "index", "void fbgemm_gpu::permute_2D_data_kernel<false, int, int>(int)"),
    ("memory", "embedding", "void split_embedding_codegen_forward_unweighted_kernel<float, float>(int)"),
    # a kernel whose parameter list mentions flashinfer is not attention
    (
        "memory",
        "quantize",
        "void tensorrt_llm::kernels::quantize_with_block_size<2, __nv_bfloat16, 32, true>(flashinfe"
        "r::QuantizationSFLayout)",
    ),
    (
        "memory",
        "copy",
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char>(long const*)",
    ),
    ("memory", "elementwise", "saxpy(double *, double *, double *, double, int)"),
    # compiler-generated offload kernels (stdpar, OpenMP, OpenACC)
    (
        "compute",
        "offload",
        "void thrust::cuda_cub::core::_kernel_agent<thrust::cuda_cub::__parallel_for::ParallelForAg"
        "ent<F, long>>(F, long)",
    ),
    ("compute", "offload", "__omp_offloading_10302_2c8e9a0_main_l42"),
    ("compute", "offload", "nvkernel__Z4mainv_F1L20_1"),
    ("compute", "offload", "main_36_gpu"),
]


def test_known_library_kernels_get_their_class(con):
    result = classify_names(con, [n for _, _, n in EXPECTED]).set_index("name")
    wrong = [
        (name, (result.loc[name, "category"], result.loc[name, "subcategory"]), (cat, sub))
        for cat, sub, name in EXPECTED
        if (result.loc[name, "category"], result.loc[name, "subcategory"]) != (cat, sub)
    ]
    assert wrong == []


def test_unmatched_and_null_names_are_other_and_short_names_stand_in(ws):
    _add_kernels(ws, [(0, "my_own_kernel", 0, 10)])
    ws.execute("INSERT INTO kernels (rank, name, start_ns, end_ns) VALUES (0, NULL, 20, 30)")
    ws.execute("INSERT INTO kernels (rank, short_name, start_ns, end_ns) VALUES (0, 'volta_sgemm', 40, 50)")
    classify_kernels(ws)
    got = ws.execute("SELECT category, subcategory FROM kernels ORDER BY start_ns").fetchall()
    assert got == [("other", None), ("other", None), ("compute", "gemm")]


def test_only_unclassified_rows_are_touched(ws):
    _add_kernels(ws, [(0, "ampere_sgemm_128x64_nn", 0, 10)], category="memory")  # e.g. an ncu override
    _add_kernels(ws, [(0, "ampere_sgemm_128x64_nn", 20, 30)])
    classify_kernels(ws)
    got = ws.execute("SELECT start_ns, category FROM kernels ORDER BY start_ns").fetchall()
    assert got == [(0, "memory"), (20, "compute")]


# --- user rules ----------------------------------------------------------------------------------


def _rules(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "rules.csv"
    path.write_text("priority,pattern,category,subcategory,note\n" + body)
    return path


def test_user_rules_win_over_builtin_ones_whatever_their_priority(con, tmp_path):
    rules = _rules(tmp_path, "9999,^ampere_sgemm,other,mine,user rule\n1,^clover::,compute,stencil,\n")
    got = classify_names(con, ["ampere_sgemm_128x64_nn", "clover::x", "volta_sgemm_64x64_tn"], rules)
    assert got.set_index("name")[["category", "subcategory"]].to_dict("index") == {
        "ampere_sgemm_128x64_nn": {"category": "other", "subcategory": "mine"},
        "clover::x": {"category": "compute", "subcategory": "stencil"},
        "volta_sgemm_64x64_tn": {"category": "compute", "subcategory": "gemm"},
    }


def test_reclassify_all_stores_user_rules_for_later_ingests(ws, tmp_path):
    _add_kernels(ws, [(0, "void probe_group_by_GPU2<128, 4>(int*)", 0, 10)])
    classify_kernels(ws)
    assert ws.execute("SELECT category FROM kernels").fetchone()[0] == "other"
    reclassify_all(ws, _rules(tmp_path, "10,probe_group_by,memory,database,Mordred\n"))
    assert ws.execute("SELECT category, subcategory FROM kernels").fetchone() == ("memory", "database")
    # a file ingested later is classified by classify_kernels(con) without a rules path
    _add_kernels(ws, [(1, "void probe_group_by_GPU2<128, 4>(int*)", 0, 10)])
    classify_kernels(ws)
    assert ws.execute("SELECT category FROM kernels WHERE rank = 1").fetchone()[0] == "memory"
    # and re-applying without a file keeps them
    reclassify_all(ws, None)
    assert ws.execute("SELECT DISTINCT category FROM kernels").fetchall() == [("memory",)]


@pytest.mark.parametrize(
    "body, message",
    [
        ("10,([unclosed,compute,gemm,\n", r"rules\.csv:2: pattern .* is not a valid RE2 regex"),
        ("10,gemm,fast,gemm,\n", r"rules\.csv:2: category 'fast' is not one of"),
        ("ten,gemm,compute,gemm,\n", r"rules\.csv:2: priority 'ten' is not a number"),
        ("10,,compute,gemm,\n", r"rules\.csv:2: empty pattern"),
        # an unclosed quote swallowed the rest of the file: "category '' is not one of ..."
        ('\n10,"gemm,compute,gemm,\n20,copy,memory,copy,\n', r"rules\.csv:3: not a CSV row \(a quote opened"),
    ],
)
def test_bad_user_rules_are_one_line_errors(con, tmp_path, body, message):
    with pytest.raises(UserError, match=message):
        classify_names(con, ["x"], _rules(tmp_path, body))


def test_a_rules_file_that_is_not_utf8_is_one_line(con, tmp_path):
    """A spreadsheet's UTF-16 or latin-1 export was "error: UnicodeDecodeError: ...", exit 1."""
    path = tmp_path / "rules.csv"
    path.write_bytes("priority,pattern,category,subcategory,note\n".encode("utf-16"))
    with pytest.raises(UserError, match=r"rules\.csv is not UTF-8 text \(invalid start byte at byte 0\)"):
        classify_names(con, ["x"], path)


def test_bad_header_is_an_error(con, tmp_path):
    path = tmp_path / "rules.csv"
    path.write_text("pattern,category\ngemm,compute\n")
    with pytest.raises(UserError, match="first line must be the header"):
        classify_names(con, ["x"], path)


def test_classification_is_per_distinct_name(ws):
    # 200k kernel rows over 2,000 names: one regex pass over the names, then a join. Expected:
    # the counts of the generating expression (i % 4 picks the kind); the names classified are
    # the 2,000 distinct ones, not the 200k rows (no wall-clock bound: the number of rows the
    # regex pass ran over is what makes it fast)
    ws.execute(
        """INSERT INTO kernels (rank, name, start_ns, end_ns)
           SELECT 0, CASE i % 4 WHEN 0 THEN 'ampere_sgemm_' WHEN 1 THEN 'void at::native::reduce_kernel<'
                              WHEN 2 THEN 'ncclDevKernel_AllGather_RING_LL' ELSE 'app_kernel_' END
                     || CAST(i % 2000 AS VARCHAR), i * 10, i * 10 + 5
           FROM range(200000) t(i)"""
    )
    classify_kernels(ws)
    counts = dict(ws.execute("SELECT category, count(*) FROM kernels GROUP BY 1").fetchall())
    assert counts == {"compute": 50000, "memory": 50000, "comms": 50000, "other": 50000}
    assert ws.execute(f"SELECT count(*) FROM {_NAME_MAP_CACHE}").fetchone()[0] == 2000


# --- the classify command --------------------------------------------------------------------------


def test_classify_command_reapplies_rules_and_lists_other(tmp_path):
    from nsight_analyze.cli import main

    db = tmp_path / "ws.duckdb"
    w = open_workspace(db)
    _add_kernels(w, [(0, "ampere_sgemm_128x64_nn", 0, 300), (0, "mystery_kernel", 300, 400)])
    classify_kernels(w)
    w.close()
    runner = CliRunner()
    out = runner.invoke(main, ["classify", "--db", str(db), "--format", "json"])
    assert out.exit_code == 0, out.output
    rows = {r["category"]: r for r in json.loads(out.stdout)}
    assert rows["compute"]["total_ns"] == 300 and rows["other"]["total_ns"] == 100
    assert rows["compute"]["pct"] == pytest.approx(75.0)
    out = runner.invoke(main, ["classify", "--db", str(db), "--list-other", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert [r["name"] for r in json.loads(out.stdout)] == ["mystery_kernel"]
    rules = _rules(tmp_path, "10,^mystery,memory,custom,\n")
    args = ["classify", "--db", str(db), "--rules", str(rules), "--list-other", "--format", "json"]
    out = runner.invoke(main, args)
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == []
    bad = _rules(tmp_path, "10,(,memory,custom,\n")
    out = runner.invoke(main, ["classify", "--db", str(db), "--rules", str(bad)])
    assert out.exit_code == 2 and "not a valid RE2 regex" in out.output and "Traceback" not in out.output


# --- NCCL name parsing -------------------------------------------------------------------------------

NCCL_NAMES = [
    # name, collective, redop, dtype, algo, proto, naming
    ("ncclAllReduceRingLLKernel_sum_f32", "AllReduce", "sum", "f32", "RING", "LL", "nccl<=2.7"),
    ("ncclAllGatherRingLLKernel_copy_i8", "AllGather", None, None, "RING", "LL", "nccl<=2.7"),
    (
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
        "AllReduce",
        "sum",
        "f32",
        "RING",
        "LL",
        "nccl2.8-2.18",
    ),
    ("ncclKernel_AllReduce_TREE_LL128_Sum_half", "AllReduce", "sum", "f16", "TREE", "LL128", "nccl2.8-2.18"),
    (
        "ncclKernel_ReduceScatter_RING_SIMPLE_MinMax_int32_t",
        "ReduceScatter",
        "minmax",
        "i32",
        "RING",
        "SIMPLE",
        "nccl2.8-2.18",
    ),
    (
        "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
        "Broadcast",
        None,
        None,
        "RING",
        "LL",
        "nccl2.8-2.18",
    ),
    (
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
        "SendRecv",
        None,
        None,
        "RING",
        "SIMPLE",
        "nccl2.8-2.18",
    ),
    (
        "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "AllGather",
        None,
        None,
        "RING",
        "LL",
        "nccl>=2.19",
    ),
    (
        "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL",
        "ReduceScatter",
        "sum",
        "bf16",
        "RING",
        "LL",
        "nccl>=2.19",
    ),
    ("ncclDevKernel_AllReduce_Sum_u32_TREE_LL", "AllReduce", "sum", "u32", "TREE", "LL", "nccl>=2.19"),
    ("ncclDevKernel_AllGatherV_RING_LL", "AllGatherV", None, None, "RING", "LL", "nccl>=2.19"),
    (
        "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)",
        "SendRecv",
        None,
        None,
        None,
        None,
        "nccl>=2.19",
    ),
    (
        "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)",
        "Generic",
        None,
        None,
        None,
        None,
        "nccl>=2.19",
    ),
    (
        "ncclSymkDevKernel_AllReduce_RSxLD_AGxST_sum_bf16",
        "AllReduce",
        "sum",
        "bf16",
        "RSxLD_AGxST",
        None,
        "nccl-symmetric",
    ),
    ("ncclSymDevKernel_AllGather_LL", "AllGather", None, None, "LL", None, "nccl-symmetric"),
    (
        "ncclSymkDevKernel_ReduceScatter_LDMC_avg_f32",
        "ReduceScatter",
        "avg",
        "f32",
        "LDMC",
        None,
        "nccl-symmetric",
    ),
]


def test_nccl_names_parse_into_collective_redop_dtype_algo_proto(ws):
    _add_kernels(ws, [(0, n[0], i * 10, i * 10 + 5) for i, n in enumerate(NCCL_NAMES)])
    _add_kernels(ws, [(0, "ampere_sgemm_128x64_nn", 1000, 1005)])
    classify_kernels(ws)
    refresh(ws, force=True, wanted=["nccl_kernels"])  # a stored table: computed over the rows just added
    got = {
        r[0]: r[1:]
        for r in ws.execute(
            "SELECT name, collective, redop, dtype, algo, proto, naming, duration_ns FROM nccl_kernels"
        ).fetchall()
    }
    assert set(got) == {n[0] for n in NCCL_NAMES}  # non-NCCL kernels are not in the view
    for name, *expected in NCCL_NAMES:
        assert got[name][:-1] == tuple(expected), name
        assert got[name][-1] == 5
    # the classification rules and the parser agree on the collective
    pairs = ws.execute(
        "SELECT DISTINCT k.subcategory, lower(n.collective) FROM kernels k JOIN nccl_kernels n USING (name)"
    ).fetchall()
    for sub, coll in pairs:
        assert sub == {"allgatherv": "allgather", "generic": "nccl"}.get(coll, coll)
