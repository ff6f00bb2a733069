"""Small polars helpers shared by the stages."""

from __future__ import annotations

import re

import polars as pl


def fmt(template: str, *values: str | pl.Expr) -> pl.Expr:
    """`pl.format` for human-readable text: `{}` placeholders, each value cast to a string.

    polars 2.1's streaming engine panics on `pl.format` with a float argument on some inputs
    (`assertion failed: i < self.len()`, seen on a 1M-interaction audit); an explicit cast inside
    `concat_str` is the same text without that code path.
    """
    pieces = re.split(r"\{\}", template)
    if len(pieces) != len(values) + 1:
        raise ValueError(f"{template!r} has {len(pieces) - 1} placeholders, got {len(values)}")
    parts: list[pl.Expr] = []
    for piece, value in zip(pieces, [*values, None], strict=True):
        if piece:
            parts.append(pl.lit(piece, pl.String))
        if value is not None:
            parts.append((pl.col(value) if isinstance(value, str) else value).cast(pl.String))
    return pl.concat_str(parts)
