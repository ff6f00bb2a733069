"""Conflicts (SPEC §4.4): statement pairs about one contact that cannot both be true; both stay."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.sparse import csr_matrix

from pipeline import tables
from pipeline.frames import codes, group_bounds
from pipeline.ingest.contracts import MemoryType
from pipeline.semantic.embed import DECISION_MARGIN, normalise_text, text_hashes
from pipeline.semantic.wording import NOT_NEGATIONS, speaker, subject_words, word_overlap
from pipeline.storage.vectors import TextVectors

# The trust order of the seeds (explicit > correction > confirmed > inferred > single > temporary):
# a lower rank wins a conflict; within one level the newer memory wins.
SOURCE_RANK: dict[str, int] = {
    MemoryType.EXPLICIT_INSTRUCTION: 0,
    MemoryType.CORRECTION: 1,
    MemoryType.CONFIRMED_PATTERN: 2,
    MemoryType.INFERRED_PATTERN: 3,
    MemoryType.SINGLE_INFERENCE: 4,
    MemoryType.TEMPORARY: 5,
}
UNKNOWN_RANK = 9
# What a correction corrects: learned patterns, never an explicit instruction (that is a plain
# opposite-polarity conflict, surfaced to the person).
PATTERN_TYPES = (
    MemoryType.CONFIRMED_PATTERN,
    MemoryType.INFERRED_PATTERN,
    MemoryType.SINGLE_INFERENCE,
)
REASONS = ("supersedes", "correction", "opposite_polarity")  # most specific first

# Words that flip a statement. An odd number of them makes it negative ("doesn't like" → -1).
NEGATIVE_WORDS = (
    r"never|no longer|not|no|don't|dont|do not|doesn't|doesnt|does not|didn't|did not|won't|"
    r"will not|can't|cannot|avoids?|avoiding|dislikes?|hates?|refuses?|stop|stops"
)
# Words that only assert (removed from the subject, never flip it).
POSITIVE_WORDS = (
    r"always|prefers?|preferring|likes?|loves?|wants?|enjoys?|do|does|please|must|should"
)
_NEGATIVE = rf"\b(?:{NEGATIVE_WORDS})\b"
_ANY_POLARITY = rf"\b(?:{NEGATIVE_WORDS}|{POSITIVE_WORDS})\b"


@dataclass(frozen=True)
class ConflictConfig:
    # Remainders ("morning meetings" vs "meetings in the morning" ≈ 0.95 with MiniLM) must be
    # near-identical: "book united" vs "book united flights" is only ≈ 0.64 and different topics
    # sit below 0.5. 0.85 keeps word-order and inflection variants, nothing broader.
    subject_similarity: float = 0.85
    # A correction rephrases what it corrects ("Don't use that tone with clients" vs "Uses a
    # casual tone with clients" ≈ 0.82 on the full text), so its subject bar is a little lower.
    correction_subject_similarity: float = 0.75
    # Same polarity and a full-text similarity at this level means the correction agrees with the
    # pattern (a reinforcement), not a conflict.
    agreement_similarity: float = 0.9
    # Opposite polarity conflicts only when the flip is the one difference: the subjects' words
    # (wording.FUNCTION_WORDS aside) overlap this much (Jaccard). Paraphrases embed above 0.85
    # ("I won't quit - your words motivate me" / "I won't quit, no matter what. Your
    # encouragement motivates me": overlap 0.4); all 18 LoCoMo dev pairs flagged without it were.
    subject_word_overlap: float = 0.8
    # Pairs this near a bar are compared in fp32, alike on every CPU (semantic/conflict_vectors.py).
    decision_margin: float = DECISION_MARGIN


def _clean(expr: pl.Expr) -> pl.Expr:
    return expr.fill_null("").str.to_lowercase().str.replace_all("[\u2019\u2018`]", "'")


def polarity(expr: pl.Expr) -> pl.Expr:
    """+1 or -1: -1 when the text holds an odd number of negating words (NOT_NEGATIONS aside)."""
    negations = _clean(expr).str.replace_all(NOT_NEGATIONS, " ").str.count_matches(_NEGATIVE)
    return pl.when(negations % 2 == 1).then(pl.lit(-1, pl.Int8)).otherwise(pl.lit(1, pl.Int8))


def subject(expr: pl.Expr) -> pl.Expr:
    """The text without its polarity words and punctuation: what the statement is about.

    Only the first clause counts: a correction often adds what to do instead ("does not like
    weekly reports; send a summary instead"), and that tail is not the subject being corrected.
    """
    return (
        _clean(expr)
        .str.split(";")
        .list.first()
        .str.replace_all(_ANY_POLARITY, " ")
        .str.replace_all(r"[^\w\s]", " ")
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
    )


def numbers(expr: pl.Expr) -> pl.Expr:
    """Digits in a subject, sorted: "before 9am" and "after 5pm" are never the same subject."""
    return expr.str.extract_all(r"\d+").list.sort().list.join(" ")


def with_subjects(statements: pl.DataFrame) -> pl.DataFrame:
    """Adds polarity, subject, the subject's numbers and the speaker (null without `metadata`)."""
    said = (
        speaker(pl.col("metadata")) if "metadata" in statements.columns else pl.lit(None, pl.String)
    )
    return statements.with_columns(
        polarity(pl.col("content")).alias("polarity"),
        subject(pl.col("content")).alias("subject"),
        said.alias("speaker"),
    ).with_columns(numbers(pl.col("subject")).alias("subject_numbers"))


def _rank(expr: pl.Expr) -> pl.Expr:
    return expr.replace_strict(SOURCE_RANK, default=UNKNOWN_RANK, return_dtype=pl.Int32)


def preferred(pairs: pl.DataFrame) -> pl.Expr:
    """The side the source hierarchy prefers; newer wins within a level (a is the older side).

    For a `supersedes` link the superseding side wins unless the superseded one ranks strictly
    higher: an inference may not silently replace an explicit instruction.
    """
    rank_a, rank_b = _rank(pl.col("memory_type_a")), _rank(pl.col("memory_type_b"))
    by_hierarchy = (
        pl.when(rank_a < rank_b).then(pl.col("memory_id_a")).otherwise(pl.col("memory_id_b"))
    )
    superseder_rank = (
        pl.when(pl.col("superseder") == pl.col("memory_id_a")).then(rank_a).otherwise(rank_b)
    )
    superseded_rank = (
        pl.when(pl.col("superseder") == pl.col("memory_id_a")).then(rank_b).otherwise(rank_a)
    )
    return (
        pl.when((pl.col("reason") == "supersedes") & (superseded_rank >= superseder_rank))
        .then(pl.col("superseder"))
        .otherwise(by_hierarchy)
    )


def _supersedes_pairs(statements: pl.DataFrame) -> pl.DataFrame:
    links = (
        statements.select("tenant_id", "contact_id", "event_id", "supersedes")
        .explode("supersedes")
        .drop_nulls("supersedes")
        .rename({"event_id": "superseder", "supersedes": "target"})
    )
    targets = statements.select("tenant_id", pl.col("event_id").alias("target"), "contact_id")
    # Same tenant and same contact only: a link to another person's memory is not a conflict.
    linked = links.join(targets, on=["tenant_id", "target", "contact_id"], nulls_equal=True)
    return linked.select(
        "tenant_id",
        "contact_id",
        pl.min_horizontal("superseder", "target").alias("id_1"),
        pl.max_horizontal("superseder", "target").alias("id_2"),
        pl.lit("supersedes").alias("reason"),
        "superseder",
        pl.lit(None, pl.Float32).alias("subject_similarity"),
    ).filter(pl.col("id_1") != pl.col("id_2"))


@dataclass(frozen=True)
class _Columns:
    """The columns `_group_pairs` reads, as numpy arrays over all crowded statements."""

    subject: np.ndarray
    content: np.ndarray
    numbers: np.ndarray
    polarity: np.ndarray
    is_correction: np.ndarray
    is_pattern: np.ndarray
    ts: np.ndarray
    nonempty: np.ndarray
    words: csr_matrix
    subject_vectors: np.ndarray | None
    content_vectors: np.ndarray | None

    @classmethod
    def of(cls, frame: pl.DataFrame, vectors: TextVectors | None) -> _Columns:
        return cls(
            subject=codes(frame["subject"]),
            content=codes(frame["content"].str.to_lowercase()),
            numbers=codes(frame["subject_numbers"]),
            polarity=frame["polarity"].to_numpy(),
            is_correction=(frame["memory_type"] == MemoryType.CORRECTION).to_numpy(),
            is_pattern=frame["memory_type"].is_in([str(t) for t in PATTERN_TYPES]).to_numpy(),
            ts=frame["ts"].to_physical().to_numpy(),
            nonempty=(frame["subject"].str.len_chars() > 0).to_numpy(),
            words=subject_words(frame["subject"]),
            subject_vectors=vectors.rows(frame["subject_hash"]) if vectors else None,
            content_vectors=vectors.rows(frame["text_hash"]) if vectors else None,
        )


def _group_pairs(
    c: _Columns, start: int, end: int, config: ConflictConfig, vectors: TextVectors | None
) -> list[tuple[np.ndarray, np.ndarray, str, np.ndarray]]:
    """Opposite-polarity and correction pairs (global i < j) among rows start..end (one contact)."""
    part = slice(start, end)
    equal_subject = c.subject[part, None] == c.subject[None, part]
    if vectors is not None and c.subject_vectors is not None and c.content_vectors is not None:
        sub = vectors.matrix[c.subject_vectors[part]]
        full = vectors.matrix[c.content_vectors[part]]
        subject_sim = np.where(equal_subject, 1.0, sub @ sub.T)
        full_sim = full @ full.T
    else:  # without vectors: exact equality
        subject_sim = equal_subject.astype(np.float32)
        full_sim = (c.content[part, None] == c.content[None, part]).astype(np.float32)
    opposite = c.polarity[part, None] != c.polarity[None, part]
    nonempty = c.nonempty[part]
    valid = (c.numbers[part, None] == c.numbers[None, part]) & nonempty[:, None] & nonempty[None, :]
    polarity_hit = valid & opposite & (subject_sim >= config.subject_similarity)
    i, j = np.nonzero(polarity_hit)
    reworded = word_overlap(c.words, i + start, j + start) < config.subject_word_overlap
    polarity_hit[i[reworded], j[reworded]] = False
    # i corrects j: i is a correction, j an older pattern on the same subject, not in agreement.
    agreeing = ~opposite & (full_sim >= config.agreement_similarity)
    correction_hit = (
        valid
        & c.is_correction[part, None]
        & c.is_pattern[None, part]
        & (c.ts[None, part] < c.ts[part, None])
        & (subject_sim >= config.correction_subject_similarity)
        & ~agreeing
    )
    correction_hit = correction_hit | correction_hit.T
    found = []
    for reason, hit in (("correction", correction_hit), ("opposite_polarity", polarity_hit)):
        i, j = np.nonzero(np.triu(hit, k=1))
        if len(i):
            found.append((i + start, j + start, reason, subject_sim[i, j].astype(np.float32)))
    return found


def _semantic_pairs(
    frame: pl.DataFrame, config: ConflictConfig, vectors: TextVectors | None
) -> pl.DataFrame:
    """Opposite-polarity and correction pairs inside each tenant × contact × speaker (id_1 < id_2):
    two people's statements never conflict (SPEC §4.4 round 3), whatever they say."""
    keys = ["tenant_id", "contact_id", "speaker"]
    crowded = frame.filter(pl.len().over(keys) > 1).sort(*keys, "event_id", nulls_last=True)
    columns = _Columns.of(crowded, vectors)
    found = [
        pairs
        for start, end in group_bounds(crowded, keys)
        for pairs in _group_pairs(columns, start, end, config, vectors)
    ]
    ids = crowded["event_id"]
    i = np.concatenate([f[0] for f in found]) if found else np.zeros(0, np.int64)
    j = np.concatenate([f[1] for f in found]) if found else np.zeros(0, np.int64)
    return pl.DataFrame(
        {
            "tenant_id": crowded["tenant_id"].gather(i),
            "contact_id": crowded["contact_id"].gather(i),
            "id_x": ids.gather(i),
            "id_y": ids.gather(j),
            "reason": pl.Series([r for f in found for r in [f[2]] * len(f[0])], dtype=pl.String),
            "subject_similarity": pl.Series(
                np.concatenate([f[3] for f in found]) if found else np.zeros(0, np.float32),
                dtype=pl.Float32,
            ),
        }
    ).select(
        "tenant_id",
        "contact_id",
        pl.min_horizontal("id_x", "id_y").alias("id_1"),
        pl.max_horizontal("id_x", "id_y").alias("id_2"),
        "reason",
        pl.lit(None, pl.String).alias("superseder"),
        "subject_similarity",
    )


def find_conflicts(
    statements: pl.DataFrame,
    config: ConflictConfig | None = None,
    vectors: TextVectors | None = None,
) -> pl.DataFrame:
    """All conflicting pairs (the memory_conflicts table), one row per pair with its most specific reason.

    `statements` has the MEMORY_SCHEMA columns; with `vectors`, it also has `text_hash` (the
    content's) and `subject_hash` (the `subject` of `with_subjects`'s, see `with_hashes`), and
    exact subject matching becomes similarity matching.
    """
    config = config or ConflictConfig()
    if statements.is_empty():
        return tables.empty("memory_conflicts")
    frame = statements if "subject" in statements.columns else with_subjects(statements)
    pairs = pl.concat([_supersedes_pairs(frame), _semantic_pairs(frame, config, vectors)])
    if pairs.is_empty():
        return tables.empty("memory_conflicts")
    reason_order = {r: i for i, r in enumerate(REASONS)}
    pairs = (
        pairs.with_columns(pl.col("reason").replace_strict(reason_order).alias("reason_order"))
        .sort("reason_order")
        .unique(["tenant_id", "id_1", "id_2"], keep="first", maintain_order=True)
    )
    side = frame.select("tenant_id", pl.col("event_id").alias("id"), "ts", "memory_type", "subject")
    both = pairs.join(
        side.rename({c: f"{c}_1" for c in ("id", "ts", "memory_type", "subject")}),
        on=["tenant_id", "id_1"],
    ).join(
        side.rename({c: f"{c}_2" for c in ("id", "ts", "memory_type", "subject")}),
        on=["tenant_id", "id_2"],
    )
    # a = the older side (then the smaller id), b = the newer one.
    first_older = (pl.col("ts_1") < pl.col("ts_2")) | (
        (pl.col("ts_1") == pl.col("ts_2")) & (pl.col("id_1") <= pl.col("id_2"))
    )
    ordered = both.select(
        "tenant_id",
        "contact_id",
        *[
            pl.when(first_older).then(pl.col(f"{c}_1")).otherwise(pl.col(f"{c}_2")).alias(f"{c}_a")
            for c in ("id", "memory_type", "subject")
        ],
        *[
            pl.when(first_older).then(pl.col(f"{c}_2")).otherwise(pl.col(f"{c}_1")).alias(f"{c}_b")
            for c in ("id", "memory_type", "subject")
        ],
        "reason",
        "superseder",
        "subject_similarity",
    ).rename({"id_a": "memory_id_a", "id_b": "memory_id_b"})
    result = ordered.with_columns(
        preferred(ordered).alias("preferred_id"),
        # The newer side's wording names the subject (for a link: the superseding side's).
        pl.when(pl.col("reason") == "supersedes")
        .then(
            pl.when(pl.col("superseder") == pl.col("memory_id_a"))
            .then(pl.col("subject_a"))
            .otherwise(pl.col("subject_b"))
        )
        .otherwise(pl.col("subject_b"))
        .alias("subject"),
    )
    return (
        result.select(tables.columns("memory_conflicts"))
        .cast(pl.Schema(tables.schema("memory_conflicts")))
        .sort("tenant_id", "contact_id", "memory_id_a", "memory_id_b", nulls_last=True)
    )


def reference_problems(conflicts: pl.DataFrame, statements: pl.DataFrame) -> pl.DataFrame:
    """Conflict rows whose two memories are not both statements of that tenant and contact."""
    known = statements.select("tenant_id", "contact_id", pl.col("event_id").alias("memory_id"))
    ok = conflicts.join(
        known.rename({"memory_id": "memory_id_a"}),
        on=["tenant_id", "contact_id", "memory_id_a"],
        how="semi",
        nulls_equal=True,
    ).join(
        known.rename({"memory_id": "memory_id_b"}),
        on=["tenant_id", "contact_id", "memory_id_b"],
        how="semi",
        nulls_equal=True,
    )
    bad_preferred = ok.filter(
        (pl.col("preferred_id") != pl.col("memory_id_a"))
        & (pl.col("preferred_id") != pl.col("memory_id_b"))
    )
    return pl.concat(
        [
            conflicts.join(
                ok, on=["tenant_id", "memory_id_a", "memory_id_b"], how="anti", nulls_equal=True
            ),
            bad_preferred,
        ]
    )


def subject_texts(statements: pl.DataFrame) -> pl.DataFrame:
    """tenant_id, memory_id, text, text_hash of each statement's subject (for the embedding cache).

    A statement without polarity words has its own text as subject: same hash, no new embedding.
    """
    frame = with_subjects(statements).select(
        "tenant_id",
        pl.col("event_id").alias("memory_id"),
        normalise_text(pl.col("subject")).alias("text"),
    )
    return frame.with_columns(text_hashes(frame["text"]))


def with_hashes(
    statements: pl.DataFrame, embeddings: pl.DataFrame, subject_hashes: pl.DataFrame
) -> pl.DataFrame:
    """Statements + subjects + `text_hash` (content) + `subject_hash`, for find_conflicts(vectors=…)."""
    keys = ["tenant_id", "event_id"]
    content = embeddings.select("tenant_id", pl.col("memory_id").alias("event_id"), "text_hash")
    subjects = subject_hashes.select(
        "tenant_id",
        pl.col("memory_id").alias("event_id"),
        pl.col("text_hash").alias("subject_hash"),
    )
    return with_subjects(statements).join(content, on=keys).join(subjects, on=keys)
