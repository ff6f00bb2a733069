"""Small polars helpers shared by the stages."""

from __future__ import annotations

import re

import numpy as np
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


def codes(values: pl.Series) -> np.ndarray:
    """Equal values ↔ equal integer codes (exact matching without strings in numpy)."""
    return values.cast(pl.Categorical).to_physical().to_numpy()


def group_bounds(frame: pl.DataFrame, keys: list[str]) -> list[tuple[int, int]]:
    """(start, end) row ranges of the runs of equal `keys` in a frame sorted by them."""
    if frame.is_empty():
        return []  # an empty night has no groups (not one empty group)
    group = frame.select(pl.struct(keys).rle_id()).to_series().to_numpy()
    ends = np.append(np.flatnonzero(np.diff(group)) + 1, len(group))
    starts = np.concatenate([[0], ends[:-1]])
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def group_fingerprints(frame: pl.DataFrame, keys: list[str], ids: str, salt: str) -> pl.DataFrame:
    """keys + n + digest + salt: one row per group, the digest a hash of its sorted ids.

    A stage whose output per group depends only on the group's (immutable) events, its config and
    its model (`salt`) reuses last night's output for every group whose fingerprint is unchanged.
    """
    return (
        frame.group_by(keys)
        .agg(
            pl.len().cast(pl.Int64).alias("n"),
            pl.col(ids).sort().str.join("\x1f").hash(seed=7).alias("digest"),
            pl.lit(salt, pl.String).alias("salt"),
        )
        .sort(keys, nulls_last=True)  # the same groups are written as the same rows
    )


def changed_groups(
    current: pl.DataFrame, previous: pl.DataFrame | None, keys: list[str]
) -> pl.DataFrame:
    """The keys of `current` groups that are new or whose fingerprint changed since `previous`."""
    if previous is None or previous.is_empty():
        return current.select(keys)
    return current.join(
        previous.select(*keys, "n", "digest", "salt"),
        on=[*keys, "n", "digest", "salt"],
        how="anti",
        nulls_equal=True,
    ).select(keys)


def replace_groups(
    previous: pl.DataFrame | None,
    fresh: pl.DataFrame,
    recomputed: pl.DataFrame,
    present: pl.DataFrame,
    keys: list[str],
) -> pl.DataFrame:
    """Last night's rows of the groups that were not recomputed and still exist, plus `fresh`."""
    if previous is None:
        return fresh
    kept = previous.join(recomputed, on=keys, how="anti", nulls_equal=True).join(
        present.select(keys), on=keys, how="semi", nulls_equal=True
    )
    return pl.concat([kept.select(fresh.columns).cast(fresh.schema), fresh])


def detached_head(frame: pl.DataFrame, n: int) -> pl.DataFrame:
    """The first `n` rows as a frame of their own. `frame.head(n)` is a view that keeps every
    buffer of `frame` alive: a day's events kept as a metadata preview held the whole day."""
    return pl.DataFrame(frame.head(n).rows(), schema=frame.schema, orient="row")
