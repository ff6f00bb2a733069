"""Shared polars helpers."""

from datetime import UTC, datetime

import polars as pl
import pytest

from pipeline.frames import detached_head, fmt


def test_fmt_matches_pl_format_and_counts_placeholders() -> None:
    frame = pl.DataFrame({"a": [0.8312, None], "b": ["x", "y"], "n": [3, 4]})
    expr = fmt("c {} / {}: {}", pl.col("a").round(2), "b", "n")
    assert frame.select(expr.alias("t"))["t"].to_list() == ["c 0.83 / x: 3", None]
    assert frame.lazy().select(expr.alias("t")).collect()["t"].to_list() == ["c 0.83 / x: 3", None]
    with pytest.raises(ValueError, match="2 placeholders"):
        fmt("{} {}", "a")


def test_detached_head_is_the_head_with_the_frame_schema() -> None:
    frame = pl.DataFrame(
        {
            "text": [f"text {i}" for i in range(10)],
            "tags": [["a", "b"]] * 10,
            "ts": [datetime(2026, 11, 1, tzinfo=UTC)] * 10,
            "note": [None] * 10,
        },
        schema_overrides={"note": pl.String},
    )
    assert detached_head(frame, 3).equals(frame.head(3))
    assert detached_head(frame, 3).schema == frame.schema
    assert detached_head(frame.clear(), 3).schema == frame.schema
