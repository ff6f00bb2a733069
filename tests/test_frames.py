"""Shared polars helpers."""

import polars as pl
import pytest

from pipeline.frames import fmt


def test_fmt_matches_pl_format_and_counts_placeholders() -> None:
    frame = pl.DataFrame({"a": [0.8312, None], "b": ["x", "y"], "n": [3, 4]})
    expr = fmt("c {} / {}: {}", pl.col("a").round(2), "b", "n")
    assert frame.select(expr.alias("t"))["t"].to_list() == ["c 0.83 / x: 3", None]
    assert frame.lazy().select(expr.alias("t")).collect()["t"].to_list() == ["c 0.83 / x: 3", None]
    with pytest.raises(ValueError, match="2 placeholders"):
        fmt("{} {}", "a")
