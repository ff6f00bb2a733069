"""Every table of the lake, declared once with the comment the warehouse, the analyst snapshot
and the Dagster catalog show for it, in the order data flows (ingest → … → publish).

The first step of the table registry (issue 15): schemas still live beside the rules that make
each table; the comment of a table lives only here. Every table an asset writes is an asset of
the same name (ingest's `events` is the asset `raw_events`), so the lineage the catalog shows is
the one the code reads and writes.
"""

from __future__ import annotations

from functools import cache

import polars as pl

COMMENTS: dict[str, str] = {
    # ingest
    "events": "Every accepted event, one row per (tenant_id, event_id), partitioned by load_date.",
    "quarantine": "Rejected raw lines with file, line number, load date and machine-readable reason.",
    "ingest_stats": "Per load date: files, lines read, accepted, duplicates, quarantined.",
    "interactions": "AI calls: what was asked (input), what it answered (output); one memory each.",
    "feedback": "Signals about interactions and memories (votes, corrections, validations).",
    "memory_statements": "Statements learned about a person: instructions, patterns, inferences.",
    # feedback
    "feedback_scores": "Per memory: votes per signal, smoothed quality_score, Wilson quality_lower "
    "(rank by it), reputation.",
    # semantic
    "memory_embeddings": "Which vector each memory has: its text_hash in the embedding cache, and "
    "the model.",
    "memory_conflicts": "Pairs of memories that cannot both be true; both stay, preferred_id by the "
    "source hierarchy.",
    "consolidated_summaries": "One row per cluster of near-duplicate memories: representative text, "
    "members, counts.",
    "memory_reinforcement": "Per statement: other non-conflicting members of its cluster (repeats) "
    "and the latest.",
    "conflict_groups": "Fingerprint of each contact's statements when memory_conflicts last looked "
    "at them: unchanged contacts keep their rows.",
    "consolidation_groups": "Fingerprint of each statement group when it was last clustered: "
    "unchanged groups keep their clusters.",
    # memory
    "decay_snapshots": "Point-in-time confidence, status and flags of every memory, one partition "
    "per day (as_of = next 00:00 UTC).",
    "memory_audit": "Monthly review findings of the latest snapshot: re-check, stale patterns, "
    "archive summary, conflicts, promotions.",
    "promotion_candidates": "Inferred patterns that could become confirmed ones: listed for a "
    "person to confirm, never applied.",
    # examples
    "skill_stats": "Per tenant × user × skill: usage, votes, positive share, EMA confidence "
    "(rate 0.1), mean reward.",
    "user_preferences": "Per tenant × user: preference vector in the skill-vector space, moved by "
    "votes (rate 0.1), unit length.",
    "skill_vectors": "Per tenant × skill: mean embedding of its interactions (one-hot when no "
    "embeddings), unit length.",
    "few_shot_sets": "Few-shot examples per tenant × system × kind × skill, ranked, with why.",
    # preference
    "preference_pairs": "(prompt, chosen, rejected) pairs for DPO with source, margin and split.",
    "prompt_index": "Distinct prompts per tenant × skill already searched for near-identical ones.",
    "prompt_neighbors": "Near-identical prompt pairs per tenant × skill, with their similarity.",
    "dpo_runs": "DPO policy outcomes per tenant: status, eval accuracy with its 95 % interval "
    "beside the reference model's and the length rule's, verdict, margin, loss, steps; a night "
    "that reuses the recorded policy adds no row.",
    "policy_withdrawals": "DPO policies withdrawn because an erased person's data trained them.",
    "template_history": "Every prompt template version per tenant × skill, with its DPO score and "
    "evidence; is_current marks the live one.",
    "template_scores": "Memo of candidate template scores under a policy and eval sample: a night "
    "scores only what it has not scored.",
    # erasure (memorypack forget, erasure events)
    "tombstones": "Erased people and their event ids, as keyed hashes only: ingest keeps them out.",
    # publish
    "pack_versions": "Every kept memory pack version per tenant; is_latest marks the live one.",
}

# The one lake table whose asset has another name: ingest's events are the asset raw_events.
ASSET_OF_TABLE: dict[str, str] = {"events": "raw_events"}

# Lake-only bookkeeping of incremental nights: assets (the graph shows who writes and reads
# them), never loaded into the warehouse or the analyst snapshot.
BOOKKEEPING: tuple[str, ...] = (
    "conflict_groups",
    "consolidation_groups",
    "prompt_index",
    "prompt_neighbors",
    "template_scores",
)


def asset_name(table: str) -> str:
    """The asset whose materialization writes lake table `table`."""
    return ASSET_OF_TABLE.get(table, table)


def table_name(asset: str) -> str:
    """The lake table asset `asset` writes (its own name but for raw_events)."""
    return {a: t for t, a in ASSET_OF_TABLE.items()}.get(asset, asset)


@cache
def declared_schemas() -> dict[str, dict[str, pl.DataType]]:
    """The columns of every table whose schema dict already exists beside the rule that makes it
    (what the catalog shows before, or without, a materialization that carries a frame). Imported
    here, not at the top: those modules import this one for the comments."""
    from pipeline import contracts
    from pipeline.conflicts import CONFLICT_SCHEMA
    from pipeline.consolidate.members import REINFORCEMENT_SCHEMA, SUMMARY_SCHEMA
    from pipeline.dpo import DPO_RUNS_HISTORY_SCHEMA
    from pipeline.fewshot import FEW_SHOT_SCHEMA
    from pipeline.neighbors import edge_schema, index_schema
    from pipeline.pairs import PAIR_SCHEMA, PROMPT_KEYS
    from pipeline.templates import TEMPLATE_HISTORY_SCHEMA, TEMPLATE_SCORE_SCHEMA

    return {
        "events": contracts.EVENT_SCHEMA,
        "quarantine": contracts.QUARANTINE_SCHEMA,
        "consolidated_summaries": SUMMARY_SCHEMA,
        "memory_reinforcement": REINFORCEMENT_SCHEMA,
        "memory_conflicts": CONFLICT_SCHEMA,
        "few_shot_sets": FEW_SHOT_SCHEMA,
        "preference_pairs": PAIR_SCHEMA,
        "prompt_index": index_schema(PROMPT_KEYS),
        "prompt_neighbors": edge_schema(PROMPT_KEYS),
        "dpo_runs": DPO_RUNS_HISTORY_SCHEMA,
        "template_history": TEMPLATE_HISTORY_SCHEMA,
        "template_scores": TEMPLATE_SCORE_SCHEMA,
    }
