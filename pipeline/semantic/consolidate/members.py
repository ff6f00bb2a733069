"""What is consolidated: the knobs, the output schemas, and the statements and interactions that
are members of a cluster (with the text each is embedded by)."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from pipeline import tables
from pipeline.ingest.memory_types import BASE_CONFIDENCE, CONFIDENCE_CAP, REINFORCEMENT_STEP
from pipeline.semantic.conflicts import SOURCE_RANK, UNKNOWN_RANK, numbers, polarity, subject
from pipeline.semantic.consolidate.clustering import MAX_BLOCK
from pipeline.semantic.embed import DECISION_MARGIN
from pipeline.semantic.wording import speaker

SUMMARY_SCHEMA = tables.schema("consolidated_summaries")


REINFORCEMENT_SCHEMA = tables.schema("memory_reinforcement")


@dataclass(frozen=True)
class ConsolidationConfig:
    # Statements merge by complete linkage on cosine distance: a cluster is kept only if EVERY pair
    # of its members is within the threshold, so a chain of "a bit similar" memories never merges
    # (single linkage would). Calibrated on paraphrases judged by people, not on the generator's own
    # phrasings (`python -m bench.run --only paraphrase`, rule in pipeline/semantic/calibration.py):
    # 480 STS-B sentence pairs (score ≥ 4 of 5 = same meaning). A wrong merge hides a fact behind
    # another, a missed one leaves a repeat that search still finds, so on the dev half the
    # threshold on a 0.05 grid whose precision (with the cannot-link rules) has the highest lower
    # 95 % bound among those merging ≥ 60 % of the paraphrases: 0.15. Held out (test half):
    # precision 0.948 [0.874, 0.980], recall 0.608 [0.519, 0.691] (within a pair or two on other
    # CPUs). No distance separates "same fact, other words" from "same words, other fact" ("X
    # prefers meetings in the afternoon" / "X prefers morning meetings" 0.07; natural rewordings of
    # one preference 0.09-0.30): `value_guard` keeps the second apart, the first stays unmerged.
    statement_distance: float = 0.15
    # The int8 encoder's distances move with the CPU's integer kernels (against fp32: median
    # 0.005, at most 0.028 on the STS-B sample, with and without AVX-512): statements in a pair
    # that could merge with its cosine raised by this (the distance rule: within
    # `statement_distance` + this) are clustered on fp32 vectors, so a pack merges alike on every
    # CPU (pipeline/semantic/embed/exact.py); requests likewise at `interaction_distance` + this.
    # 0 turns it off for both.
    decision_margin: float = DECISION_MARGIN
    # One subject with another value never merges (pipeline/semantic/values.py: numbers, days,
    # months, times of day, periods, channels, opposites, places): "prefers afternoon meetings" /
    # "prefers morning meetings" is a conflict candidate (SPEC §4.4), not a repeat. It only removes
    # merges.
    value_guard: bool = True
    # Statements merge by a judgement learned from people's labels (pipeline/semantic/judgement.py,
    # the value guard always inside): the embedding proposes the pairs within `candidate_distance`,
    # a logistic regression on the encoder's cosine, the words the two share and the values each
    # names (trained on 2,991 STS Benchmark pairs people scored, one sentence a side) decides at
    # P(same) ≥ `merge_probability`. A pair with more than one sentence on a side (a chat turn)
    # merges by the distance rule at `statement_distance` instead: the judgement never learned
    # that one more fact makes two statements. Held-out STS-B sample: precision 0.909 / recall
    # 0.75 (the rule: 0.925 / 0.617); LoCoMo's conversations, redacted as a night embeds them: 39
    # cluster pairs, 1 of two different facts, as the rule (bench/README.md "merges"). False: the
    # distance rule with `value_guard` for every pair.
    statement_judgement: bool = True
    # 1 of the 768 train pairs people called the same meaning sits farther apart (11 beyond 0.4).
    candidate_distance: float = 0.5
    # Merge when P(same) ≥ this at even odds: a wrong merge is taken to cost twice a missed one.
    merge_probability: float = 2 / 3
    # Interaction inputs are many per system × kind and topically close (every request is about
    # orders or passwords), so only near-identical requests merge: re-worded repeats score
    # 0.94–0.96 ("Where is my order?" / "Where's my order?"), different requests ≤ 0.3. The same
    # rule on the STS-B pairs as requests (no cannot-link rules) picks 0.15: held out, precision
    # 0.930 [0.856, 0.968], recall 0.667.
    interaction_distance: float = 0.15
    # Complete linkage needs the dense n × n distance matrix (O(n²) memory/time). Groups are first
    # cut into connected components of the radius graph at the same threshold — complete-linkage
    # clusters never cross them, so this is exact — and a component larger than this is clustered
    # in blocks of this size along its first principal axis (can split a near-duplicate pair
    # across blocks, never merges an unrelated one).
    max_block: int = MAX_BLOCK
    # §4.2: base confidence per type when a statement carries none, and the type caps.
    base_confidence: dict[str, float] = field(default_factory=lambda: dict(BASE_CONFIDENCE))
    confidence_cap: dict[str, float] = field(default_factory=lambda: dict(CONFIDENCE_CAP))
    # §4.2: interactions' confidence is their importance, or this.
    interaction_default_confidence: float = 0.5

    @property
    def reinforcement_step(self) -> float:
        """§4.2: each repeat adds this (capped at the type cap): decay's knob, a merged repeat is
        a repeat."""
        return REINFORCEMENT_STEP


def statement_members(
    statements: pl.DataFrame, embeddings: pl.DataFrame, config: ConsolidationConfig
) -> pl.DataFrame:
    rank = pl.col("memory_type").replace_strict(
        SOURCE_RANK, default=UNKNOWN_RANK, return_dtype=pl.Int32
    )
    base = pl.col("memory_type").replace_strict(
        config.base_confidence, default=0.5, return_dtype=pl.Float64
    )
    return statements.select(
        "tenant_id",
        pl.col("event_id").alias("memory_id"),
        "contact_id",
        pl.lit(None, pl.String).alias("system"),
        pl.lit(None, pl.String).alias("kind"),
        "memory_type",
        pl.col("content").alias("text"),
        "ts",
        pl.col("confidence").fill_null(base).alias("confidence"),
        pl.col("tags"),
        rank.alias("priority"),
        polarity(pl.col("content")).alias("polarity"),
        numbers(subject(pl.col("content"))).alias("subject_numbers"),
        speaker(pl.col("metadata")).alias("speaker"),
    ).join(
        embeddings.select("tenant_id", "memory_id", "text_hash"),
        on=["tenant_id", "memory_id"],
        how="inner",
    )


def interaction_members(
    interactions: pl.DataFrame, embeddings: pl.DataFrame, config: ConsolidationConfig
) -> pl.DataFrame:
    return interactions.select(
        "tenant_id",
        pl.col("event_id").alias("memory_id"),
        "contact_id",
        "system",
        "kind",
        pl.lit("interaction").alias("memory_type"),
        pl.col("input").alias("text"),
        "ts",
        pl.col("importance").fill_null(config.interaction_default_confidence).alias("confidence"),
        pl.col("tags"),
        pl.lit(0, pl.Int32).alias("priority"),
    ).join(
        embeddings.select("tenant_id", "memory_id", "text_hash"),
        on=["tenant_id", "memory_id"],
        how="inner",
    )


STATEMENT_KEYS = ["tenant_id", "contact_id"]


INTERACTION_KEYS = ["tenant_id", "system", "kind"]
