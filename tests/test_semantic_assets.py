"""The semantic assets on a tiny lake: values, checks, and a second run that embeds nothing."""

import shutil
import warnings
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import numpy as np
import polars as pl

from assets import examples, semantic
from pipeline.config import Paths
from pipeline.ingest import contracts
from pipeline.semantic.embed import EmbedConfig, available_backend, model_name
from pipeline.storage.lake import Lake
from pipeline.storage.vectors import EmbeddingCache
from tests.tenant_runs import TENANT, build_analytics, declared, materialize_tenant, tenant_lake
from tests.test_conflicts import statement, statements_frame
from tests.test_consolidate import interaction
from tests.test_fewshot import correction, scores

warnings.filterwarnings("ignore", category=dg.BetaWarning)

ASSETS = [*semantic.ASSETS, examples.few_shot_sets]


def _lake(home: Path) -> None:
    lake = tenant_lake(home)  # every row is acme's
    lake.write(
        "memory_statements",
        declared(
            "memory_statements",
            statements_frame(
                [
                    statement("e1", "Prefers email over phone calls", "inferred_pattern", day=1),
                    # 0.146 from e1: a repeat within the statement threshold (0.15); "… an email
                    # than a phone call" says the same but is 0.16 away.
                    statement(
                        "e2", "Would rather get emails than phone calls", "confirmed_pattern", day=5
                    ),
                    statement(
                        "l1", "Always cc legal on vendor contracts", "explicit_instruction", day=2
                    ),
                    statement(
                        "l2", "Never cc legal on vendor contracts", "inferred_pattern", day=9
                    ),
                ]
            ),
        ),
    )
    lake.write(
        "interactions",
        declared(
            "interactions",
            pl.DataFrame(
                [
                    interaction("i1", "How do I reset my password?"),
                    interaction("i2", "I forgot my password, how can I reset it?"),
                    interaction("i3", "Can I get a refund?"),
                ],
                schema=contracts.INTERACTION_SCHEMA,
            ),
        ),
    )
    lake.write(
        "feedback",
        declared(
            "feedback",
            pl.DataFrame(
                [correction("f1", "i3", "Yes, within 30 days.", 1)],
                schema=contracts.FEEDBACK_SCHEMA,
            ),
        ),
    )
    lake.write(
        "feedback_scores",
        declared(
            "feedback_scores",
            scores(
                [
                    ("i1", 5, 0.6, 0.5, 5, 0),
                    ("i2", 5, 0.5, 0.45, 4, 1),
                    ("i3", 1, -0.3, 0.0, 0, 1),
                ]
            ),
        ),
    )


def _materialize(home: Path, analytics: bool = False) -> dg.ExecuteInProcessResult:
    """acme's run (and, with `analytics`, the analytics build that loads the warehouse)."""
    with dg.instance_for_test() as instance:
        result = materialize_tenant(ASSETS, home, instance)
        if analytics and result.success:
            build_analytics(home, instance)
        return result


def _metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    [event] = [
        m for m in result.asset_materializations_for_node(asset) if m.asset_key.path == [asset]
    ]
    return {k: v.value for k, v in event.metadata.items()}


