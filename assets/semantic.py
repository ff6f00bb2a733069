"""Semantic assets: embeddings (cached), conflicts, consolidated summaries, few-shot example sets."""

from collections.abc import Iterator

import dagster as dg
import numpy as np
import polars as pl

from assets import groups
from assets.config import StageSettings
from assets.handoffs import reads
from assets.metadata import frame_metadata
from assets.partitions import BLOCKING, TENANTS, asset_spec, declared_columns
from assets.resources import MemorypackHome
from pipeline import tables
from pipeline.frames import changed_groups, group_fingerprints, replace_groups
from pipeline.pii.redactor import Redactor
from pipeline.semantic.conflict_vectors import conflict_vectors
from pipeline.semantic.conflicts import (
    ConflictConfig,
    find_conflicts,
    reference_problems,
    subject_texts,
    with_hashes,
)
from pipeline.semantic.consolidate import (
    Consolidation,
    consolidate,
    membership_problems,
)
from pipeline.semantic.embed import (
    EmbedConfig,
    MemoryRedaction,
    available_backend,
    embed_with_cache,
    fp32_vectors,
    memory_redaction,
    memory_texts,
    model_name,
    redacted_texts,
)
from pipeline.semantic.embed.exact import EmbeddedTexts
from pipeline.semantic.judgement import shipped
from pipeline.storage.vectors import EmbeddingCache, TextVectors

ONE_ROW_PER_MEMORY = "one_unit_vector_per_memory"
ONE_CLUSTER_PER_STATEMENT = "every_statement_in_exactly_one_cluster"
CONFLICTS_REFERENCE_MEMORIES = "conflicts_reference_same_tenant_and_contact"
CONTACT = ["tenant_id", "contact_id"]


def embed_config(home: MemorypackHome) -> tuple[EmbedConfig, str]:
    """One config (and so one model name in the cache) for every embedding asset of a run; the
    ONNX export is made once and kept in the home."""
    config = EmbedConfig(export_dir=home.paths.models / "embeddings")
    return config, model_name(None, available_backend(config.backend))


def home_redacted_texts(home: MemorypackHome) -> EmbeddedTexts:
    """The texts a night embeds, redacted as its pack's are: what the fp32 path re-encodes."""
    return redacted_texts(MemoryRedaction(Redactor.for_home(home.paths)))


def _decided(
    vectors: TextVectors,
    redacted: pl.DataFrame,
    cache: EmbeddingCache,
    config: EmbedConfig,
    conflict_config: ConflictConfig,
) -> tuple[TextVectors, int]:
    """The vectors conflicts are decided on: fp32 near a bar (`conflict_vectors`) on an int8
    night; `redacted`: `with_hashes` of the statements as memory_embeddings redacted them."""
    exact = fp32_vectors(cache, config)
    as_given = fp32_vectors(cache, config, texts_of=lambda rows: rows.select("text_hash", "text"))
    if not (exact and as_given and conflict_config.decision_margin > 0):
        return vectors, 0
    return conflict_vectors(redacted, vectors, conflict_config, exact, as_given)


