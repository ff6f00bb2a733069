"""Preference pairs (SPEC §4.6): (prompt, chosen, rejected) mined from corrections, regenerations,
near-identical prompts and ranked siblings, deduplicated, with a train/eval split grouped by prompt.

Read in data order: table (schema and knobs), sources (one request's evidence, and the texts a
pair names), same_prompt (across near-identical prompts), finalize (texts, dedupe, split, check)."""

from pipeline.preference.pairs.finalize import (
    assign_split,
    finalize_pairs,
    format_problems,
    mine_pairs,
    split_leakage,
)
from pipeline.preference.pairs.same_prompt import PROMPT_KEYS, prompt_texts, same_prompt_pairs
from pipeline.preference.pairs.sources import (
    PairTexts,
    correction_pairs,
    ranked_pairs,
    regenerate_pairs,
)
from pipeline.preference.pairs.table import (
    INTERACTION_COLUMNS,
    MINED_COLUMNS,
    PAIR_SCHEMA,
    SCORE_SCHEMA,
    SOURCE_PRIORITY,
    SPLITS,
    PairConfig,
    PairSource,
    normalized_prompt,
    sha256_hex,
)

__all__ = [
    "INTERACTION_COLUMNS",
    "MINED_COLUMNS",
    "PAIR_SCHEMA",
    "PROMPT_KEYS",
    "SCORE_SCHEMA",
    "SOURCE_PRIORITY",
    "SPLITS",
    "PairConfig",
    "PairSource",
    "PairTexts",
    "assign_split",
    "correction_pairs",
    "finalize_pairs",
    "format_problems",
    "mine_pairs",
    "normalized_prompt",
    "prompt_texts",
    "ranked_pairs",
    "regenerate_pairs",
    "same_prompt_pairs",
    "sha256_hex",
    "split_leakage",
]
