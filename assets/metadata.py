"""One way to turn a frame and its key figures into Dagster metadata (row count, preview, figures)."""

from __future__ import annotations

from typing import Any

import dagster as dg
import polars as pl

PREVIEW_ROWS = 5
PREVIEW_CHARS = 80


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > PREVIEW_CHARS:
        return value[: PREVIEW_CHARS - 1] + "…"
    return value


def preview_markdown(frame: pl.DataFrame, rows: int = PREVIEW_ROWS) -> str:
    if frame.is_empty():
        return "_(no rows)_"
    head = frame.head(rows)
    cols = head.columns
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for record in head.iter_rows():
        cells = [str(_short(v)).replace("|", "\\|").replace("\n", " ") for v in record]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def frame_metadata(
    frame: pl.DataFrame,
    figures: dict[str, Any] | None = None,
    preview_columns: list[str] | None = None,
) -> dict[str, Any]:
    """Row count, a small Markdown preview and the key figures of one asset."""
    shown = frame.select(preview_columns) if preview_columns else frame
    meta: dict[str, Any] = {
        "dagster/row_count": dg.MetadataValue.int(frame.height),
        "preview": dg.MetadataValue.md(preview_markdown(shown)),
    }
    for key, value in (figures or {}).items():
        if isinstance(value, bool):
            meta[key] = dg.MetadataValue.bool(value)
        elif isinstance(value, int):
            meta[key] = dg.MetadataValue.int(value)
        elif isinstance(value, float):
            meta[key] = dg.MetadataValue.float(value)
        elif isinstance(value, dict | list):
            meta[key] = dg.MetadataValue.json(value)
        else:
            meta[key] = dg.MetadataValue.text(str(value))
    return meta
