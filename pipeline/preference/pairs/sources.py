"""Pairs from one request's own evidence: a correction beats the output it corrects, a better rated
regeneration beats the original, and ranked siblings by their rank.

A source names a pair's texts by the events that hold them (`pair_refs`); `PairTexts` looks the
texts up. A tenant's pairs outnumber its interactions, so the texts are copied only into the pairs
that are kept (pipeline.preference.pairs.finalize)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from pipeline.ingest.contracts import Signal
from pipeline.preference.pairs.table import PairConfig, PairSource
from pipeline.tables import LOAD_DATE


def corrections(feedback: pl.DataFrame) -> pl.DataFrame:
    """The corrections that carry a corrected output."""
    return feedback.filter(
        (pl.col("signal") == Signal.CORRECTION) & pl.col("corrected_output").is_not_null()
    )


@dataclass(frozen=True)
class PairTexts:
    """The texts pairs are made of, stripped, by (tenant_id, event_id): prompts (an interaction's
    input) and answers (an interaction's output, a correction's corrected output; event ids are
    unique across both), each answer with its event's load date."""

    prompts: pl.DataFrame
    answers: pl.DataFrame

    @classmethod
    def of(cls, interactions: pl.DataFrame, feedback: pl.DataFrame | None = None) -> PairTexts:
        def texts(frame: pl.DataFrame, column: str, dated: bool = True) -> pl.DataFrame:
            # A frame made by hand (a test, an import) may come without load dates.
            loaded = pl.col(LOAD_DATE) if LOAD_DATE in frame.columns else pl.lit(None, pl.Date)
            return frame.select(
                "tenant_id",
                "event_id",
                pl.col(column).str.strip_chars().alias("text"),
                *([loaded.alias(LOAD_DATE)] if dated else []),
            )

        answers = [texts(interactions, "output")]
        if feedback is not None:
            answers.append(texts(corrections(feedback), "corrected_output"))
        return cls(texts(interactions, "input", dated=False), pl.concat(answers))

    def attach(self, refs: pl.DataFrame) -> pl.DataFrame:
        """`refs` (`pair_refs`) with their prompt, chosen and rejected texts, in their order, and
        the load date of the newer of the two answers' events (the prompt is one of theirs)."""
        for column, ref, lookup in (
            ("prompt", "prompt_id", self.prompts),
            ("chosen", "chosen_id", self.answers),
            ("rejected", "rejected_id", self.answers),
        ):
            refs = refs.join(
                lookup.rename(
                    {"event_id": ref, "text": column, LOAD_DATE: f"_{column}_loaded"}, strict=False
                ),
                on=["tenant_id", ref],
                how="left",
                validate="m:1",
                maintain_order="left",
            )
        newer = pl.max_horizontal("_chosen_loaded", "_rejected_loaded").alias(LOAD_DATE)
        return refs.with_columns(newer).drop("_chosen_loaded", "_rejected_loaded")


def pair_refs(source: PairSource, margin: pl.Expr, prompt_id: str) -> list[pl.Expr]:
    """The columns of a mined pair: tenant_id, source, margin, skill_id, and the events that hold
    its texts: the prompt is prompt_id's input, the chosen text chosen_id's output (a correction's
    corrected output), the rejected text rejected_id's output."""
    return [
        pl.col("tenant_id"),
        pl.lit(source.value).alias("source"),
        margin.cast(pl.Float64).alias("margin"),
        pl.col("skill_id"),
        pl.col(prompt_id).alias("prompt_id"),
        pl.col("chosen_id"),
        pl.col("rejected_id"),
    ]


def correction_pairs(
    interactions: pl.DataFrame, feedback: pl.DataFrame, config: PairConfig | None = None
) -> pl.DataFrame:
    """A correction's corrected output ≻ the original output, for the original's prompt."""
    config = config or PairConfig()
    fixes = corrections(feedback).select(
        "tenant_id", pl.col("target_id").alias("rejected_id"), pl.col("event_id").alias("chosen_id")
    )
    return (
        interactions.select("tenant_id", pl.col("event_id").alias("rejected_id"), "skill_id")
        .join(fixes, on=["tenant_id", "rejected_id"], how="inner")
        .select(pair_refs(PairSource.CORRECTION, pl.lit(config.correction_margin), "rejected_id"))
    )


def _with_scores(
    frame: pl.DataFrame, scores: pl.DataFrame, id_col: str, prefix: str
) -> pl.DataFrame:
    cols = scores.select(
        "tenant_id",
        pl.col("memory_id").alias(id_col),
        *(pl.col(c).alias(f"{prefix}{c}") for c in ("quality_score", "n_positive", "n_negative")),
    )
    return frame.join(cols, on=["tenant_id", id_col], how="left")


def regenerate_pairs(
    interactions: pl.DataFrame, scores: pl.DataFrame, config: PairConfig | None = None
) -> pl.DataFrame:
    """B regenerates A (`B.parent_event_id = A`) and B was rated positively: B.output ≻ A.output,
    for A's prompt."""
    config = config or PairConfig()
    children = interactions.filter(pl.col("parent_event_id").is_not_null()).select(
        "tenant_id",
        pl.col("event_id").alias("chosen_id"),
        pl.col("parent_event_id").alias("rejected_id"),
    )
    parents = interactions.select("tenant_id", pl.col("event_id").alias("rejected_id"), "skill_id")
    joined = children.join(parents, on=["tenant_id", "rejected_id"], how="inner")
    joined = _with_scores(joined, scores, "chosen_id", "c_")
    joined = _with_scores(joined, scores, "rejected_id", "r_")
    chosen_q = pl.col("c_quality_score").fill_null(0.0)
    rejected_q = pl.col("r_quality_score").fill_null(0.0)
    positive = (chosen_q > config.regenerate_min_quality) | (
        pl.col("c_n_positive").fill_null(0) > pl.col("c_n_negative").fill_null(0)
    )
    return joined.filter(positive & (chosen_q > rejected_q)).select(
        pair_refs(PairSource.REGENERATE, chosen_q - rejected_q, "rejected_id")
    )


def ranked_pairs(interactions: pl.DataFrame, config: PairConfig | None = None) -> pl.DataFrame:
    """Imported siblings (same `metadata.parent_id`) with a human `metadata.rank`: lower rank ≻
    higher, for the chosen one's prompt."""
    ranked = (
        interactions.select(
            "tenant_id",
            "event_id",
            "skill_id",
            pl.col("metadata")
            .str.json_path_match("$.rank")
            .cast(pl.Int64, strict=False)
            .alias("rank"),
            pl.col("metadata").str.json_path_match("$.parent_id").alias("parent_id"),
        )
        .filter(pl.col("rank").is_not_null() & pl.col("parent_id").is_not_null())
        .with_columns(pl.len().over("tenant_id", "parent_id").alias("n_siblings"))
        .filter(pl.col("n_siblings") > 1)
    )
    left = ranked.select(
        "tenant_id",
        "parent_id",
        "n_siblings",
        "skill_id",
        pl.col("event_id").alias("chosen_id"),
        pl.col("rank").alias("chosen_rank"),
    )
    right = ranked.select(
        "tenant_id",
        "parent_id",
        pl.col("event_id").alias("rejected_id"),
        pl.col("rank").alias("rejected_rank"),
    )
    margin = (pl.col("rejected_rank") - pl.col("chosen_rank")) / (pl.col("n_siblings") - 1)
    return (
        left.join(right, on=["tenant_id", "parent_id"], how="inner")
        .filter(pl.col("chosen_rank") < pl.col("rejected_rank"))
        .select(pair_refs(PairSource.RANKED, margin, "chosen_id"))
    )
