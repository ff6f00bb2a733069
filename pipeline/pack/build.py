"""Assemble one tenant's pack content from the lake tables (pipeline side: polars, numpy)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from memorypack.format import MAX_FIELD_CHARS, TRUNCATION_MARK
from pipeline.audit import promotion_candidates
from pipeline.decay import BASE_CONFIDENCE
from pipeline.dpo import DPO_RUNS_SCHEMA
from pipeline.pack.models import encoder_files
from pipeline.pii import Redactor
from pipeline.storage import Lake
from pipeline.vectors import EmbeddingCache

_TS = pl.Datetime("us", "UTC")
_STR = pl.String()
_STRS = pl.List(pl.String())
_VEC = pl.List(pl.Float32())

# Lake tables a pack reads; any may be absent while a stage has not landed yet.
INPUT_TABLES = (
    "interactions",
    "memory_statements",
    "feedback_scores",
    "decay_snapshots",
    "memory_embeddings",
    "consolidated_summaries",
    "memory_conflicts",
    "few_shot_sets",
    "skill_stats",
    "user_preferences",
    "skill_vectors",
    "template_history",
    "dpo_runs",
)

# The columns each pack file always has (pass-through tables keep any extra upstream columns).
MEMORY_SCHEMA: dict[str, pl.DataType] = {
    "tenant_id": _STR,
    "memory_id": _STR,
    "memory_kind": _STR,
    "contact_id": _STR,
    "memory_type": _STR,
    "kind": _STR,
    "system": _STR,
    "skill_id": _STR,
    "user_id": _STR,
    "category": _STR,
    "impact_level": _STR,
    "text": _STR,
    "output": _STR,
    "tags": _STRS,
    "confidence": pl.Float64(),
    "status": _STR,
    "needs_reconfirmation": pl.Boolean(),
    "stale": pl.Boolean(),
    "last_confirmed": _TS,
    "quality_score": pl.Float64(),
    "quality_lower": pl.Float64(),
    "n_feedback": pl.Int64(),
    "has_correction": pl.Boolean(),
    "has_conflict": pl.Boolean(),
    "has_embedding": pl.Boolean(),
    "ts": _TS,
    # The audit's promotion candidate (SPEC §4.2): the type a person may confirm it as, and why.
    # Listed for the app to ask about, never applied.
    "promotion_to": _STR,
    "promotion_reason": _STR,
}
PASS_THROUGH: dict[str, tuple[str, dict[str, pl.DataType], list[str]]] = {
    # pack file: (lake table, guaranteed columns, sort keys)
    "summaries.parquet": (
        "consolidated_summaries",
        {
            "tenant_id": _STR,
            "scope": _STR,
            "contact_id": _STR,
            "system": _STR,
            "kind": _STR,
            "cluster_id": _STR,
            "summary": _STR,
            "representative_id": _STR,
            "member_ids": _STRS,
            "n_members": pl.Int64(),
            "confidence": pl.Float64(),
            "tags": _STRS,
            "first_seen": _TS,
            "last_seen": _TS,
        },
        ["cluster_id"],
    ),
    "few_shot.parquet": (
        "few_shot_sets",
        {
            "tenant_id": _STR,
            "system": _STR,
            "kind": _STR,
            "skill_id": _STR,
            "rank": pl.Int64(),
            "memory_id": _STR,
            "input": _STR,
            "output": _STR,
            "is_corrected": pl.Boolean(),
            "quality_lower": pl.Float64(),
            "n_feedback": pl.Int64(),
            "ts": _TS,
            "why": _STR,
        },
        ["system", "kind", "skill_id", "rank", "memory_id"],
    ),
    "templates.parquet": (
        "template_history",
        {
            "tenant_id": _STR,
            "skill_id": _STR,
            "version": pl.Int64(),
            "template": _STR,
            "is_current": pl.Boolean(),
            "eval_accuracy": pl.Float64(),
            "eval_margin": pl.Float64(),
            "evidence": _STR,
            "policy_id": _STR,
            "created_at": _TS,
        },
        ["skill_id", "version"],
    ),
    "skills.parquet": (
        "skill_stats",
        {
            "tenant_id": _STR,
            "user_id": _STR,
            "skill_id": _STR,
            "usage": pl.Int64(),
            "n_positive": pl.Int64(),
            "n_negative": pl.Int64(),
            "positive_share": pl.Float64(),
            "ema_confidence": pl.Float64(),
            "mean_reward": pl.Float64(),
            "last_used_at": _TS,
        },
        ["user_id", "skill_id"],
    ),
}
CONFLICT_SCHEMA: dict[str, pl.DataType] = {
    "tenant_id": _STR,
    "contact_id": _STR,
    "memory_id_a": _STR,
    "memory_id_b": _STR,
    "preferred_id": _STR,
    "reason": _STR,
    "subject": _STR,
    "text_a": _STR,
    "text_b": _STR,
}
VECTOR_SCHEMA: dict[str, pl.DataType] = {
    "tenant_id": _STR,
    "owner": _STR,  # "user" (preference vector) | "skill" (mean embedding of its interactions)
    "owner_id": _STR,
    "vector": _VEC,
    "n": pl.Int64(),
}
# Enumerations are kept verbatim; identifiers that look like PII (an e-mail, a phone number…)
# become keyed pseudonyms (pipeline.pii.pseudonym); every other text column of every pack file
# goes through PII redaction.
ENUM_COLUMNS = frozenset(
    {
        "tenant_id",
        "memory_kind",
        "memory_type",
        "kind",
        "system",
        "status",
        "category",
        "impact_level",
        "scope",
        "owner",
        "stage",
        "model",
        "promotion_to",
    }
)
ID_COLUMNS = frozenset(
    {
        "memory_id",
        "contact_id",
        "skill_id",
        "user_id",
        "cluster_id",
        "representative_id",
        "member_ids",
        "memory_id_a",
        "memory_id_b",
        "preferred_id",
        "policy_id",
        "owner_id",
        "session_id",
        # in the analytics snapshot: the same pseudonyms as the packs' ids, so analysts can join
        "event_id",
        "target_id",
        "parent_event_id",
    }
)


# What a pack reports of its tenant's policy (SPEC §4.7): facts of the policy only. When and how
# long it ran, and whether a night reused it, stay in dpo_runs: a pack's content never depends on
# the clock, so a re-run with identical input builds identical content (SPEC §5).
POLICY_METRICS = tuple(
    c for c in DPO_RUNS_SCHEMA if c not in ("tenant_id", "model_dir", "seconds", "reused")
)

# Used only while no decay snapshot exists yet: the §4.2 base of the type (BASE_CONFIDENCE).
DEFAULT_CONFIDENCE = 0.5


@dataclass
class PackInputs:
    """Every lake table a pack reads, as scans: a tenant's pack collects only its own rows, so
    memory holds one tenant at a time, not the lake."""

    as_of: datetime
    tables: dict[str, pl.LazyFrame]
    missing: list[str]
    decay_snapshot: str | None
    load_dates: list[str] = field(default_factory=list)
    ingest_totals: dict[str, int] = field(default_factory=dict)
    event_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    cache: EmbeddingCache | None = None  # where memory_embeddings' vectors are
    redactor: Redactor | None = None  # PII redaction with the home's cache and key
    models_dir: Path | None = None  # the embedding stage's ONNX exports (shipped for text queries)

    @property
    def run_date(self) -> date:
        return (self.as_of - timedelta(days=1)).date()

    def tenants(self) -> list[str]:
        found: set[str] = set()
        for name in ("interactions", "memory_statements"):
            if name in self.tables:
                found.update(
                    self.tables[name]
                    .select(pl.col("tenant_id").unique())
                    .collect()["tenant_id"]
                    .drop_nulls()
                )
        return sorted(found)

    def columns(self, name: str) -> list[str]:
        return self.tables[name].collect_schema().names() if name in self.tables else []

    def rows(self, name: str, tenant: str) -> pl.DataFrame | None:
        """The tenant's rows of a table (None when the table is not in the lake)."""
        table = self.tables.get(name)
        if table is None:
            return None
        if "tenant_id" not in self.columns(name):
            return table.collect()
        return table.filter(pl.col("tenant_id") == tenant).collect()


