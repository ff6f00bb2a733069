"""The usage stage's tables (SPEC §4.9): what the pack put into calls, and whether it helped."""

from __future__ import annotations

from pipeline.tables.declaration import _F, _I, _S, Table

_INTERVAL = "95 % interval"

TABLES: tuple[Table, ...] = (
    Table(
        "pack_usage",
        "Per pack item × skill, from the calls' receipts: uses, the outcomes of the calls that "
        "used it, and its effect against comparable calls without it (shrunk toward 0).",
        {
            "tenant_id": _S,
            "item_id": _S,
            "item_kind": _S,
            "skill_id": _S,
            "uses": _I,
            "n_outcomes": _I,
            "mean_outcome": _F,
            "positive_calls": _I,
            "pack_versions": _I,
            "n_compared": _I,
            "raw_effect": _F,
            "tau2": _F,
            "effect": _F,
            "effect_lower": _F,
            "effect_upper": _F,
            "verdict": _S,
        },
        ("tenant_id", "item_id", "skill_id"),
        asset="pack_usage",
        descriptions={
            "item_id": "a memory id (few-shot example or memory) or <skill>@<template version>",
            "item_kind": "interaction, statement, template, or unknown (the tenant has no such id)",
            "skill_id": "the calls' skill ('' when they named none)",
            "uses": "pack calls whose receipt names the item (holdout calls use nothing)",
            "n_outcomes": "of those, calls with feedback: their quality_score is the outcome",
            "mean_outcome": "mean quality_score of the calls that used it",
            "positive_calls": "calls that used it with a positive quality_score",
            "n_compared": "scored calls of the same skill and pack version without it",
            "raw_effect": "stratified difference in mean outcome, with minus without",
            "tau2": "the skill's prior variance of item effects (empirical Bayes)",
            "effect": "raw_effect shrunk toward 0 by tau2 / (tau2 + its variance)",
            "effect_lower": f"lower end of the effect's {_INTERVAL}",
            "effect_upper": f"upper end of the effect's {_INTERVAL}",
            "verdict": "harmful (interval below 0), helpful (above 0) or unclear",
        },
    ),
    Table(
        "pack_uplift",
        "Per pack version × skill: mean outcome of calls that used the pack minus holdout calls.",
        {
            "tenant_id": _S,
            "pack_version": _S,
            "skill_id": _S,
            "n_pack_calls": _I,
            "n_holdout_calls": _I,
            "n_pack_scored": _I,
            "n_holdout_scored": _I,
            "pack_mean": _F,
            "holdout_mean": _F,
            "uplift": _F,
            "uplift_lower": _F,
            "uplift_upper": _F,
        },
        ("tenant_id", "pack_version", "skill_id"),
        asset="pack_uplift",
        descriptions={
            "n_pack_scored": "pack calls with feedback (the outcome is their quality_score)",
            "n_holdout_scored": "holdout calls with feedback",
            "uplift": "pack_mean − holdout_mean (null without scored calls on both sides)",
            "uplift_lower": f"lower end of the uplift's {_INTERVAL} (below 0: the pack is hurting)",
            "uplift_upper": f"upper end of the uplift's {_INTERVAL}",
        },
    ),
)
