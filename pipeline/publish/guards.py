"""The checks that gate a publish (blocking): a pack failing any of them is never made live. The
PII check masks what it finds instead (it runs before the pack is written)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from pipeline.publish.content import PackContent, PackInputs
from pipeline.publish.masking import mask_pii

NORM_TOLERANCE = 1e-3
MAX_EXAMPLES = 5


@dataclass(frozen=True)
class GuardResult:
    name: str
    passed: bool
    detail: str
    metadata: dict[str, Any] = field(default_factory=dict)


def _confidences_in_range(content: PackContent, inputs: PackInputs) -> GuardResult:
    memories = content.frames["memories.parquet"]
    bad = memories.filter(
        ~pl.col("confidence").is_between(0.0, 1.0)
        | pl.col("confidence").is_nan()
        | ~pl.col("quality_lower").is_between(-1.0, 1.0)
    )
    ids = bad["memory_id"].head(MAX_EXAMPLES).to_list()
    return GuardResult(
        "pack_confidence_in_range",
        bad.is_empty(),
        "every confidence in [0, 1] and quality_lower in [-1, 1]"
        if bad.is_empty()
        else f"{bad.height} memories out of range, e.g. {ids}",
        {"out_of_range": bad.height},
    )


def _few_shot_not_negative(content: PackContent, inputs: PackInputs) -> GuardResult:
    """No example whose own feedback is net-negative (a corrected output is the positive side)."""
    examples = content.frames["few_shot.parquet"]
    scores = inputs.rows("feedback_scores")
    negative = examples.clear()
    if scores is not None and examples.height:
        sides = (
            ["n_positive", "n_negative"]
            if {"n_positive", "n_negative"} <= set(scores.columns)
            else []
        )
        net = (
            (pl.col("n_negative") > pl.col("n_positive"))
            if sides
            else (pl.col("quality_score") < 0)
        )
        votes = scores.select("memory_id", net.alias("net_negative"))
        negative = examples.join(votes, on="memory_id", how="left").filter(
            pl.col("net_negative").fill_null(False) & ~pl.col("is_corrected").fill_null(False)
        )
    ids = negative["memory_id"].head(MAX_EXAMPLES).to_list()
    return GuardResult(
        "pack_few_shot_not_negative",
        negative.is_empty(),
        "no few-shot example has net-negative feedback"
        if negative.is_empty()
        else f"{negative.height} few-shot examples have net-negative feedback, e.g. {ids}",
        {"negative_examples": negative.height},
    )


def finite_and_norms(blocks: Iterable[np.ndarray]) -> tuple[bool, np.ndarray]:
    """Whether every value is finite, and each row's norm, a block of rows at a time."""
    finite, norms = True, [np.empty(0, dtype=np.float32)]
    for rows in blocks:
        finite = finite and bool(np.isfinite(rows).all())
        norms.append(np.linalg.norm(rows, axis=1))
    return finite, np.concatenate(norms)


def _embeddings_match(content: PackContent, inputs: PackInputs) -> GuardResult:
    matrix = content.embeddings  # float32 by construction (EmbeddingMatrix)
    rows = content.frames["memories.parquet"].height
    problems = list(content.problems)
    if matrix.rows != rows:
        problems.append(f"{matrix.rows} embedding rows for {rows} memories")
    if matrix.rows and matrix.dim:
        finite, norms = finite_and_norms(matrix.blocks())
        if not finite:
            problems.append("embeddings contain NaN or infinity")
        off = int(((np.abs(norms - 1) > NORM_TOLERANCE) & (norms > 0)).sum())
        if off:
            problems.append(f"{off} embeddings are not unit length")
    return GuardResult(
        "pack_embeddings_match_memories",
        not problems,
        "; ".join(problems) or f"{rows} unit-length float32 rows, dim {matrix.dim}",
        {"rows": rows, "dim": matrix.dim},
    )


def _single_tenant(content: PackContent, inputs: PackInputs) -> GuardResult:
    foreign = {
        name: int((frame["tenant_id"] != content.tenant_id).fill_null(True).sum())
        for name, frame in content.frames.items()
        if "tenant_id" in frame.columns
    }
    foreign = {name: n for name, n in foreign.items() if n}
    missing = [name for name, frame in content.frames.items() if "tenant_id" not in frame.columns]
    passed = not foreign and not missing
    detail = (
        f"every row belongs to {content.tenant_id}"
        if passed
        else f"rows of other tenants: {foreign}; files without tenant_id: {missing}"
    )
    return GuardResult("pack_single_tenant", passed, detail, {"foreign_rows": foreign})


def _pii_redacted(content: PackContent, inputs: PackInputs) -> GuardResult:
    """Scanned by the guard's own detector (pipeline.pii.guard), not the redactor's: a value
    the redactor missed or cut in half is masked where it stands (pipeline.publish.masking) and
    counted here and in the manifest; it never holds back the pack (SPEC §5 round 3). The check
    fails only if a masked text is still flagged.

    A text this version of the detector found clean in an earlier pack of the tenant (or, for
    the whole home, of any tenant) is not scanned again: its keyed hash is kept in the redaction
    cache under the detector's own name (`guard_version`), so a night scans only its new texts."""
    masked = mask_pii(content, inputs.redactor)
    detail = "no PII left in any text field or identifier"
    if masked.total:
        detail += f"; masked {masked.total} the redactor missed: {masked.counts}"
    if masked.left:
        detail = f"PII left after masking in {masked.left}"
    return GuardResult(
        "pack_pii_redacted",
        not masked.left,
        detail,
        {
            "redacted": content.redactions.get("total", 0),
            "masked": masked.counts,
            "masked_total": masked.total,
            "left": masked.left,
        },
    )


GUARDS = (
    _confidences_in_range,
    _few_shot_not_negative,
    _embeddings_match,
    _single_tenant,
    _pii_redacted,
)
GUARD_NAMES = (
    "pack_confidence_in_range",
    "pack_few_shot_not_negative",
    "pack_embeddings_match_memories",
    "pack_single_tenant",
    "pack_pii_redacted",
)
GUARD_DESCRIPTIONS = {
    "pack_confidence_in_range": "Every memory confidence in [0, 1] and quality_lower in [-1, 1].",
    "pack_few_shot_not_negative": "No few-shot example with net-negative feedback (corrected ones allowed).",
    "pack_embeddings_match_memories": "embeddings.npy has one finite unit-length float32 row per memory.",
    "pack_single_tenant": "Every row of a tenant's pack belongs to that tenant.",
    "pack_pii_redacted": "No email, phone, card, IBAN, SSN or IP address (nor half of one) left in any text field or identifier, by a detector independent of the redactor; what it finds is masked in place and counted (pii_masked in the manifest).",
}


def run_guards(content: PackContent, inputs: PackInputs) -> list[GuardResult]:
    return [guard(content, inputs) for guard in GUARDS]
