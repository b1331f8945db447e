"""Model FLOPs per training step: the MFU numerator, with the convention spelled out.

MFU compares the work the *model* needs (forward + backward, never recomputation) with
what the GPUs could do, so it is comparable across implementations. HFU counts what the
hardware executed, recomputation included. Two published conventions are offered
(../shared/docs/gpu-peaks.md §4):

* ``palm`` — Chowdhery et al. 2022 (PaLM, arXiv:2204.02311) Appendix B: per token
  ``6·N + 12·L·H·S``. N = parameters taking part in matmuls (exclude pure lookup
  embeddings); the 12·L·H·S term is the QKᵀ and attention·V matmuls (2 matmuls × 2 FLOP
  per MAC × 3 for forward + backward) over the full S×S square, no causal halving.
  H here is the hidden size (= heads × head dim).
* ``megatron`` — Korthikanti et al. 2022 (arXiv:2205.05198) eq. 7, model FLOPs per step
  ``72·B·L·S·h²·(1 + S/(6h) + V/(12·h·L))`` for B sequences of length S, vocabulary V;
  it derives N ≈ 12·L·h² from the shapes instead of taking N.

Expected hardware FLOPs (analytic HFU) add recomputation:

* palm: ``selective`` recomputes the attention-score forward (+4·L·H·S per token);
  ``full`` recomputes one whole forward (+2·N + 4·L·H·S per token): 8N + 16LHS;
* megatron: ``selective`` is Korthikanti eq. 8 (S/(3h) in place of S/(6h)); ``full`` is
  Narayanan et al. 2021 (arXiv:2104.04473) eq. 3, ``96·B·S·L·h²·(1 + S/(6h) + V/(16·L·h))``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UserError, validate_positive

RECOMPUTE = ("none", "selective", "full")
FORMULAS = ("palm", "megatron")


@dataclass
class ModelFlops:
    """Model (MFU) and expected hardware (analytic HFU) FLOPs per step, and how they were counted."""

    model_flops_per_step: float
    hardware_flops_per_step: float
    formula: str
    explanation: str
    inputs: dict = field(default_factory=dict)

    @property
    def recompute_ratio(self) -> float:
        """Expected HFU / MFU from recomputation alone."""
        return self.hardware_flops_per_step / self.model_flops_per_step


def palm_per_token(params: float, layers: int, hidden: int, seq_len: int) -> float:
    """6N + 12·L·H·S: model FLOPs per token (PaLM Appendix B)."""
    return 6.0 * params + 12.0 * layers * hidden * seq_len


def palm_hardware_per_token(params: float, layers: int, hidden: int, seq_len: int, recompute: str) -> float:
    """Model FLOPs per token plus the recomputed forward work."""
    base = palm_per_token(params, layers, hidden, seq_len)
    if recompute == "selective":
        return base + 4.0 * layers * hidden * seq_len
    if recompute == "full":
        return base + 2.0 * params + 4.0 * layers * hidden * seq_len
    return base


def megatron_per_step(
    batch: float, seq_len: int, layers: int, hidden: int, vocab: int, recompute: str
) -> float:
    """Korthikanti eq. 7 (none), eq. 8 (selective) or Narayanan eq. 3 (full), per step."""
    b, s, L, h, v = float(batch), float(seq_len), float(layers), float(hidden), float(vocab)
    if recompute == "full":
        return 96.0 * b * s * L * h * h * (1 + s / (6 * h) + v / (16 * L * h))
    attention = s / (3 * h) if recompute == "selective" else s / (6 * h)
    return 72.0 * b * L * s * h * h * (1 + attention + v / (12 * h * L))


def model_flops(
    model_flops_per_step: float | None = None,
    params: float | None = None,
    tokens_per_step: float | None = None,
    layers: int | None = None,
    hidden: int | None = None,
    seq_len: int | None = None,
    vocab: int | None = None,
    recompute: str = "none",
    formula: str = "palm",
) -> ModelFlops:
    """Model FLOPs per step from a given number or a model description; UserError if underspecified."""
    if recompute not in RECOMPUTE:
        raise UserError(f"--recompute must be one of {', '.join(RECOMPUTE)}, not {recompute!r}")
    if formula not in FORMULAS:
        raise UserError(f"--formula must be one of {', '.join(FORMULAS)}, not {formula!r}")
    if model_flops_per_step is not None:
        validate_positive("--model-flops-per-step", model_flops_per_step)
        return ModelFlops(
            float(model_flops_per_step),
            float(model_flops_per_step),
            "given",
            "model FLOPs per step as given (--model-flops-per-step); recomputation unknown, so the "
            "expected hardware FLOPs equal the model FLOPs",
            {"model_flops_per_step": model_flops_per_step},
        )
    if not tokens_per_step:
        raise UserError(
            "MFU needs the model FLOPs: pass --model-flops-per-step, or --tokens-per-step with --params "
            "(and --layers/--hidden/--seq-len for the attention term)"
        )
    inputs = {
        "params": params,
        "tokens_per_step": tokens_per_step,
        "layers": layers,
        "hidden": hidden,
        "seq_len": seq_len,
        "vocab": vocab,
        "recompute": recompute,
    }
    if formula == "megatron":
        if not (layers and hidden and seq_len):
            raise UserError("--formula megatron needs --layers, --hidden and --seq-len (and --vocab)")
        batch = tokens_per_step / seq_len
        model = megatron_per_step(batch, seq_len, layers, hidden, vocab or 0, "none")
        hardware = megatron_per_step(batch, seq_len, layers, hidden, vocab or 0, recompute)
        text = (
            f"Megatron (Korthikanti 2022 eq. 7): 72·B·L·S·h²·(1 + S/(6h) + V/(12hL)) with B={batch:g} "
            f"sequences, L={layers}, S={seq_len}, h={hidden}, V={vocab or 0}"
        )
        if not vocab:
            text += " (no --vocab: logit layer not counted)"
        return ModelFlops(model, hardware, "megatron", text, inputs)
    attention = bool(layers and hidden and seq_len)
    if params is None:
        if not (layers and hidden):
            raise UserError("--params is needed (or --layers and --hidden to estimate N = 12·L·h²)")
        params = 12.0 * layers * hidden * hidden
        inputs["params_estimated"] = True
    per_token = palm_per_token(params, layers or 0, hidden or 0, seq_len or 0)
    hw_per_token = palm_hardware_per_token(params, layers or 0, hidden or 0, seq_len or 0, recompute)
    text = (
        f"PaLM (Chowdhery 2022, App. B): (6N + 12·L·H·S) per token x {tokens_per_step:g} tokens/step, "
        f"N={params:g}"
    )
    if inputs.get("params_estimated"):
        text += " (estimated as 12·L·h², non-embedding)"
    text += (
        f", L={layers}, H={hidden}, S={seq_len}"
        if attention
        else " (no attention term: pass --layers/--hidden/--seq-len)"
    )
    if recompute != "none":
        text += f"; {recompute} recomputation adds {hw_per_token / per_token - 1:.1%} hardware FLOPs"
    return ModelFlops(per_token * tokens_per_step, hw_per_token * tokens_per_step, "palm", text, inputs)
