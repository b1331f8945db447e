"""Kernel kinds of the synthetic workloads: real-looking names, launch geometry, FLOPs and cost.

Durations come from a simple roofline (FLOPs at a fraction of the H100 dense BF16 peak, bytes at a
fraction of HBM bandwidth) so that the shape of a step looks like a real bf16 transformer step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PEAK_BF16_DENSE = 989.4e12  # H100 SXM dense BF16 FLOP/s (docs: gpu-peaks.md)
HBM_BYTES_PER_S = 3.35e12


@dataclass(frozen=True)
class KType:
    """One kind of GPU operation (a kernel name with its launch geometry, or a memcpy)."""

    name: str  # demangled name (StringIds via demangledName)
    short: str  # shortName
    category: str  # compute | memory | comms | other (what kernel_rules.csv should say)
    grid: tuple[int, int, int] = (132, 1, 1)
    block: tuple[int, int, int] = (256, 1, 1)
    regs: int = 32
    static_smem: int = 0
    dynamic_smem: int = 0
    flops: int = 0  # model FLOPs of one execution
    shape: dict = field(default_factory=dict)
    memcpy: str | None = None  # copy kind (HtoD/DtoH) for memcpy kinds
    src_kind: int = 0  # ENUM_CUDA_MEM_KIND
    dst_kind: int = 0
    nbytes: int = 0


def gemm_ns(k: KType, eff: float = 0.72) -> float:
    return k.flops / (PEAK_BF16_DENSE * eff) * 1e9


def bytes_ns(nbytes: int, eff: float = 0.8) -> float:
    return nbytes / (HBM_BYTES_PER_S * eff) * 1e9 + 2_000


SM90_GEMM = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_s"
    "egment_k_off_kernel__5x_cublas"
)
SM90_GEMM_NN = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize256x128x64_warpgroupsize2x1x1_execute_s"
    "egment_k_off_kernel__5x_cublas"
)
NVJET_TN = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"
NVJET_NT = "nvjet_tst_256x128_64x4_2x1_v_bz_coopB_NTN"
CUTLASS_WGRAD = (
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_nt_alig"
    "n8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_nt_align8::Params)"
)

FLASH_FWD = (
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bf"
    "loat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t>>, false, true, false"
    ", false, true, true, false, false>(Flash_fwd_params)"
)
FLASH_BWD = (
    "void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, "
    "8, 2, 4, 2, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, cutl"
    "ass::bfloat16_t>>, true, false, false, false, false, true, false, false>(Flash_bwd_param"
    "s)"
)
FLASH_BWD_DOT = (
    "void flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, f"
    "alse, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16"
    "_t>>>(Flash_bwd_params)"
)
FLASH_BWD_CONVERT = (
    "void flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false"
    ", false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t>>"
    ">(Flash_bwd_params, int)"
)
LAYER_NORM = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, floa"
    "t>(int, float, const T1 *, const T1 *, const T1 *, T2 *, T2 *, T1 *)"
)
LAYER_NORM_BWD = (
    "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFl"
    "oat16, float>(const T1 *, const T1 *, const T2 *, const T2 *, const T1 *, T1 *, int)"
)
GAMMA_BETA_BWD = (
    "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel_32x32<c10::BFloat16,"
    " float>(long, long, const T1 *, const T1 *, const T2 *, const T2 *, T1 *, T1 *)"
)
ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloa"
    "t16>, std::array<char *, 3>>(int, T2, T3)"
)
GELU = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::Ten"
    "sorIteratorBase &, at::native::GeluType)::[lambda() (instance 1)]::operator ()() const::"
    "[lambda() (instance 4)]::operator ()() const::[lambda(c10::BFloat16) (instance 1)], std:"
    ":array<char *, 2>>(int, T2, T3)"
)
GELU_BWD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl"
    "(at::TensorIteratorBase &, at::native::GeluType)::[lambda() (instance 1)]::operator ()()"
    " const::[lambda() (instance 4)]::operator ()() const::[lambda(c10::BFloat16, c10::BFloat"
    "16) (instance 1)], std::array<char *, 3>>(int, T2, T3)"
)
FILL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::a"
    "rray<char *, 1>>(int, T2, T3)"
)
INDEX_SELECT = (
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsig"
    "ned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<T1, T3>, at::cuda::detail::TensorI"
    "nfo<const T1, T3>, at::cuda::detail::TensorInfo<const T2, T3>, int, int, T3, T3, long)"
)
SOFTMAX = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, c10"
    "::BFloat16, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(T4 *, const T2"
    " *, int)"
)
SOFTMAX_BWD = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, c10::BFloat16, float, c1"
    "0::BFloat16, at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(T2 *, const "
    "T4 *, const T4 *, long)"
)
NLL = (
    "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, fl"
    "oat, long>(T1 *, T1 *, const T1 *, const T3 *, const T1 *, bool, long, long, long, long)"
)
EMBED_BWD = (
    "void at::native::(anonymous namespace)::embedding_backward_feature_kernel<c10::BFloat16,"
    " float, long>(const T3 *, const T1 *, T1 *, int, long, int, int)"
)
ADAM = (
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous"
    " namespace)::TensorListMetadata<5>, at::native::(anonymous namespace)::FusedAdamMathFunc"
    "tor<float, 5, at::native::ADAM_MODE::ADAMW, false>, double *, double, double, double, do"
    "uble, double, bool, const float *, const float *>(T1, T2, T3...)"
)
LPNORM = (
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous"
    " namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::LpNormFunctor<c10"
    "::BFloat16, at::native::(anonymous namespace)::NormType::L2, float, float>, float *, int"
    " *, int>(T1, T2, T3...)"
)
LPNORM_CLEANUP = (
    "void at::native::(anonymous namespace)::lpnorm_cleanup<c10::BFloat16, at::native::(anony"
    "mous namespace)::NormType::L2, float, float>(const T4 *, at::native::(anonymous namespac"
    "e)::TensorListAddresses, int)"
)
# a project-specific kernel no rule knows: category `other`
DISPATCH = "void dispatch_tokens_kernel(const int *, int *, int)"
NCCL_AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _strip_tail(text: str, open_ch: str, close_ch: str) -> str:
    """Remove a trailing balanced `open_ch ... close_ch` group (an argument or template list)."""
    text = text.rstrip()
    if not text.endswith(close_ch):
        return text
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] == close_ch:
            depth += 1
        elif text[i] == open_ch:
            depth -= 1
            if depth == 0:
                return text[:i]
    return text


def short_of(name: str) -> str:
    """nsys shortName: the bare function name (no return type, namespaces, templates, arguments)."""
    head = _strip_tail(_strip_tail(name, "(", ")"), "<", ">")
    return head.rsplit("::", 1)[-1].split()[-1]


def mem(name: str, nbytes: int, grid=(1024, 1, 1), block=(128, 1, 1), category: str = "memory") -> KType:
    return KType(name, short_of(name), category, grid, block, 32, 0, 0, 0, {"bytes": nbytes}, nbytes=nbytes)


def compute(name: str, flops: int, shape: dict, grid=(132, 1, 1), block=(128, 1, 1)) -> KType:
    return KType(name, short_of(name), "compute", grid, block, 255, 0, 98_304, flops, shape)


def memcpy(kind: str, nbytes: int, src: int, dst: int) -> KType:
    return KType(
        f"[CUDA memcpy {kind}]",
        f"[CUDA memcpy {kind}]",
        "memory",
        memcpy=kind,
        src_kind=src,
        dst_kind=dst,
        nbytes=nbytes,
        shape={"bytes": nbytes},
    )


def nccl_allreduce(nbytes: int) -> KType:
    return KType(
        NCCL_AR,
        short_of(NCCL_AR),
        "comms",
        (32, 1, 1),
        (640, 1, 1),
        96,
        21_568,
        82_240,
        0,
        {"bytes": nbytes},
        nbytes=nbytes,
    )


def gemm_kind(name: str, m: int, n: int, k: int) -> KType:
    tiles = max(1, (m // 128) * (n // 256))
    return KType(
        name,
        short_of(name),
        "compute",
        (min(tiles, 132), 1, 1),
        (384, 1, 1),
        168,
        0,
        213_248,
        2 * m * n * k,
        {"M": m, "N": n, "K": k},
    )
