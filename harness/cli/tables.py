"""Tables the commands print on the terminal: one unit per kind of quantity, said in the column
name, and numbers a reader can take in.

:func:`text_table` renders a data frame whose column names carry their unit the way the run's
tables do (``p50_ns``, ``ttft_p50_s``, ``total_ms``, ``route_p99_us``): a time per call is
shown in microseconds (``_us``), a request latency or a total in milliseconds (``_ms``), never
in seconds; the header says the unit shown (``ttft_p50_s`` -> ``ttft_p50_ms``). A column's
figures share its decimals, enough for three significant digits of its largest value, with
thousands separators (``35.3``, ``4,883.4``; ``0.039``, ``0.388``); counts are whole
(``102,400``); a missing value is ``-``. Text columns are left aligned, numbers right aligned.
The saved tables keep the full precision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["decimals_for", "fmt_number", "text_table"]

#: name suffix -> (suffix shown, factor to it): per-call times in µs, latencies in ms
_UNITS = {"_ns": ("_us", 1e-3), "_us": ("_us", 1.0), "_ms": ("_ms", 1.0), "_s": ("_ms", 1e3)}


def decimals_for(values: Sequence[Any]) -> int:
    """Decimals that give a column's largest magnitude three significant digits at least:
    1 from 10 up, 2 for [1, 10), 3 for [0.1, 1), 4 for [0.01, 0.1)...; 0 when every value is
    whole."""
    nums = [abs(float(v)) for v in values if isinstance(v, (int, float)) and not math.isnan(v)]
    if not nums or all(float(v).is_integer() for v in nums):
        return 0
    top = max(nums)
    if top >= 10:
        return 1
    return 2 - math.floor(math.log10(top)) if top > 0 else 1


def fmt_number(value: Any, decimals: int | None = None) -> str:
    """``value`` with thousands separators and ``decimals`` (default: :func:`decimals_for`
    the value alone): 0.475, 3.13, 14.8, 530.6, 3,664.3, 102,400; NaN / None as ``-``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    d = decimals_for([value]) if decimals is None else decimals
    return f"{value:,.{d}f}"


def _column(name: str, values: Sequence[Any]) -> tuple[str, list[str], bool]:
    """(header, cells, numeric) of one column; the decimals are the column's
    (:func:`decimals_for`), so its figures line up."""
    numeric = all(
        v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values
    ) and any(isinstance(v, (int, float)) for v in values)
    if not numeric:
        return name, ["-" if v is None else str(v) for v in values], False
    header, factor = name, 1.0
    if not name.endswith("_per_s"):
        for suffix, (shown, f) in _UNITS.items():
            if name.endswith(suffix):
                header, factor = name[: -len(suffix)] + shown, f
                break
    scaled = [v if v is None or factor == 1.0 else v * factor for v in values]
    d = decimals_for(scaled)
    return header, [fmt_number(v, d) for v in scaled], True


def _plain(value: Any) -> Any:
    """A cell as a Python value (numpy scalars, pandas' NA -> None)."""
    if value is None:
        return None
    try:
        import pandas as pd

        if value is pd.NA or (not isinstance(value, str) and pd.isna(value)):
            return None
    except (TypeError, ValueError):
        pass
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def text_table(df: Any, columns: Sequence[str] | None = None, indent: str = "") -> str:
    """``df`` (a pandas data frame) as a terminal table (module docstring): ``columns`` in
    that order (default all; absent ones left out), each line prefixed by ``indent``."""
    names = [c for c in (columns or list(df.columns)) if c in df.columns]
    cols = [_column(str(c), [_plain(v) for v in df[c].tolist()]) for c in names]
    widths = [max([len(h), *(len(x) for x in cells)]) for h, cells, _ in cols]
    lines = []
    for row in range(-1, len(df)):
        parts = []
        for (header, cells, numeric), width in zip(cols, widths, strict=True):
            text = header if row < 0 else cells[row]
            parts.append(text.rjust(width) if numeric else text.ljust(width))
        lines.append(indent + "  ".join(parts).rstrip())
    return "\n".join(lines)
