"""One copy of each (tenant_id, event_id): re-sent events counted once, the same id with other
content quarantined (`conflicting_duplicate`)."""

from __future__ import annotations

from datetime import date

import polars as pl

from pipeline.ingest.contracts import Reason

KEY = ["tenant_id", "event_id"]
KEY_COLUMNS = [*KEY, "content_hash"]  # what a later batch or partition is deduplicated against


def deduplicate(
    events: pl.DataFrame, existing: pl.LazyFrame | None
) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Keep one copy of each (tenant_id, event_id), here and in `existing` (the KEY_COLUMNS of
    the events kept before: earlier batches of the folder, or other partitions).

    A re-sent identical event is a duplicate (counted, not stored twice); the same id with
    different content is quarantined as `conflicting_duplicate`: the first accepted copy stays.
    Returns (kept events sorted by tenant_id, event_id; conflicting rows as events; number of
    identical duplicates). The decisions are made on the key columns alone and the wide rows
    gathered once: a day's events (~700 MB at 670,000 lines) are never copied whole in between.
    """
    keys = (
        events.select(*KEY_COLUMNS, "source_file", "line_no")
        .with_row_index("_row")
        .sort("source_file", "line_no")
    )
    first = keys.unique(subset=KEY, keep="first", maintain_order=True)
    rest = keys.join(first.select("_row"), on="_row", how="anti").join(
        first.select(*KEY, pl.col("content_hash").alias("kept_hash")), on=KEY, how="left"
    )
    duplicates = rest.filter(pl.col("content_hash") == pl.col("kept_hash")).height
    conflicts = [rest.filter(pl.col("content_hash") != pl.col("kept_hash"))["_row"]]
    if existing is not None:
        seen = (
            existing.select(*KEY, pl.col("content_hash").alias("seen_hash"))
            .join(first.lazy().select(KEY), on=KEY, how="semi")
            .unique(subset=KEY, keep="first")
            .collect()
        )
        first = first.join(seen, on=KEY, how="left")
        duplicates += first.filter(pl.col("seen_hash") == pl.col("content_hash")).height
        conflicts.append(first.filter(pl.col("seen_hash") != pl.col("content_hash"))["_row"])
        first = first.filter(pl.col("seen_hash").is_null())
    kept = first.sort(KEY)["_row"]
    return _rows(events, kept), _rows(events, pl.concat(conflicts)), duplicates


def _rows(frame: pl.DataFrame, rows: pl.Series) -> pl.DataFrame:
    return frame.select(pl.all().gather(rows))


def conflict_rows(
    conflicts: pl.DataFrame, load_date: date, lines: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Conflicting events as quarantine rows, with their raw text from `lines` (the batch they
    came in); without it (conflicts with other partitions, found once the whole folder is read)
    the text is filled in later (`pipeline.ingest.quarantined.with_raw_text`)."""
    if lines is not None:
        conflicts = conflicts.join(
            lines.select(pl.col("file").alias("source_file"), "line_no", "raw"),
            on=["source_file", "line_no"],
            how="left",
        )
    raw = pl.col("raw") if "raw" in conflicts.columns else pl.lit(None, dtype=pl.String)
    return conflicts.select(
        pl.lit(load_date, dtype=pl.Date).alias("load_date"),
        pl.col("source_file").alias("file"),
        "line_no",
        pl.lit(Reason.CONFLICTING_DUPLICATE.value).alias("reason"),
        raw.alias("raw"),
        pl.lit(None, dtype=pl.Binary).alias("raw_bytes"),
        "tenant_id",
        "event_id",
        pl.lit(1, dtype=pl.Int64).alias("lines"),
        pl.concat_list(pl.col("line_no").cast(pl.Int64)).alias("line_nos"),
    )
