"""Run labels: what a user says about a run (name, date, batch=32, tp=2, nodes=8), read at ingest.

Why: `runs` lists many runs of one workspace and groups, filters and scales them by what changed
between them; the traces do not say that the batch doubled or that the run was a strong-scaling
step. Labels come from a small file beside the traces (`run.toml` or `run.json` in the folder of
a file, or in a folder above it up to the ingest's input) and from `ingest --label key=value`;
both are checked against each other before anything is written (a conflict is one line, exit 2),
then stored per file (`run_labels(file_id, key, value, source)`) in the same transaction as the
file's rows (ingest/landing.py), so a failed ingest leaves no label behind and `--replace` replaces them
with the file. A run (a job, queries/job/merge_jobs.sql) has the labels of its files.
"""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

from .errors import UserError

try:  # Python 3.11+; on 3.10 only run.json is read unless tomli is installed
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover - 3.10 only
    try:
        import tomli as _toml  # type: ignore[no-redef]
    except ModuleNotFoundError:
        _toml = None  # type: ignore[assignment]

LABEL_FILES = ("run.toml", "run.json")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
# (key, value, source): source is 'file:PATH' or 'cli'
Label = tuple[str, str, str]


def _text(value: Any) -> str:
    """A label value as text: numbers as written, booleans true/false, dates ISO, lists joined by ','."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return str(value)


def _flatten(doc: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested tables as dotted keys ({'nccl': {'algo': 'ring'}} -> nccl.algo=ring)."""
    out: dict[str, str] = {}
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}."))
        elif value is not None:
            out[name] = _text(value)
    return out


def check_key(key: str, where: str) -> str:
    """A label key as stored (lower case); a key that is not a plain name is one clear line."""
    if not _KEY.match(key):
        raise UserError(f"{where}: label key {key!r} is not a name (letters, digits, _ . -; a letter first)")
    return key.lower()


def read_label_file(path: Path) -> dict[str, str]:
    """The labels of one run.toml / run.json: {key: value as text}. A file that cannot be read or
    parsed is one clear line (exit 2), not a silently unlabelled run."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: cannot read the run labels ({exc.strerror or exc})") from None
    if path.suffix == ".toml":
        if _toml is None:
            raise UserError(f"{path}: reading run.toml needs Python 3.11+ or tomli; write run.json instead")
        try:
            doc = _toml.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise UserError(f"{path}: not valid TOML ({str(exc).splitlines()[0]})") from None
    else:
        try:
            doc = json.loads(raw)
        except (UnicodeDecodeError, ValueError) as exc:
            raise UserError(f"{path}: not valid JSON ({str(exc).splitlines()[0]})") from None
        if not isinstance(doc, dict):
            raise UserError(f"{path}: run labels must be a JSON object of key: value")
    return {check_key(k, str(path)): v for k, v in _flatten(doc).items()}


def parse_cli_labels(specs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """`--label key=value` options as {key: value}; the same key twice with two values is a conflict."""
    out: dict[str, str] = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--label {spec!r}: give key=value (e.g. --label batch=32)")
        key = check_key(key.strip(), f"--label {spec}")
        value = value.strip()
        if key in out and out[key] != value:
            raise UserError(f"--label {key}: given twice ({out[key]} and {value}); give one value")
        out[key] = value
    return out


def _label_folder(path: Path, roots: list[Path]) -> list[Path]:
    """The run label files that apply to `path`: those of the nearest folder holding one, from the
    file's own folder up to the input it was found under (never above what the user named)."""
    folder = path.parent.absolute()
    stops = {r.absolute() if r.is_dir() else r.absolute().parent for r in roots}
    while True:
        found = [folder / name for name in LABEL_FILES if (folder / name).is_file()]
        if found or folder in stops or folder.parent == folder:
            return found
        folder = folder.parent


def labels_for(paths: list[Path], roots: list[Path], cli: dict[str, str]) -> dict[Path, list[Label]]:
    """{path: its labels} for the files of one ingest: the label files' (run.toml and run.json of
    one folder must agree) and the command line's. A key both give with different values is one
    clear line naming both (UserError, exit 2): nothing is written."""
    cache: dict[tuple[Path, ...], dict[str, tuple[str, str]]] = {}
    out: dict[Path, list[Label]] = {}
    for path in paths:
        files = tuple(_label_folder(path, roots))
        if files not in cache:
            merged: dict[str, tuple[str, str]] = {}
            for f in files:
                for key, value in read_label_file(f).items():
                    if key in merged and merged[key][0] != value:
                        raise UserError(
                            f"label {key}: {merged[key][1]} says {merged[key][0]}, {f} says {value}; "
                            "make them agree"
                        )
                    merged[key] = (value, str(f))
            for key, value in cli.items():
                if key in merged and merged[key][0] != value:
                    raise UserError(
                        f"label {key}: {merged[key][1]} says {merged[key][0]}, --label says {value}; "
                        "make them agree (or drop one)"
                    )
            cache[files] = merged
        merged = cache[files]
        labels = [(k, v, f"file:{src}") for k, (v, src) in sorted(merged.items())]
        labels += [(k, v, "cli") for k, v in sorted(cli.items()) if k not in merged]
        out[path] = labels
    return out


def label_number(text: Any) -> float | None:
    """A label value as a number when it is one (batch=32, lr=3e-4), else None."""
    try:
        value = float(str(text))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def same_label(a: Any, b: Any) -> bool:
    """Label values equal as numbers when both are (32 = 32.0), else as text."""
    x, y = label_number(a), label_number(b)
    return x == y if x is not None and y is not None else str(a) == str(b)