@dg.asset(
    partitions_def=TENANTS,
    group_name=groups.SEMANTIC,
    ins=reads("interactions", "memory_statements"),
    metadata=declared_columns("memory_embeddings"),
    check_specs=[
        dg.AssetCheckSpec(
            ONE_ROW_PER_MEMORY,
            asset="memory_embeddings",
            blocking=True,
            partitions_def=TENANTS,
            description="One row per memory, each with a vector in the embedding cache, and "
            "every vector computed this run of unit length." + BLOCKING,
        )
    ],
    description="One unit-length vector per memory (statements: content; interactions: input; "
    "its PII redacted as in the pack), served from a sha256-keyed cache so a run embeds only "
    "texts it has never seen.",
)
def memory_embeddings(
    context: dg.AssetExecutionContext,
    home: MemorypackHome,
    interactions: pl.LazyFrame,
    memory_statements: pl.LazyFrame,
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    lake = home.lake
    config, name = embed_config(home)
    cache = home.embedding_cache
    cached = cache.hashes(name)
    # Memories seen before whose vector is cached need no new text key (events never change).
    known = home.table("memory_embeddings").filter(pl.col("text_hash").is_in(cached.implode()))
    # The redacted text, the pack's (SPEC §5): one vector a text for every stage and the pack.
    redact = memory_redaction(Redactor.for_home(home.paths), interactions, memory_statements)
    texts = memory_texts(interactions, memory_statements, known, redact)
    result = embed_with_cache(
        texts, cache.scan(name), name=name, config=config, progress=context.log.info
    )
    cache.append(name, result.fresh)
    lake.write("memory_embeddings", result.embeddings)
    cached = pl.concat([cached, result.fresh["text_hash"]])
    without_vector = int((~result.embeddings["text_hash"].is_in(cached.implode())).sum())
    fresh = result.fresh["embedding"].to_numpy() if result.n_new else np.ones((0, result.dim))
    norms = np.linalg.norm(fresh, axis=1)
    duplicates = texts.height - texts.unique(["tenant_id", "memory_id"]).height
    yield dg.MaterializeResult(
        metadata=frame_metadata(
            result.embeddings,
            {
                "model": result.model,
                "dim": result.dim,
                "new_texts_embedded": result.n_new,
                "texts_from_cache": result.n_cached,
                "memories_reused": known.height,
                "cache_rows": cached.len(),
                "embed_seconds": round(result.seconds, 2),
                "texts_per_second": round(result.texts_per_second, 1),
            },
            preview_columns=["tenant_id", "memory_id", "memory_kind", "text_hash"],
        )
    )
    yield dg.AssetCheckResult(
        check_name=ONE_ROW_PER_MEMORY,
        passed=bool(duplicates == 0 and without_vector == 0 and np.allclose(norms, 1.0, atol=1e-3)),
        metadata={
            "duplicate_ids": duplicates,
            "memories_without_vector": without_vector,
            "min_norm_of_new_vectors": float(norms.min(initial=1.0)),
        },
    )


CONFLICTS_INS = reads("memory_statements", "memory_embeddings")


@dg.multi_asset(
    specs=[
        asset_spec(
            "memory_conflicts",
            groups.SEMANTIC,
            list(CONFLICTS_INS),
            description="Statement pairs about one contact that cannot both be true (supersedes "
            "links, always/never, a correction against an older pattern), with the side the source "
            "hierarchy prefers.",
        ),
        asset_spec("conflict_groups", groups.SEMANTIC, list(CONFLICTS_INS)),
    ],
    ins=CONFLICTS_INS,
    check_specs=[
        dg.AssetCheckSpec(
            CONFLICTS_REFERENCE_MEMORIES,
            asset="memory_conflicts",
            blocking=True,
            partitions_def=TENANTS,
            description="Both memories of every conflict are statements of the conflict's own "
            "tenant and contact." + BLOCKING,
        )
    ],
)
def memory_conflicts(
    context: dg.AssetExecutionContext,
    home: MemorypackHome,
    settings: StageSettings,
    memory_statements: pl.DataFrame,
    memory_embeddings: pl.DataFrame,
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    lake, statements = home.lake, memory_statements
    config, name = embed_config(home)
    conflict_config = settings.stage("conflicts")
    # Conflicts never cross a tenant × contact: only contacts whose statements changed (or a new
    # model or config) are looked at again; the others keep last night's rows.
    prints = group_fingerprints(statements, CONTACT, "event_id", f"{name}|{conflict_config}")
    had = lake.exists("conflict_groups") and lake.exists("memory_conflicts")
    todo = changed_groups(prints, lake.read("conflict_groups").collect() if had else None, CONTACT)
    changed = statements.join(todo, on=CONTACT, how="semi", nulls_equal=True)
    embeddings = memory_embeddings.filter(pl.col("memory_kind") == "statement").join(
        changed.select("tenant_id", memory_id="event_id"), on=["tenant_id", "memory_id"]
    )
    cache = home.embedding_cache
    # Subjects are derived from the redacted text, as memory_embeddings redacted it (its names).
    redacted = changed
    if changed.height:
        redact = MemoryRedaction(Redactor.for_home(home.paths))
        redacted = changed.with_columns(
            content=redact(changed.select("tenant_id", raw="content"))["raw"]
        )
    subjects = embed_with_cache(
        subject_texts(redacted),
        cache.scan(name),
        name=name,
        config=config,
        progress=context.log.info,
    )
    cache.append(name, subjects.fresh)
    hashed = with_hashes(changed, embeddings, subjects.embeddings)
    vectors, decided_fp32 = _decided(
        home.vectors(embeddings, hashed["subject_hash"]),
        with_hashes(redacted, embeddings, subjects.embeddings),
        cache,
        config,
        conflict_config,
    )
    fresh = (
        find_conflicts(hashed, conflict_config, vectors)
        if changed.height
        else tables.empty("memory_conflicts")
    )
    previous = home.table("memory_conflicts") if had else None
    conflicts = replace_groups(previous, fresh, todo, prints, CONTACT).sort(
        "tenant_id", "contact_id", "memory_id_a", "memory_id_b", nulls_last=True
    )
    lake.write("memory_conflicts", conflicts)
    lake.write("conflict_groups", prints)
    problems = reference_problems(conflicts, statements)
    by_reason = dict(conflicts.group_by("reason").len().sort("reason").iter_rows())
    yield dg.MaterializeResult(
        asset_key="memory_conflicts",
        metadata=frame_metadata(
            conflicts,
            {
                "by_reason": by_reason,
                "contacts_with_conflicts": conflicts.select("tenant_id", "contact_id").n_unique(),
                "contacts": prints.height,
                "contacts_recomputed": todo.height,
                "subject_texts_embedded": subjects.n_new,
                "texts_decided_fp32": decided_fp32,
            },
            preview_columns=["contact_id", "memory_id_a", "memory_id_b", "preferred_id", "reason"],
        ),
    )
    yield dg.MaterializeResult(asset_key="conflict_groups", metadata=frame_metadata(prints))
    yield dg.AssetCheckResult(
        asset_key="memory_conflicts",
        check_name=CONFLICTS_REFERENCE_MEMORIES,
        passed=problems.is_empty(),
        metadata={"bad_rows": problems.height},
    )


CONSOLIDATION_INS = reads(
    "interactions", "memory_statements", "memory_embeddings", "memory_conflicts"
)


@dg.multi_asset(
    specs=[
        asset_spec(
            "consolidated_summaries",
            groups.SEMANTIC,
            list(CONSOLIDATION_INS),
            description="Near-duplicate memories clustered (statements per contact, interactions "
            "per system × kind) into one summary each.",
        ),
        asset_spec("memory_reinforcement", groups.SEMANTIC, list(CONSOLIDATION_INS)),
        asset_spec("consolidation_groups", groups.SEMANTIC, list(CONSOLIDATION_INS)),
    ],
    ins=CONSOLIDATION_INS,
    check_specs=[
        dg.AssetCheckSpec(
            ONE_CLUSTER_PER_STATEMENT,
            asset="consolidated_summaries",
            blocking=True,
            partitions_def=TENANTS,
            description="Every statement is a member of exactly one statement cluster." + BLOCKING,
        )
    ],
)
def consolidated_summaries(
    home: MemorypackHome,
    settings: StageSettings,
    interactions: pl.DataFrame,
    memory_statements: pl.DataFrame,
    memory_embeddings: pl.DataFrame,
    memory_conflicts: pl.DataFrame,
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    lake, statements, conflicts = home.lake, memory_statements, memory_conflicts
    embeddings = memory_embeddings
    config = settings.stage("consolidation")
    encoder, model = embed_config(home)
    previous = None
    if all(
        lake.exists(t)
        for t in ("consolidated_summaries", "memory_reinforcement", "consolidation_groups")
    ):
        previous = Consolidation(
            lake.read("consolidated_summaries").collect(),
            lake.read("memory_reinforcement").collect(),
            lake.read("consolidation_groups").collect(),
        )
    result = consolidate(
        statements,
        interactions,
        embeddings,
        conflicts,
        home.vectors(embeddings),
        config,
        previous,
        salt=f"{model}|{config}|{shipped().fingerprint}",
        exact=fp32_vectors(
            home.embedding_cache,
            encoder,
            home_redacted_texts(home),
        ),
    )
    lake.write("consolidated_summaries", result.summaries)
    lake.write("memory_reinforcement", result.reinforcement)
    lake.write("consolidation_groups", result.groups)
    problems = membership_problems(result.summaries, statements)
    summaries = result.summaries
    yield dg.MaterializeResult(
        asset_key="consolidated_summaries",
        metadata=frame_metadata(
            summaries,
            {
                "statement_clusters": summaries.filter(pl.col("scope") == "statement").height,
                "interaction_clusters": summaries.filter(pl.col("scope") == "interaction").height,
                "multi_member_clusters": summaries.filter(pl.col("n_members") > 1).height,
                "largest_cluster": int(summaries["n_members"].max() or 0),  # type: ignore[arg-type]
                "reinforced_statements": result.reinforcement.filter(
                    pl.col("reinforcement_count") > 0
                ).height,
                "clusters_recomputed": result.clusters_recomputed,
                "clusters_reused": result.clusters_reused,
                "statements_decided_fp32": result.exact_texts,
                "requests_decided_fp32": result.exact_interaction_texts,
            },
            preview_columns=["scope", "contact_id", "summary", "n_members", "confidence"],
        ),
    )
    yield dg.MaterializeResult(
        asset_key="memory_reinforcement", metadata=frame_metadata(result.reinforcement)
    )
    yield dg.MaterializeResult(
        asset_key="consolidation_groups", metadata=frame_metadata(result.groups)
    )
    yield dg.AssetCheckResult(
        asset_key="consolidated_summaries",
        check_name=ONE_CLUSTER_PER_STATEMENT,
        passed=problems.is_empty(),
        metadata={"misplaced_statements": problems.height},
    )


ASSETS = [memory_embeddings, memory_conflicts, consolidated_summaries]
CHECKS: list[dg.AssetChecksDefinition] = []
