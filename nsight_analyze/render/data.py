"""Results as data: plain-Python records and JSON (CSV is pandas' own `to_csv`).

JSON keeps trace text exactly (its escaping is `json.dumps`'), so a name round-trips.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from ..plain import jsonable


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as plain-Python dicts (ints stay ints, NaN becomes null)."""
    return [{k: jsonable(v) for k, v in row.items()} for row in df.astype(object).to_dict("records")]


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=jsonable)
