"""Kernel-level injections: unfused elementwise chains, FP32 GEMMs, unfused attention.

* `unfused-elementwise=FIRST-LAST`: in those steps every layer's forward GELU runs as the eager
  tanh approximation, eight elementwise kernels (x^3, *0.044715, +x, *sqrt(2/pi), tanh, +1, *x,
  *0.5) on the 4h-wide activation, instead of one kernel;
* `fp32-gemm=PCT`: PCT % of the transformer layers' GEMM launches (forward and backward, every
  step) run as cuBLAS FP32 CUDA-core GEMMs (`sm80_xmma_gemm_f32f32_f32f32_f32_..._ffma_...`, as
  in the nsys-ai H100 capture) at the H100's dense FP32 rate instead of bf16 tensor cores;
* `unfused-attention`: FlashAttention is replaced by QK^T bmm -> softmax -> PV bmm forward and
  bmm, bmm -> softmax backward -> bmm, bmm backward, the b*h*n^2 score matrix going through HBM.

Their ground truth (the injected kernels' times per rank and step) is injection_truth.kernel_fault_truth;
the specs are parsed with the others' (injections.py).
"""

from __future__ import annotations

import dataclasses

from . import kernels as K
from . import workload as W

KEYS = ("unfused-elementwise", "fp32-gemm", "unfused-attention")
SPEC_HELP = "unfused-elementwise=FIRST-LAST, fp32-gemm=PCT, unfused-attention"
TAG = "fault"  # KType.shape key marking injected kinds

PEAK_FP32_DENSE = 66.9e12  # H100 SXM dense FP32 (CUDA cores), data/gpus.csv

FP32_GEMM = (
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alig"
    "nc4_execute_kernel__5x_cublas"
)
BMM = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segmen"
    "t_k_off_kernel__5x_cublas"
)
ATTN_SOFTMAX = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFl"
    "oat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(T4 *, const T2 *, int)"
)
ATTN_SOFTMAX_BWD = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<8, c10::BFloat16, float, c10::BF"
    "loat16, at::native::(anonymous namespace)::SoftMaxBackwardEpilogue>(T2 *, const T4 *, const T"
    "4 *, long)"
)


def _ew(functor: str, arrays: int) -> str:
    return (
        f"void at::native::vectorized_elementwise_kernel<4, {functor}, std::array<char *, {arrays}>>"
        "(int, T2, T3)"
    )


_MUL = "at::native::binary_internal::MulFunctor<float>"
_BF3 = "c10::BFloat16, c10::BFloat16, c10::BFloat16"
# the eager GELU (tanh approximation): (functor, operands incl. output)
GELU_CHAIN = [
    ("at::native::(anonymous namespace)::pow_tensor_scalar_kernel_impl<c10::BFloat16, float>", 2),
    (f"at::native::AUnaryFunctor<{_BF3}, {_MUL}>", 2),
    ("at::native::CUDAFunctorOnSelf_add<c10::BFloat16>", 3),
    (f"at::native::AUnaryFunctor<{_BF3}, {_MUL}>", 2),
    ("at::native::tanh_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 2)]", 2),
    ("at::native::CUDAFunctorOnOther_add<c10::BFloat16>", 2),
    (f"at::native::BinaryFunctor<{_BF3}, {_MUL}>", 3),
    (f"at::native::AUnaryFunctor<{_BF3}, {_MUL}>", 2),
]