@dataclass
class PackContent:
    """One tenant's pack before it is written: frames per file, the embedding matrix, manifest parts."""

    tenant_id: str
    as_of: datetime
    frames: dict[str, pl.DataFrame]
    embeddings: np.ndarray
    models: dict[str, Any]
    metrics: dict[str, Any]
    inputs: dict[str, Any]
    redactions: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    # The embedding model's files to ship beside the tenant's versions (pipeline.pack.models).
    model_files: dict[str, Path] = field(default_factory=dict)


def _decay_snapshot(lake: Lake, run_date: date) -> tuple[pl.LazyFrame | None, str | None]:
    """The latest decay snapshot taken on or before the run's date."""
    keys = [k for k in lake.partition_keys("decay_snapshots") if k <= run_date.isoformat()]
    if keys:
        return pl.scan_parquet(lake.paths.partition("decay_snapshots", keys[-1])), keys[-1]
    if lake.paths.table("decay_snapshots").exists():
        frame = pl.read_parquet(lake.paths.table("decay_snapshots"))
        if "as_of" in frame.columns and frame.height:
            limit = datetime.combine(run_date + timedelta(days=1), datetime.min.time())
            eligible = frame.filter(pl.col("as_of").dt.replace_time_zone(None) <= limit)
            if eligible.height:
                latest = eligible["as_of"].max()
                return eligible.filter(pl.col("as_of") == latest).lazy(), str(latest)
        return frame.lazy(), None
    return None, None


