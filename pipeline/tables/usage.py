"""The usage stage's tables (SPEC §4.9): what the pack put into calls, and whether it helped."""

from __future__ import annotations

from pipeline.tables.declaration import FLOAT, INT, STR, Table

_INTERVAL = "95 % interval"

TABLES: tuple[Table, ...] = (
    Table(
        "pack_usage",
        "Per pack item × skill, from the calls' receipts: uses, the outcomes of the calls that "
        "used it, and the item's effect, estimated with every other item of the tenant's "
        "receipts in one model (shrunk toward 0).",
        {
            "tenant_id": STR,
            "item_id": STR,
            "item_kind": STR,
            "skill_id": STR,
            "uses": INT,
            "n_outcomes": INT,
            "mean_outcome": FLOAT,
            "positive_calls": INT,
            "pack_versions": INT,
            "n_compared": INT,
            "raw_effect": FLOAT,
            "tau2": FLOAT,
            "effect": FLOAT,
            "effect_lower": FLOAT,
            "effect_upper": FLOAT,
            "verdict": STR,
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
            "n_compared": "scored calls of the same skill and pack versions without it (0: no "
            "effect)",
            "raw_effect": "stratified difference in mean outcome, with minus without: the item "
            "and what its presence pushed out of the prompt, together",
            "tau2": "the tenant's prior variance of item effects (empirical Bayes)",
            "effect": "the item's own effect over every skill it served: one ridge regression of "
            "the outcome on all items, with skill × pack-version levels (pipeline/usage/joint.py)",
            "effect_lower": f"lower end of the effect's {_INTERVAL}",
            "effect_upper": f"upper end of the effect's {_INTERVAL}",
            "verdict": "harmful (interval below 0), helpful (above 0) or unclear",
            "pack_versions": "pack versions whose receipts name the item",
        },
    ),
    Table(
        "pack_uplift",
        "Per pack version × skill: mean outcome of calls that used the pack minus holdout calls.",
        {
            "tenant_id": STR,
            "pack_version": STR,
            "skill_id": STR,
            "n_pack_calls": INT,
            "n_holdout_calls": INT,
            "n_pack_scored": INT,
            "n_holdout_scored": INT,
            "pack_mean": FLOAT,
            "holdout_mean": FLOAT,
            "uplift": FLOAT,
            "uplift_lower": FLOAT,
            "uplift_upper": FLOAT,
        },
        ("tenant_id", "pack_version", "skill_id"),
        asset="pack_uplift",
        descriptions={
            "n_pack_calls": "calls whose receipt names this pack version and used its content",
            "n_holdout_calls": "holdout calls of this pack version (no pack content: the control)",
            "pack_mean": "mean outcome (quality_score, −1 to 1) of the scored pack calls",
            "holdout_mean": "mean outcome (quality_score, −1 to 1) of the scored holdout calls",
            "n_pack_scored": "pack calls with feedback (the outcome is their quality_score)",
            "n_holdout_scored": "holdout calls with feedback",
            "uplift": "pack_mean − holdout_mean, −2 to 2 (null without scored calls on both sides)",
            "uplift_lower": f"lower end of the uplift's {_INTERVAL} (below 0: the pack is hurting)",
            "uplift_upper": f"upper end of the uplift's {_INTERVAL}",
        },
    ),
)