def test_semantic_assets_materialize_and_rerun_embeds_nothing(tmp_path: Path) -> None:
    _lake(tmp_path)
    first = _materialize(tmp_path, analytics=True)
    assert first.success
    checks = first.get_asset_check_evaluations()
    assert len(checks) == 4 and all(c.passed for c in checks)
    meta = _metadata(first, "memory_embeddings")
    backend = available_backend(EmbedConfig.backend)  # the pipeline default, as installed
    assert (meta["model"], meta["dim"], meta["new_texts_embedded"]) == (
        model_name(backend=backend),
        384,
        7,
    )
    assert (tmp_path / "models" / "embeddings").is_dir() == (backend != "torch")

    lake = Lake(Paths(tmp_path))
    conflicts = lake.read("memory_conflicts").collect()
    assert conflicts.select("memory_id_a", "memory_id_b", "preferred_id", "reason").rows() == [
        ("l1", "l2", "l1", "opposite_polarity")
    ]
    summaries = lake.read("consolidated_summaries").collect()
    assert sorted(summaries["member_ids"].to_list()) == [
        ["e1", "e2"],
        ["i1", "i2"],
        ["i3"],
        ["l1"],
        ["l2"],
    ]
    reinforcement = dict(
        lake.read("memory_reinforcement")
        .collect()
        .select("memory_id", "reinforcement_count")
        .iter_rows()
    )
    assert reinforcement == {"e1": 1, "e2": 1, "l1": 0, "l2": 0}
    sets = lake.read("few_shot_sets").collect()
    assert sets.select("memory_id", "is_corrected").rows() == [("i3", True), ("i1", False)]
    assert sets["output"][0] == "Yes, within 30 days."
    with duckdb.connect(str(Paths(tmp_path).warehouse), read_only=True) as con:
        tables = {
            r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()
        }
    assert {
        "memory_embeddings",
        "consolidated_summaries",
        "memory_reinforcement",
        "memory_conflicts",
        "few_shot_sets",
    } <= tables

    second = _materialize(tmp_path)
    assert second.success
    assert _metadata(second, "memory_embeddings")["new_texts_embedded"] == 0
    assert _metadata(second, "memory_conflicts")["subject_texts_embedded"] == 0
    assert lake.read("few_shot_sets").collect().equals(sets)
    assert _metadata(second, "memory_embeddings")["memories_reused"] == 7
    assert (_metadata(second, "memory_conflicts")["contacts_recomputed"]) == 0
    assert lake.read("memory_conflicts").collect().equals(conflicts)


def test_conflicts_are_recomputed_only_for_contacts_with_new_statements(tmp_path: Path) -> None:
    _lake(tmp_path)
    assert _materialize(tmp_path).success
    lake = tenant_lake(tmp_path)
    statements = lake.read("memory_statements").collect()
    extra = statements_frame(
        [statement("n1", "Never schedule calls on Friday", "explicit_instruction", contact="c9")]
    )
    lake.write("memory_statements", declared("memory_statements", pl.concat([statements, extra])))
    again = _materialize(tmp_path)
    assert again.success
    meta = _metadata(again, "memory_conflicts")
    assert (meta["contacts_recomputed"], meta["contacts"]) == (1, 2)
    incremental = lake.read("memory_conflicts").collect()
    for name in ("conflict_groups", "memory_conflicts"):  # the same home computed from scratch
        shutil.rmtree(Paths(tmp_path).lake / name)
    assert _materialize(tmp_path).success
    assert lake.read("memory_conflicts").collect().equals(incremental)


def test_a_memory_whose_vector_left_the_cache_is_embedded_from_its_text(tmp_path: Path) -> None:
    """Known memories skip re-hashing only while their vector is cached: after a model change
    (here: the cache wiped) every text is embedded again from its real text."""
    _lake(tmp_path)
    assert _materialize(tmp_path).success
    paths = Paths(tmp_path).for_tenant(TENANT)  # the embedding cache is laid out by tenant
    before = EmbeddingCache(paths.embedding_cache)
    embedded = Lake(paths).read("memory_embeddings").collect()
    model, hashes = embedded["model"][0], embedded["text_hash"].unique()
    vectors = before.vectors(model, hashes)
    shutil.rmtree(paths.embedding_cache)
    again = _materialize(tmp_path)
    assert again.success
    meta = _metadata(again, "memory_embeddings")
    assert (meta["new_texts_embedded"], meta["memories_reused"]) == (7, 0)
    after = EmbeddingCache(paths.embedding_cache).vectors(model, hashes)
    assert np.allclose(after.of(hashes), vectors.of(hashes), atol=1e-5)
    assert len(np.unique(after.matrix.round(4), axis=0)) == len(after)  # not one vector for all
