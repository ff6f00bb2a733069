"""Every table of the lake, declared once with the comment the warehouse, the analyst snapshot
and the Dagster catalog show for it, in the order data flows (ingest → … → publish).

The first step of the table registry (issue 15): schemas still live beside the rules that make
each table; the comment of a table lives only here.
"""

from __future__ import annotations

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
    "dpo_runs": "DPO policy outcomes per tenant: status, eval accuracy with its 95 % interval "
    "beside the reference model's and the length rule's, verdict, margin, loss, steps; a night "
    "that reuses the recorded policy adds no row.",
    "policy_withdrawals": "DPO policies withdrawn because an erased person's data trained them.",
    "template_history": "Every prompt template version per tenant × skill, with its DPO score and "
    "evidence; is_current marks the live one.",
    # erasure (memorypack forget, erasure events)
    "tombstones": "Erased people and their event ids, as keyed hashes only: ingest keeps them out.",
    # publish
    "pack_versions": "Every kept memory pack version per tenant; is_latest marks the live one.",
}