def load_inputs(lake: Lake, as_of: datetime) -> PackInputs:
    """Scans of every pack input; records the ones that are not in the lake yet."""
    run_date = (as_of - timedelta(days=1)).date()
    tables: dict[str, pl.LazyFrame] = {}
    missing: list[str] = []
    snapshot_key = None
    for name in INPUT_TABLES:
        frame: pl.LazyFrame | None = None
        if name == "decay_snapshots":
            frame, snapshot_key = _decay_snapshot(lake, run_date)
        elif lake.exists(name):
            frame = lake.read(name)
        if frame is None:
            missing.append(name)
            continue
        if name in ("interactions", "memory_statements") and "load_date" in frame.collect_schema():
            frame = frame.filter(pl.col("load_date").cast(pl.Date) <= run_date)
        tables[name] = frame
    inputs = PackInputs(as_of, tables, missing, snapshot_key)
    inputs.redactor = Redactor.for_home(lake.paths)
    inputs.models_dir = lake.paths.models / "embeddings"
    if "memory_embeddings" in tables:
        inputs.cache = EmbeddingCache(lake.paths.embedding_cache)
    if lake.exists("ingest_stats"):
        stats = lake.read("ingest_stats").collect()
        stats = stats.filter(pl.col("load_date").cast(pl.Date) <= run_date)
        inputs.load_dates = sorted(str(d) for d in stats["load_date"].unique().to_list())
        inputs.ingest_totals = {
            c: int(stats[c].sum())
            for c in ("lines_read", "accepted", "duplicates", "quarantined")
            if c in stats.columns
        }
    if lake.exists("events"):
        counts = (
            lake.read("events")
            .filter(pl.col("load_date").cast(pl.Date) <= run_date)
            .group_by("tenant_id", "event_type")
            .len()
            .collect()
        )
        for tenant, event_type, n in counts.iter_rows():
            inputs.event_counts.setdefault(tenant, {})[event_type] = int(n)
    return inputs