class Faults:
    """Expands one step's kernel kinds into the Items the injections make of them."""

    def __init__(self, cfg, cat, unfused: bool, make) -> None:
        self.cfg, self.cat, self.make = cfg, cat, make
        self.inj = cfg.injections
        self.unfused = unfused and self.inj.unfused_elementwise is not None
        self.gemms = 0  # layer GEMM launches seen in this step (fp32-gemm picks every PCT-th)

    def _fp32(self, kt: K.KType) -> bool:
        pct = getattr(self.inj, "fp32_gemm_pct", 0.0)
        if not pct:
            return False
        i = self.gemms
        self.gemms += 1
        return int((i + 1) * pct / 100) > int(i * pct / 100)

    def _item(self, kt: K.KType, **kw) -> W.Item:
        return self.make(self.cat, kt, **kw)

    def expand(self, kinds: list[K.KType], **kw) -> list[W.Item]:
        out: list[W.Item] = []
        cfg = self.cfg
        t, h, heads = cfg.seq, cfg.hidden, cfg.heads
        d = h // heads
        for kt in kinds:
            if kt.category == "compute" and "M" in kt.shape and self._fp32(kt):
                f32 = K.KType(
                    FP32_GEMM,
                    K.short_of(FP32_GEMM),
                    "compute",
                    kt.grid,
                    (256, 1, 1),
                    128,
                    0,
                    0,
                    kt.flops,
                    {**kt.shape, TAG: "fp32-gemm"},
                )
                it = W.Item(
                    W.LAUNCH,
                    self.cat.add(f32),
                    api=W.API_LAUNCH,
                    dur=kt.flops / (PEAK_FP32_DENSE * 0.72) * 1e9,
                    **kw,
                )
                out.append(it)
            elif self.unfused and kt.name == K.GELU:
                act4 = t * 4 * h * 2  # the 4h-wide activation in bf16
                for functor, arrays in GELU_CHAIN:
                    ew = K.mem(_ew(functor, arrays), act4 * arrays)
                    ew = dataclasses.replace(ew, shape={**ew.shape, TAG: "unfused-elementwise"})
                    out.append(self._item(ew, **kw))
            elif self.inj.unfused_attention and kt.name in (K.FLASH_FWD, K.FLASH_BWD):
                score = t * t * heads * 2  # b*h*n^2 bf16 bytes, batch 1
                bmm_flops = 2 * heads * t * t * d
                shape = {"batch": 1, "heads": heads, "seq": t, "head_dim": d, TAG: "unfused-attention"}

                def bmm(role: str, shape=shape, flops=bmm_flops) -> W.Item:
                    k = K.KType(BMM, K.short_of(BMM), "compute", (132, 1, 1), (256, 1, 1), 168, 0, 98_304)
                    return self._item(
                        dataclasses.replace(k, flops=flops, shape={**shape, "role": role}), **kw
                    )

                def soft(name: str, nbytes: int, role: str, shape=shape) -> W.Item:
                    m = K.mem(name, nbytes)
                    return self._item(
                        dataclasses.replace(m, shape={**shape, "role": role, "bytes": nbytes}), **kw
                    )

                if kt.name == K.FLASH_FWD:
                    out += [bmm("qk"), soft(ATTN_SOFTMAX, 2 * score, "softmax"), bmm("pv")]
                else:
                    out += [
                        bmm("dv"),
                        bmm("dp"),
                        soft(ATTN_SOFTMAX_BWD, 3 * score, "softmax_bwd"),
                        bmm("dq"),
                        bmm("dk"),
                    ]
            elif self.inj.unfused_attention and kt.name in (K.FLASH_BWD_DOT, K.FLASH_BWD_CONVERT):
                continue  # FlashAttention's own helpers
            else:
                out.append(self._item(kt, **kw))
        return out


def annotate(job) -> None:
    """unfused-attention: PyTorch emit_nvtx(record_shapes=True) ranges around each softmax launch.

    The range text is what `torch.autograd.profiler.emit_nvtx(record_shapes=True)` writes, e.g.
    `aten::_softmax, seq = 7, op_id = 7, sizes = [[1, 16, 4096, 4096], [], []], input_op_ids = [(6, 0)]`:
    the score matrix's shape, which diagnose turns into its size.
    """
    import numpy as np

    if not job.cfg.injections.unfused_attention:
        return
    kinds = job.catalog.kinds
    texts = job.nvtx_texts
    index = {t: j for j, t in enumerate(texts)}

    def text_id(text: str) -> int:
        if text not in index:
            index[text] = len(texts)
            texts.append(text)
        return index[text]

    for ev in job.ranks:
        api_of = {int(c): j for j, c in enumerate(ev.api_corr)}
        new = []
        for i, kt in enumerate(ev.gpu_ktype):
            sh = kinds[kt].shape
            if sh.get(TAG) != "unfused-attention" or not sh.get("role", "").startswith("softmax"):
                continue
            j = api_of.get(int(ev.gpu_corr[i]))
            if j is None:
                continue
            dims = f"[{sh['batch']}, {sh['heads']}, {sh['seq']}, {sh['seq']}]"
            op = int(ev.gpu_corr[i])
            if sh["role"] == "softmax":
                text = (
                    f"aten::_softmax, seq = {op}, op_id = {op}, sizes = [{dims}, [], []], "
                    f"input_op_ids = [({op - 1}, 0)]"
                )
            else:
                text = (
                    f"aten::_softmax_backward_data, op_id = {op}, sizes = [{dims}, {dims}, [], []], "
                    f"input_op_ids = [({op - 1}, 0), ({op - 2}, 0)]"
                )
            new.append(
                (int(ev.api_start[j]) - 900, int(ev.api_end[j]) + 400, text_id(text), int(ev.api_tid[j]))
            )
        if not new:
            continue
        n = len(new)
        start = np.concatenate([ev.nvtx_start, np.array([x[0] for x in new], np.int64)])
        order = np.argsort(start, kind="stable")
        ev.nvtx_start = start[order]
        ev.nvtx_end = np.concatenate([ev.nvtx_end, np.array([x[1] for x in new], np.int64)])[order]
        ev.nvtx_text = np.concatenate([ev.nvtx_text, np.array([x[2] for x in new], ev.nvtx_text.dtype)])[
            order
        ]
        ev.nvtx_tid = np.concatenate([ev.nvtx_tid, np.array([x[3] for x in new], ev.nvtx_tid.dtype)])[order]
        ev.nvtx_type = np.concatenate([ev.nvtx_type, np.full(n, 59, ev.nvtx_type.dtype)])[order]
        ev.nvtx_domain = np.concatenate([ev.nvtx_domain, np.zeros(n, ev.nvtx_domain.dtype)])[order]
        if getattr(ev, "nvtx_payload", None) is not None:
            ev.nvtx_payload = np.concatenate([ev.nvtx_payload, np.full(n, None, object)])[order]
