"""An app's arguments, checked before a query runs: a malformed one is a ValueError that names
it (`k must be a whole number, not nan`), never a silent wrong answer (`k=nan` once returned every
row) nor another library's error from deep inside."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np


def whole(value: Any, name: str, low: int | None = None) -> int:
    """A count (`k`, `budget_chars`): an integer, or a float that is one (3.0); not a bool, NaN
    or infinity; at least `low` when given."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a whole number, not {value!r}")
    if isinstance(value, numbers.Integral):
        count = int(value)
    else:
        as_float = float(value)
        if not math.isfinite(as_float) or not as_float.is_integer():
            raise ValueError(f"{name} must be a whole number, not {value!r}")
        count = int(as_float)
    if low is not None and count < low:
        raise ValueError(f"{name} must be ≥ {low}, not {count}")
    return count


def number(value: Any, name: str, low: float | None = None, high: float | None = None) -> float:
    """A finite number (a floor, a share, a timeout), within [low, high] when given."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, not {value!r}")
    found = float(value)
    if (low is not None and found < low) or (high is not None and found > high):
        raise ValueError(f"{name} must lie in [{low}, {high}], not {value!r}")
    return found


def optional_number(value: Any, name: str) -> float | None:
    return None if value is None else number(value, name)


def vector(value: Sequence[float] | np.ndarray | None, name: str = "query_vector") -> Any:
    """A query vector of finite numbers (None stays None): a NaN or an infinity would rank by
    nothing and answer as if it were a query."""
    if value is None:
        return None
    try:
        array = np.asarray(value, dtype=np.float32).ravel()
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of numbers") from None
    if not np.isfinite(array).all():
        raise ValueError(f"{name} holds NaN or infinite values")
    return array
