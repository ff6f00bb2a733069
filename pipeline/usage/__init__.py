"""The usage stage (SPEC §4.9): what the pack put into calls, and whether it helped.

Modules in data order: config (the constants) → marginal (with-versus-without differences, the
joint model's prior) → joint (every item of a skill in one model) → effects (calls, pack_usage,
pack_uplift) → actions (demote the harmful, boost the helpful)."""

from pipeline.usage.actions import boosts, demoted
from pipeline.usage.config import USAGE_CONFIG, UsageConfig
from pipeline.usage.effects import calls, known_items, pack_uplift, pack_usage

__all__ = [
    "USAGE_CONFIG",
    "UsageConfig",
    "boosts",
    "calls",
    "demoted",
    "known_items",
    "pack_uplift",
    "pack_usage",
]
