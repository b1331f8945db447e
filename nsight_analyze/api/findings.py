"""The Workspace methods of findings and efficiency: diagnose, its documents, MFU/HFU.

Why its own module: these are the methods that run the rules and the MFU summary (and take
their options: thresholds, --gpu, MfuOptions); api.Workspace inherits them, so `ws.diagnose()`
and `ws.mfu()` are called as before. Like every Workspace method, each opens the workspace,
calls the library and closes it (api/__init__.py's docstring).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported lazily: `import nsight_analyze` stays light
    import pandas as pd
    import pyarrow as pa

    from ..diagnose import Diagnosis
    from ..mfu.options import MfuOptions

from .frames import mfu_frame
from .tables import findings_frame, frame


class FindingsMethods:
    """`Workspace.diagnose`, `diagnosis`, `diagnosis_of`, `findings`, `mfu_summary` and `mfu`
    (api.Workspace provides `connect`, `path` and `scope`)."""

    path: Path
    scope: Any

    def diagnose(self, thresholds: dict[str, Any] | None = None, gpu: str | None = None) -> Diagnosis:
        """Run every rule: the findings (nsight_analyze.diagnose.Finding), ranked by recoverable
        time per step (an upper bound, ns), capture notes first, as a Diagnosis (a sequence of
        the findings, with .thresholds and .job: the job shape, missing views, rule errors).
        `thresholds` override docs/diagnose.md's ({name: value}); `gpu` states the GPU model for the HFU rule.
        Raises NoData (exit status 4 in the CLI) when the workspace has no GPU operation."""
        from ..diagnose import READS, diagnose, resolve_thresholds
        from ..gpus import stated_gpu
        from ..no_data import require_gpu_data

        resolve_thresholds(thresholds)  # bad input is said before "no data"
        with self.connect(analyse=False, scope=True) as con:
            require_gpu_data(con, str(self.path), "diagnose")
        with stated_gpu(gpu), self.connect(needs=READS, scope=True) as con:  # a bad --gpu before any work
            return diagnose(con, thresholds)

    def diagnosis(self, thresholds: dict[str, Any] | None = None, gpu: str | None = None) -> dict[str, Any]:
        """The stable document of `nsight-analyze diagnose --format json` (docs/diagnose.md)."""
        return self.diagnosis_of(self.diagnose(thresholds, gpu))

    def diagnosis_of(self, findings: Any) -> dict[str, Any]:
        """The JSON document of findings `diagnose()` returned, with the job they are of
        (`job.scope`: which job of a workspace of several, job_scope.py)."""
        from ..diagnose import findings_json

        doc = findings_json(findings)
        doc["job"]["scope"] = self.scope.as_dict() if self.scope else None
        return doc

    def findings(
        self, thresholds: dict[str, Any] | None = None, gpu: str | None = None, arrow: bool = False
    ) -> pd.DataFrame | pa.Table:
        """One row per finding in rank order: severity, id, title, `recoverable_ns_per_step` (ns
        of step time it could save per step, an upper bound), `recoverable_pct` (of the mean
        step), the ranks and steps it concerns, its summary. Evidence, signals and fixes: see
        `diagnose()` (Finding objects) or `diagnosis()` (JSON)."""
        return frame(findings_frame(self.diagnose(thresholds, gpu)), arrow)

    def mfu_summary(self, options: MfuOptions | None = None, **fields: Any) -> dict[str, Any]:
        """The document of `nsight-analyze mfu --format json`; `options` a `MfuOptions`, or its
        fields as keywords, as for `mfu`."""
        from ..gpus.table import validate_gpu
        from ..mfu import READS, MfuOptions, hfu_mfu_summary

        opts = MfuOptions.of(options, **fields)
        validate_gpu(opts.gpu)
        with self.connect(needs=READS, scope=True) as con:
            summary = hfu_mfu_summary(con, opts)
        return {**summary, "job": self.scope.as_dict() if self.scope else None}  # which job (job_scope.py)

    def mfu(
        self,
        model_flops_per_step: float | MfuOptions | None = None,
        *,
        arrow: bool = False,
        **options: Any,
    ) -> pd.DataFrame | pa.Table:
        """MFU and HFU per step: `mfu` = model FLOPs / (step time x GPUs x dense peak), `hfu` =
        counted FLOPs (Nsight Compute) / (window x peak), both fractions (0.42 = 42 %);
        `window_ns_max` is the step's longest rank window (ns), `coverage_pct` the share of kernel
        time with counter data.

        MFU needs `model_flops_per_step` (the whole job's, forward + backward) or a model
        (params + tokens_per_step, or layers/hidden/seq_len[/vocab] with formula='megatron');
        without either, a trace recorded with shapes gives its own (`op_flops`; attrs
        ['model_flops']['source'] says "from trace shapes").
        The keywords are the fields of `nsight_analyze.mfu.MfuOptions` (the options of
        `nsight-analyze mfu`): model_flops_per_step, params, tokens_per_step, layers, hidden,
        seq_len, vocab, recompute ('none'), formula ('palm'), gpu, peak_tflops, precision
        ('bf16'), n_gpus, steps_in_window; or pass one MfuOptions.
        The whole-capture values (mfu, hfu, hfu_over_mfu, peaks, notes, gap) are in `.attrs` of
        the DataFrame (the same keys as `mfu --format json`; an Arrow table has the rows only: see
        `mfu_summary()`); unknown values are None/NaN, with the reason in attrs['notes'].
        """
        from ..mfu import MfuOptions

        if isinstance(model_flops_per_step, MfuOptions):
            summary = self.mfu_summary(model_flops_per_step, **options)
        else:
            summary = self.mfu_summary(model_flops_per_step=model_flops_per_step, **options)
        return frame(mfu_frame(summary), arrow)