def _ensure(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Add any guaranteed column the upstream table does not (yet) have, as nulls."""
    extra = [
        pl.lit(None, dtype=dtype).alias(c) for c, dtype in schema.items() if c not in frame.columns
    ]
    return frame.with_columns(extra) if extra else frame


def _tenant_rows(
    inputs: PackInputs, name: str, tenant: str, schema: dict[str, pl.DataType]
) -> pl.DataFrame:
    frame = inputs.rows(name, tenant)
    if frame is None:
        return pl.DataFrame(schema=schema)
    return _ensure(frame, schema)


def _memories(inputs: PackInputs, tenant: str) -> pl.DataFrame:
    from pipeline import contracts

    statements = _tenant_rows(inputs, "memory_statements", tenant, contracts.MEMORY_SCHEMA)
    interactions = _tenant_rows(
        inputs, "interactions", tenant, {**contracts.INTERACTION_SCHEMA, "user_id": _STR}
    )
    null_str = pl.lit(None, dtype=_STR)
    common = [pl.col("tenant_id"), pl.col("event_id").alias("memory_id"), pl.col("contact_id")]
    from_statements = statements.select(
        *common,
        pl.lit("statement").alias("memory_kind"),
        pl.col("memory_type"),
        null_str.alias("kind"),
        null_str.alias("system"),
        null_str.alias("skill_id"),
        null_str.alias("user_id"),
        pl.col("category"),
        pl.col("impact_level"),
        pl.col("content").alias("text"),
        null_str.alias("output"),
        pl.col("tags").cast(_STRS),
        pl.coalesce(
            pl.col("confidence").cast(pl.Float64),
            pl.col("memory_type").replace_strict(
                BASE_CONFIDENCE, default=None, return_dtype=pl.Float64
            ),
        ).alias("base_confidence"),
        pl.col("ts").cast(_TS),
    )
    from_interactions = interactions.select(
        *common,
        pl.lit("interaction").alias("memory_kind"),
        pl.lit("interaction").alias("memory_type"),
        pl.col("kind"),
        pl.col("system"),
        pl.col("skill_id"),
        pl.col("user_id"),
        pl.col("category"),
        null_str.alias("impact_level"),
        pl.col("input").alias("text"),
        pl.col("output"),
        pl.col("tags").cast(_STRS),
        pl.col("importance").cast(pl.Float64).alias("base_confidence"),
        pl.col("ts").cast(_TS),
    )
    memories = pl.concat([from_statements, from_interactions], how="vertical_relaxed")

    decay = _tenant_rows(
        inputs,
        "decay_snapshots",
        tenant,
        {
            "memory_id": _STR,
            "confidence": pl.Float64(),
            "status": _STR,
            "needs_reconfirmation": pl.Boolean(),
            "stale": pl.Boolean(),
            "last_confirmed": _TS,
        },
    ).select(
        "memory_id",
        pl.col("confidence").cast(pl.Float64),
        "status",
        "needs_reconfirmation",
        "stale",
        pl.col("last_confirmed").cast(_TS),
    )
    scores = _tenant_rows(
        inputs,
        "feedback_scores",
        tenant,
        {
            "memory_id": _STR,
            "quality_score": pl.Float64(),
            "quality_lower": pl.Float64(),
            "n_feedback": pl.Int64(),
            "has_correction": pl.Boolean(),
        },
    ).select(
        "memory_id",
        pl.col("quality_score").cast(pl.Float64),
        pl.col("quality_lower").cast(pl.Float64),
        pl.col("n_feedback").cast(pl.Int64),
        pl.col("has_correction").cast(pl.Boolean),
    )
    conflicts = _tenant_rows(inputs, "memory_conflicts", tenant, CONFLICT_SCHEMA)
    promotions = _promotions(inputs, tenant, conflicts)
    in_conflict = pl.concat([conflicts["memory_id_a"], conflicts["memory_id_b"]]).drop_nulls()
    embedded = _tenant_rows(inputs, "memory_embeddings", tenant, {"memory_id": _STR})["memory_id"]
    return (
        memories.unique("memory_id", keep="last", maintain_order=True)
        .join(decay.unique("memory_id"), on="memory_id", how="left")
        .join(scores.unique("memory_id"), on="memory_id", how="left")
        .join(promotions, on="memory_id", how="left")
        .with_columns(
            # Without a decay snapshot yet, the stated confidence (or importance) stands.
            pl.coalesce("confidence", "base_confidence", pl.lit(DEFAULT_CONFIDENCE)).alias(
                "confidence"
            ),
            pl.col("status").fill_null("active"),
            pl.col("needs_reconfirmation").fill_null(False),
            pl.col("stale").fill_null(False),
            pl.coalesce("last_confirmed", "ts").alias("last_confirmed"),
            pl.col("quality_score").fill_null(0.0),
            pl.col("quality_lower").fill_null(0.0),
            pl.col("n_feedback").fill_null(0),
            pl.col("has_correction").fill_null(False),
            pl.col("memory_id").is_in(in_conflict.implode()).alias("has_conflict"),
            pl.col("memory_id").is_in(embedded.implode()).alias("has_embedding"),
            pl.col("tags").fill_null(pl.lit([], dtype=_STRS)),
        )
        # Archived memories stay in the lake and warehouse (nothing is deleted); apps get the rest.
        .filter(pl.col("status") != "archived")
        .select([pl.col(c).cast(t) for c, t in MEMORY_SCHEMA.items()])
        .sort("memory_id")
    )


def _promotions(inputs: PackInputs, tenant: str, conflicts: pl.DataFrame) -> pl.DataFrame:
    """(memory_id, promotion_to, promotion_reason) of the audit's promotion candidates, computed
    by the audit's own rule on the pack's decay snapshot (so the pack never waits for the audit
    asset); none when the snapshot predates the columns the rule reads."""
    empty = pl.DataFrame(schema={"memory_id": _STR, "promotion_to": _STR, "promotion_reason": _STR})
    snapshot = inputs.rows("decay_snapshots", tenant)
    needed = {"reinforced_confidence", "reputation", "reinforcement_count", "memory_type"}
    if snapshot is None or not snapshot.height or not needed <= set(snapshot.columns):
        return empty
    snapshot = _ensure(snapshot, {"as_of": _TS, "contact_id": _STR, "last_confirmed": _TS})
    found = promotion_candidates(
        snapshot, conflicts.select("tenant_id", "memory_id_a", "memory_id_b")
    )
    return found.select(
        "memory_id", promotion_to="proposed_type", promotion_reason="reason"
    ).unique("memory_id", keep="first", maintain_order=True)


def _embeddings(
    inputs: PackInputs, tenant: str, memories: pl.DataFrame
) -> tuple[np.ndarray, str | None]:
    """(matrix, model): row i ↔ memories row i, float32, unit length (a memory without an
    embedding is a zero row); the model is the one most of the tenant's memories were embedded
    with (the vectors' own model, not the cache's, which keeps others)."""
    table = _tenant_rows(
        inputs, "memory_embeddings", tenant, {"memory_id": _STR, "text_hash": _STR, "model": _STR}
    )
    models = table["model"].drop_nulls()
    model = str(models.mode().sort().first()) if models.len() else None
    if inputs.cache is None or model is None:
        return np.zeros((memories.height, 0), dtype=np.float32), model
    vectors = inputs.cache.vectors(model, table["text_hash"])
    if not len(vectors):
        return np.zeros((memories.height, 0), dtype=np.float32), model
    aligned = memories.select("memory_id").join(
        table.unique("memory_id").select("memory_id", "text_hash"),
        on="memory_id",
        how="left",
        maintain_order="left",
    )
    present = vectors.has(aligned["text_hash"]).fill_null(False).to_numpy()
    matrix = np.zeros((memories.height, vectors.dim), dtype=np.float32)
    if present.any():
        matrix[present] = vectors.of(aligned["text_hash"].filter(pl.Series(present)))
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return matrix, model


def _vectors(inputs: PackInputs, tenant: str) -> pl.DataFrame:
    users = _tenant_rows(
        inputs,
        "user_preferences",
        tenant,
        {"tenant_id": _STR, "user_id": _STR, "preference_vector": _VEC, "n_updates": pl.Int64()},
    ).select(
        "tenant_id",
        pl.lit("user").alias("owner"),
        pl.col("user_id").alias("owner_id"),
        pl.col("preference_vector").cast(_VEC).alias("vector"),
        pl.col("n_updates").cast(pl.Int64).alias("n"),
    )
    skills = _tenant_rows(
        inputs,
        "skill_vectors",
        tenant,
        {"tenant_id": _STR, "skill_id": _STR, "vector": _VEC, "n_interactions": pl.Int64()},
    ).select(
        "tenant_id",
        pl.lit("skill").alias("owner"),
        pl.col("skill_id").alias("owner_id"),
        pl.col("vector").cast(_VEC),
        pl.col("n_interactions").cast(pl.Int64).alias("n"),
    )
    return (
        pl.concat([users, skills], how="vertical_relaxed")
        .cast(pl.Schema(VECTOR_SCHEMA))
        .sort("owner", "owner_id")
    )


def _conflicts(inputs: PackInputs, tenant: str, memories: pl.DataFrame) -> pl.DataFrame:
    texts = memories.select("memory_id", "text")
    frame = _tenant_rows(inputs, "memory_conflicts", tenant, CONFLICT_SCHEMA).drop(
        "text_a", "text_b", strict=False
    )
    return (
        frame.join(
            texts.rename({"memory_id": "memory_id_a", "text": "text_a"}),
            on="memory_id_a",
            how="left",
        )
        .join(
            texts.rename({"memory_id": "memory_id_b", "text": "text_b"}),
            on="memory_id_b",
            how="left",
        )
        .sort("memory_id_a", "memory_id_b")
    )


def _models_and_metrics(
    inputs: PackInputs, tenant: str, model: str | None, dim: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    models: dict[str, Any] = {
        "embedding": {"model": model or "unknown", "dim": dim},
        "policy_id": None,
    }
    metrics: dict[str, Any] = {"dpo": None}
    mine = inputs.rows("dpo_runs", tenant)
    if mine is not None and "tenant_id" in mine.columns and mine.height:
        trained = mine.filter(pl.col("status") == "trained") if "status" in mine.columns else mine
        row = (trained if trained.height else mine).row(-1, named=True)
        models["policy_id"] = (
            row.get("policy_id") if row.get("status", "trained") == "trained" else None
        )
        metrics["dpo"] = {k: row[k] for k in POLICY_METRICS if k in row}
    return models, metrics


def _cut(text: pl.Expr) -> pl.Expr:
    keep = MAX_FIELD_CHARS - len(TRUNCATION_MARK)
    return (
        pl.when(text.str.len_chars() > MAX_FIELD_CHARS)
        .then(text.str.slice(0, keep) + TRUNCATION_MARK)
        .otherwise(text)
    )


def cut_long_texts(frame: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int]]:
    """Every text (identifiers and list items too) cut to MAX_FIELD_CHARS, ending with the marker,
    so one huge field cannot bloat a pack or an app's memory (loaders refuse longer ones); how
    many were cut, per column. Run after redaction, which may lengthen a text."""
    counts: dict[str, int] = {}
    cuts = []
    for column, dtype in frame.schema.items():
        if dtype not in (pl.String, _STRS):
            continue
        texts = pl.col(column).explode() if dtype == _STRS else pl.col(column)
        n = int(frame.select((texts.str.len_chars() > MAX_FIELD_CHARS).sum()).item())
        if n:
            counts[column] = n
            cuts.append(
                pl.col(column).list.eval(_cut(pl.element()))
                if dtype == _STRS
                else _cut(pl.col(column))
            )
    return (frame.with_columns(cuts) if cuts else frame), counts


def build_pack(inputs: PackInputs, tenant: str) -> PackContent:
    """Every file of one tenant's pack, only that tenant's rows, with PII redacted."""
    memories = _memories(inputs, tenant)
    embeddings, embedding_model = _embeddings(inputs, tenant, memories)
    frames: dict[str, pl.DataFrame] = {"memories.parquet": memories}
    frames["conflicts.parquet"] = _conflicts(inputs, tenant, memories)
    for file_name, (table, schema, keys) in PASS_THROUGH.items():
        frames[file_name] = _tenant_rows(inputs, table, tenant, schema).sort(keys, nulls_last=True)
    frames["vectors.parquet"] = _vectors(inputs, tenant)

    by_kind: Counter[str] = Counter()
    by_file: dict[str, dict[str, int]] = {}
    truncated: dict[str, int] = {}
    if inputs.redactor is None:
        raise ValueError("PackInputs.redactor is not set: build packs from load_inputs")
    for file_name in sorted(frames):
        frames[file_name], found = inputs.redactor.frame(
            frames[file_name], identifiers=ID_COLUMNS, keep=ENUM_COLUMNS
        )
        by_kind.update(found)
        if found:
            by_file[file_name] = dict(sorted(found.items()))
        frames[file_name], cut = cut_long_texts(frames[file_name])
        truncated.update({f"{file_name}:{column}": n for column, n in cut.items()})
    inputs.redactor.flush()
    models, metrics = _models_and_metrics(inputs, tenant, embedding_model, embeddings.shape[1])
    encoder = (
        encoder_files(embedding_model, embeddings.shape[1], inputs.models_dir)
        if inputs.models_dir is not None
        else None
    )
    if encoder is not None:
        models["embedding"]["encoder"] = encoder.spec
    table_rows = {
        name: (
            None
            if name in inputs.missing
            else int(
                inputs.tables[name]
                .filter(pl.col("tenant_id") == tenant)
                .select(pl.len())
                .collect()
                .item()
            )
        )
        for name in INPUT_TABLES
        if name in inputs.missing or "tenant_id" in inputs.columns(name)
    }
    input_info = {
        "run_date": inputs.run_date.isoformat(),
        "load_dates": inputs.load_dates,
        "ingest_totals_all_tenants": inputs.ingest_totals,
        "events": dict(sorted(inputs.event_counts.get(tenant, {}).items())),
        "decay_snapshot": inputs.decay_snapshot,
        "table_rows": table_rows,
        "missing_tables": inputs.missing,
    }
    redactions = {
        "total": sum(by_kind.values()),
        "by_kind": dict(sorted(by_kind.items())),
        "by_file": by_file,
        "truncated": truncated,  # texts over MAX_FIELD_CHARS characters, per file:column
    }
    return PackContent(
        tenant,
        inputs.as_of,
        frames,
        embeddings,
        models,
        metrics,
        input_info,
        redactions,
        model_files=encoder.sources if encoder is not None else {},
    )
