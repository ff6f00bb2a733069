"""The usage stage (SPEC §4.9): what the pack put into calls, and whether it helped."""

from pipeline.usage.actions import boosts, demoted
from pipeline.usage.effects import (
    USAGE_CONFIG,
    UsageConfig,
    calls,
    known_items,
    pack_uplift,
    pack_usage,
)

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
