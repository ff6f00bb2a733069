"""What the Dagster catalog shows about every asset, declared in one place: owner, kinds (the
engines it runs on, shown as icons) and a code version derived from the asset's own code.

A code version changes when the function that computes the asset changes, so the UI marks the
asset (and what depends on it) as built by older code until it is materialized again.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Sequence

import dagster as dg

OWNER = "team:memorypack"
# Every asset reads and writes the Parquet lake with polars and mirrors it into the DuckDB
# warehouse; some run a model too.
LAKE_KINDS = frozenset({"polars", "parquet", "duckdb"})
EXTRA_KINDS: dict[str, frozenset[str]] = {
    "memory_embeddings": frozenset({"onnx", "huggingface"}),  # sentence-transformers, exported
    "memory_conflicts": frozenset({"onnx"}),  # embeds the statements' subjects
    "dpo_policy": frozenset({"pytorch", "huggingface"}),  # TRL (a tenant's first policy)
    "policy_training": frozenset({"pytorch", "huggingface"}),  # TRL
    "refined_templates": frozenset({"pytorch"}),  # scores templates with the DPO policy
}
OWN_KINDS: dict[str, frozenset[str]] = {
    "analytics_snapshot": frozenset({"duckdb"}),  # DuckDB only: views and copies of the lake
    "analytics_part": frozenset({"duckdb", "spacy"}),  # the tenant's rows redacted (spaCy NER)
}


def code_version(assets_def: dg.AssetsDefinition) -> str:
    """The first 12 hex of the sha256 of the asset function's source."""
    source = inspect.getsource(assets_def.op.compute_fn.decorated_fn)  # type: ignore[union-attr]
    return hashlib.sha256(source.encode()).hexdigest()[:12]


def kinds_of(name: str) -> set[str]:
    return set(OWN_KINDS.get(name, LAKE_KINDS | EXTRA_KINDS.get(name, frozenset())))


def catalogued(assets: Sequence[dg.AssetsDefinition]) -> list[dg.AssetsDefinition]:
    """`assets` with the owner, kinds and code version of each spec set."""
    out: list[dg.AssetsDefinition] = []
    for assets_def in assets:
        version = code_version(assets_def)

        def described(spec: dg.AssetSpec, version: str = version) -> dg.AssetSpec:
            return spec.replace_attributes(
                owners=[OWNER], kinds=kinds_of(spec.key.path[-1]), code_version=version
            )

        out.append(assets_def.map_asset_specs(described))
    return out
