"""Consolidation (SPEC §4.4): near-duplicate memories → one summary per cluster, and reinforcement.

Read in data order: members (what is clustered), clusters (grouping, summaries, reinforcement),
run (one night, incremental)."""

from pipeline.semantic.consolidate.clusters import (
    centroid_similarity,
    label_groups,
    reinforcement,
    summarise,
)
from pipeline.semantic.consolidate.members import (
    INTERACTION_KEYS,
    REINFORCEMENT_SCHEMA,
    STATEMENT_KEYS,
    SUMMARY_SCHEMA,
    ConsolidationConfig,
    interaction_members,
    statement_members,
)
from pipeline.semantic.consolidate.run import Consolidation, consolidate, membership_problems

__all__ = [
    "INTERACTION_KEYS",
    "REINFORCEMENT_SCHEMA",
    "STATEMENT_KEYS",
    "SUMMARY_SCHEMA",
    "Consolidation",
    "ConsolidationConfig",
    "centroid_similarity",
    "consolidate",
    "interaction_members",
    "label_groups",
    "membership_problems",
    "reinforcement",
    "statement_members",
    "summarise",
]
