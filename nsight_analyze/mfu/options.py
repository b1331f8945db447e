"""What MFU needs beyond the trace: the model's FLOPs (or a description), the peak, the job shape.

Why one dataclass: the same options reach MFU from `nsight-analyze mfu` (click options built
from these fields by commands/mfu.py), from `Workspace.mfu(...)` / `mfu_summary(...)` (keywords
named as the fields) and from the report, diagnose and compare (`hfu_mfu_summary(con, options)`);
one list keeps their names, defaults and help the same. Each field's metadata holds its CLI
flag and help text as plain data (the library does not import click).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import validate_positive
from ..gpus.table import DEFAULT_PRECISION, PRECISIONS
from .flops import FORMULAS, RECOMPUTE, ModelFlops, model_flops


def _cli(
    flag: str | None,
    kind: type = str,
    help: str = "",
    choices: tuple[str, ...] = (),  # noqa: A002
) -> dict[str, Any]:
    """A field's CLI option: its flag (None: a shared option of clihelp), value type, help, choices."""
    return {"flag": flag, "type": kind, "help": help, "choices": choices}


@dataclass(frozen=True)
class MfuOptions:
    """The MFU/HFU options of `nsight-analyze mfu` (flags in brackets), as keywords or one value.

    MFU needs `model_flops_per_step` or a model description (`params` + `tokens_per_step`, with
    `layers`/`hidden`/`seq_len` for the attention term, or `formula='megatron'`), else takes the
    trace's own FLOPs where it recorded shapes (queries/hfu/op_flops.sql); the peak comes
    from the trace's GPU unless `gpu` or `peak_tflops` states it. None means "not given".
    """

    model_flops_per_step: float | None = field(
        default=None,
        metadata=_cli(
            "--model-flops-per-step",
            float,
            "Model FLOPs of one training step of the whole job (forward + backward, no recomputation). "
            "Default: the trace's own, where it recorded shapes (record_shapes=True).",
        ),
    )
    params: float | None = field(
        default=None, metadata=_cli("--params", float, "N: parameters taking part in matmuls (e.g. 7e9).")
    )
    tokens_per_step: float | None = field(
        default=None,
        metadata=_cli("--tokens-per-step", float, "Tokens per step, whole job (global batch x seq)."),
    )
    layers: int | None = field(default=None, metadata=_cli("--layers", int, "L: transformer layers."))
    hidden: int | None = field(
        default=None, metadata=_cli("--hidden", int, "H: hidden size (heads x head dim).")
    )
    seq_len: int | None = field(default=None, metadata=_cli("--seq-len", int, "S: sequence length."))
    vocab: int | None = field(
        default=None, metadata=_cli("--vocab", int, "V: vocabulary size (Megatron formula's logit term).")
    )
    recompute: str = field(
        default="none",
        metadata=_cli(
            "--recompute",
            str,
            "Activation recomputation: adds hardware FLOPs (expected HFU/MFU), never model FLOPs.",
            tuple(RECOMPUTE),
        ),
    )
    formula: str = field(
        default="palm",
        metadata=_cli(
            "--formula",
            str,
            "palm: (6N + 12·L·H·S) per token; megatron: 72·B·L·S·h²·(1 + S/6h + V/12hL) per step.",
            tuple(FORMULAS),
        ),
    )
    gpu: str | None = field(default=None, metadata=_cli(None))  # --gpu: clihelp.gpu_option
    peak_tflops: float | None = field(
        default=None,
        metadata=_cli("--peak-tflops", float, "Dense peak per GPU in TFLOP/s (overrides the table)."),
    )
    precision: str = field(default=DEFAULT_PRECISION, metadata=_cli("--precision", str, "", PRECISIONS))
    n_gpus: int | None = field(
        default=None,
        metadata=_cli(
            "--gpus", int, "GPUs in the job (default: world size in the traces, else the number of ranks)."
        ),
    )
    steps_in_window: int | None = field(
        default=None, metadata=_cli("--steps", int, "Steps in the capture when no step windows were found.")
    )

    def __post_init__(self) -> None:
        if self.precision is None:  # the API's "not given"
            object.__setattr__(self, "precision", DEFAULT_PRECISION)
        for f in dataclasses.fields(self):  # every number given must be positive and finite
            if f.metadata.get("type") in (int, float):
                validate_positive(f.metadata["flag"], getattr(self, f.name))

    @classmethod
    def of(cls, options: MfuOptions | Mapping[str, Any] | None = None, **fields: Any) -> MfuOptions:
        """`options` (a MfuOptions, a dict of its fields or None) with `fields` on top; a name
        that is not a field raises TypeError, as a wrong keyword does."""
        if isinstance(options, MfuOptions):
            return dataclasses.replace(options, **fields) if fields else options
        return cls(**{**(options or {}), **fields})

    def model(self) -> ModelFlops | None:
        """The model FLOPs per step, or None when neither they nor the tokens per step are given
        (UserError when a description is incomplete or an option is out of range)."""
        if self.model_flops_per_step is None and self.tokens_per_step is None:
            return None
        return model_flops(
            self.model_flops_per_step,
            self.params,
            self.tokens_per_step,
            self.layers,
            self.hidden,
            self.seq_len,
            self.vocab,
            self.recompute,
            self.formula,
        )
