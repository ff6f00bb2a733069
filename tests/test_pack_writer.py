"""Pack publishing: content, identical re-publish, tenant isolation, PII, retention, rollback, guards."""

import io
import json
from datetime import timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from memorypack import MemoryPack
from memorypack.format import DATA_FILES, MANIFEST, read_latest, version_time
from pipeline.config import Paths
from pipeline.errors import UserError
from pipeline.pii import pseudonym
from pipeline.pii.guard import find_spans
from pipeline.publish.build import build_pack, load_inputs, unit_blocks
from pipeline.publish.content import EmbeddingMatrix
from pipeline.publish.guards import finite_and_norms, run_guards
from pipeline.publish.store import list_versions, prune, rollback, write_latest
from pipeline.publish.writer import make_version, publish
from pipeline.storage.lake import Lake
from pipeline.storage.vectors import EmbeddingCache, TextVectors
from tests.test_pack_support import AS_OF, DIM, PLANTED, make_lake


def _publish(paths: Paths, tenant: str = "acme", as_of=AS_OF, keep: int = 7, run_id: str = "run-1"):
    inputs = load_inputs(Lake(paths), tenant, as_of)
    content = build_pack(inputs)
    assert all(g.passed for g in run_guards(content, inputs))
    return publish(paths.packs, content, run_id=run_id, keep=keep)


def _change_lake(paths: Paths, confidence: float) -> None:
    """A new nightly result: the explicit instruction's confidence changes."""
    key = paths.for_tenant("acme").partition("decay_snapshots", "2026-11-07")
    frame = pl.read_parquet(key).with_columns(
        pl.when(pl.col("memory_id") == "a-m0")
        .then(confidence)
        .otherwise(pl.col("confidence"))
        .alias("confidence")
    )
    frame.write_parquet(key)


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return make_lake(tmp_path / "home")


def test_publish_writes_a_complete_manifest(paths: Paths) -> None:
    result = _publish(paths)
    assert result.published
    manifest = json.loads((paths.packs / "acme" / result.version / MANIFEST).read_text())
    # The version names its publish time (to the microsecond), not its as_of.
    assert manifest["created_at"] == version_time(result.version).isoformat().replace("+00:00", "Z")
    assert manifest["pack_format"] == 1
    assert manifest["tenant_id"] == "acme"
    assert manifest["as_of"] == "2026-11-08T00:00:00Z"
    assert manifest["version"].endswith(manifest["content_hash"][:8])
    assert manifest["producer"]["dagster_run_id"] == "run-1"
    assert manifest["producer"]["version"]
    assert manifest["inputs"]["load_dates"][0] == "2026-11-01"
    # Counted in the tenant's own typed tables (make_lake writes no feedback table).
    assert manifest["inputs"]["events"] == {"interaction": 4, "memory": 3}
    assert manifest["inputs"]["decay_snapshot"] == "2026-11-07"
    assert manifest["models"] == {
        "embedding": {"model": "all-MiniLM-L6-v2+onnx-int8.v2", "dim": DIM},
        "policy_id": "acme-policy-1",
    }
    dpo = manifest["metrics"]["dpo"]
    assert (dpo["eval_accuracy"], dpo["n_eval"]) == (0.75, 10)
    # The baselines on the same eval pairs travel with the accuracy.
    assert (dpo["eval_accuracy_low"], dpo["eval_accuracy_high"]) == (0.4422, 0.9191)
    assert (dpo["reference_accuracy"], dpo["length_rule_accuracy"]) == (0.5, 0.6)
    assert dpo["verdict"].startswith("learning beats the length rule")
    assert set(manifest["files"]) == set(DATA_FILES)
    # The archived single inference stays in the lake but not in the pack.
    assert manifest["files"]["memories.parquet"]["rows"] == 6
    assert manifest["redactions"]["by_kind"] == {"card": 2, "email": 3, "iban": 2, "phone": 2}
    assert read_latest(paths.packs / "acme") == result.version


def test_memories_and_embeddings_line_up(paths: Paths) -> None:
    result = _publish(paths)
    memories = pq.read_table(result.path / "memories.parquet").to_pylist()
    matrix = np.load(result.path / "embeddings.npy")
    assert matrix.dtype == np.float32 and matrix.shape == (6, DIM)
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-5)
    acme = paths.for_tenant("acme")
    embedded = pl.read_parquet(acme.table("memory_embeddings"))
    cache = EmbeddingCache(acme.embedding_cache).vectors(embedded["model"][0])
    text_of = dict(embedded.select("memory_id", "text_hash").iter_rows())
    for i, memory in enumerate(memories):
        expected = cache.of(pl.Series([text_of[memory["memory_id"]]]))[0]
        np.testing.assert_allclose(matrix[i], expected / np.linalg.norm(expected), rtol=1e-5)
    by_id = {m["memory_id"]: m for m in memories}
    assert by_id["a-m0"]["confidence"] == 1.0 and by_id["a-m0"]["has_conflict"]
    assert by_id["a-m1"]["needs_reconfirmation"]
    assert by_id["a-i0"]["quality_lower"] == 0.3 and by_id["a-i0"]["n_feedback"] == 3
    assert by_id["a-i0"]["output"] == "It ships tomorrow."
    assert by_id["a-i0"]["text"] == "Where is my order? mail me at [EMAIL]"


def test_identical_content_publishes_nothing_new(paths: Paths) -> None:
    first = _publish(paths, run_id="run-1")
    again = _publish(paths, run_id="run-2")
    assert not again.published and again.version == first.version
    assert [v.version for v in list_versions(paths.packs / "acme")] == [first.version]
    assert not [p for p in (paths.packs / "acme").iterdir() if p.name.startswith(".tmp-")]


def test_tenant_isolation(paths: Paths) -> None:
    acme = _publish(paths, "acme")
    globex = _publish(paths, "globex")
    assert acme.version != globex.version
    for folder, own, other in ((acme.path, "a-", "g-"), (globex.path, "g-", "a-")):
        for name in DATA_FILES:
            if name.endswith(".parquet"):
                table = pq.read_table(folder / name)
                assert set(table.column("tenant_id").to_pylist()) <= {folder.parent.name}
                ids = [
                    str(v)
                    for c in ("memory_id", "memory_id_a", "cluster_id")
                    if c in table.column_names
                    for v in table.column(c).to_pylist()
                ]
                assert all(i.startswith(own) for i in ids), (name, ids)
        assert other.encode() not in b"".join(
            p.read_bytes() for p in folder.iterdir() if p.suffix == ".json"
        )
    assert MemoryPack.load(paths.packs / "globex").tenant_id == "globex"


def test_planted_pii_is_absent_from_every_file(paths: Paths) -> None:
    result = _publish(paths)
    for path in sorted(result.path.iterdir()):
        raw = path.read_bytes()
        decoded = ""
        if path.suffix == ".parquet":
            decoded = json.dumps(pq.read_table(path).to_pylist(), default=str)
        for value in PLANTED.values():
            compact = value.replace(" ", "")
            for needle in (value, compact):
                assert needle.encode() not in raw, (path.name, needle)
                assert needle not in decoded, (path.name, needle)
    memories = pq.read_table(result.path / "memories.parquet").column("text").to_pylist()
    assert "Pays from IBAN [IBAN]" in memories


def test_missing_upstream_tables_publish_empty_files_and_say_so(tmp_path: Path) -> None:
    skipped = (
        "few_shot_sets",
        "template_history",
        "memory_embeddings",
        "decay_snapshots",
        "dpo_runs",
    )
    paths = make_lake(tmp_path, skip=skipped)
    result = _publish(paths)
    manifest = result.manifest
    assert set(manifest["inputs"]["missing_tables"]) == set(skipped)
    assert manifest["files"]["few_shot.parquet"]["rows"] == 0
    assert manifest["models"]["embedding"]["dim"] == 0
    assert "skill_id" in pq.read_table(result.path / "few_shot.parquet").column_names
    # Without a decay snapshot, stated confidence (or importance) stands and nothing is archived.
    assert manifest["files"]["memories.parquet"]["rows"] == 7
    pack = MemoryPack.load(paths.packs / "acme")
    assert pack.few_shot("support") == []
    assert pack.template("concise_response") is None
    # Base confidence by type (SPEC §4.2) until decay has run: the explicit instruction leads.
    assert pack.memory("a-m0")["confidence"] == 1.0
    assert pack.memory("a-m2")["confidence"] == 0.4
    assert pack.memories_for("c1", k=1)[0].memory_id == "a-m0"


def test_retention_keeps_the_newest_and_the_live_one(paths: Paths) -> None:
    versions = []
    for day in range(5):
        _change_lake(paths, 0.5 + day / 10)
        versions.append(_publish(paths, as_of=AS_OF + timedelta(days=day), keep=3).version)
    kept = [v.version for v in list_versions(paths.packs / "acme")]
    assert kept == versions[-3:]
    assert read_latest(paths.packs / "acme") == versions[-1]
    # A rolled-back live version survives retention even when it is the oldest.
    rollback(paths.packs / "acme", versions[-3])
    assert prune(paths.packs / "acme", keep=1) == [versions[-2]]
    assert [v.version for v in list_versions(paths.packs / "acme")] == [versions[-3], versions[-1]]


def test_rollback_points_latest_back_and_refuses_unknown(paths: Paths) -> None:
    first = _publish(paths).version
    _change_lake(paths, 0.9)
    second = _publish(paths, as_of=AS_OF + timedelta(days=1)).version
    assert read_latest(paths.packs / "acme") == second
    assert rollback(paths.packs / "acme") == first
    assert MemoryPack.load(paths.packs / "acme").version == first
    assert rollback(paths.packs / "acme", second) == second
    # Anything but a rollback refuses to point LATEST at an older version, in one line.
    with pytest.raises(UserError, match=f"names {second}, published after {first}: not moving"):
        write_latest(paths.packs / "acme", first)
    assert read_latest(paths.packs / "acme") == second
    with pytest.raises(UserError, match="no version"):
        rollback(paths.packs / "acme", "20990101T000000Z-deadbeef")
    rollback(paths.packs / "acme", first)
    with pytest.raises(UserError, match="oldest"):
        rollback(paths.packs / "acme")


def test_republishing_a_kept_version_after_rollback_reactivates_it(paths: Paths) -> None:
    first = _publish(paths).version
    _change_lake(paths, 0.9)
    second = _publish(paths).version
    rollback(paths.packs / "acme", first)
    again = _publish(paths)
    assert again.published and again.version == second
    assert read_latest(paths.packs / "acme") == second


def test_guards_catch_bad_inputs(paths: Paths) -> None:
    inputs = load_inputs(Lake(paths), "acme", AS_OF)
    content = build_pack(inputs)
    memories = content.frames["memories.parquet"]
    content.frames["memories.parquet"] = memories.with_columns(
        pl.when(pl.col("memory_id") == "a-i1")
        .then(1.5)
        .otherwise(pl.col("confidence"))
        .alias("confidence"),
        pl.when(pl.col("memory_id") == "a-i2")
        .then(pl.lit("globex"))
        .otherwise(pl.col("tenant_id"))
        .alias("tenant_id"),
        pl.when(pl.col("memory_id") == "a-i3")
        .then(pl.lit("call 030-12345678"))
        .otherwise(pl.col("text"))
        .alias("text"),
    )
    content.frames["few_shot.parquet"] = content.frames["few_shot.parquet"].with_columns(
        pl.lit("a-i1").alias("memory_id"), pl.lit(False).alias("is_corrected")
    )
    content.embeddings = EmbeddingMatrix.of(content.embeddings.read()[:-1])
    results = {g.name: g for g in run_guards(content, inputs)}
    assert [n for n, g in results.items() if g.passed] == ["pack_pii_redacted"]  # it masks
    assert "1 memories out of range" in results["pack_confidence_in_range"].detail
    assert "a-i1" in results["pack_few_shot_not_negative"].detail
    assert "5 embedding rows for 6 memories" in results["pack_embeddings_match_memories"].detail
    assert results["pack_single_tenant"].metadata["foreign_rows"] == {"memories.parquet": 1}
    masked = {"memories.parquet:text": {"phone": 1}}
    assert results["pack_pii_redacted"].metadata["masked"] == masked
    assert "call [PHONE]" in content.frames["memories.parquet"]["text"].to_list()


def _leaky(paths: Paths, text: str = "call 030-12345678"):
    """acme's pack with a value the redactor missed planted in a memory's text."""
    content = build_pack(load_inputs(Lake(paths), "acme", AS_OF))
    memories = content.frames["memories.parquet"]
    leak = pl.when(pl.col("memory_id") == "a-i3").then(pl.lit(text))
    content.frames["memories.parquet"] = memories.with_columns(
        leak.otherwise(pl.col("text")).alias("text")
    )
    return content


def test_the_pii_guard_scans_a_clean_text_once_and_a_leak_every_time(
    paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The publish guard remembers the texts its detector found clean (keyed hashes in the
    redaction cache, under the detector's version): the next night's pack scans only its new
    texts; a leak is never remembered, so it is masked every night; a changed detector scans
    everything again."""
    from pipeline.publish import masking

    scanned: list[str] = []

    def counted(text: str):
        scanned.append(text)
        return find_spans(text)

    monkeypatch.setattr(masking, "find_spans", counted)

    def pii_guard(content=None) -> tuple[bool, dict]:
        scanned.clear()
        inputs = load_inputs(Lake(paths), "acme", AS_OF)  # a new night: a new redactor, same cache
        result = {g.name: g for g in run_guards(content or build_pack(inputs), inputs)}
        found = result["pack_pii_redacted"]
        return found.passed, found.metadata["masked"]

    assert pii_guard() == (True, {})
    first = sorted(scanned)
    assert len(first) >= 5  # ids and texts with digits, an @ or a colon
    assert pii_guard() == (True, {}) and scanned == []

    # Masked, and its masked form checked once (then remembered clean).
    assert pii_guard(_leaky(paths)) == (True, {"memories.parquet:text": {"phone": 1}})
    assert scanned == ["call 030-12345678", "call [PHONE]"]
    assert pii_guard(_leaky(paths)) == (True, {"memories.parquet:text": {"phone": 1}})
    assert scanned == ["call 030-12345678"]

    monkeypatch.setattr(masking, "guard_version", lambda: "guard-another")
    assert pii_guard() == (True, {}) and sorted(scanned) == first


def test_a_value_the_redactor_missed_is_masked_and_the_tenant_publishes(paths: Paths) -> None:
    """Issue 40: a planted miss of the redactor (a text and an id only the guard flags) is masked
    where it stands, the same id alike in every file, counted in the check and the manifest, and
    the pack is published; the same content again is byte-identical (no new version)."""

    def planted():
        content = _leaky(paths, "ring 030-12345678 or mail jürgen.mü[EMAIL]")
        frames = content.frames
        swap = {"a-m0": "ord-0042-1234567"}  # no phone to phonenumbers, one to the guard
        for name, column in (
            ("memories.parquet", "memory_id"),
            ("conflicts.parquet", "memory_id_a"),
            ("conflicts.parquet", "preferred_id"),
            ("summaries.parquet", "representative_id"),
        ):
            frames[name] = frames[name].with_columns(pl.col(column).replace(swap))
        frames["summaries.parquet"] = frames["summaries.parquet"].with_columns(
            pl.col("member_ids").list.eval(pl.element().replace(swap))
        )
        return content

    inputs = load_inputs(Lake(paths), "acme", AS_OF)
    content = planted()
    results = {g.name: g for g in run_guards(content, inputs)}
    pii = results["pack_pii_redacted"]
    masked = {
        "conflicts.parquet:memory_id_a": {"phone": 1},
        "conflicts.parquet:preferred_id": {"phone": 1},
        "memories.parquet:memory_id": {"phone": 1},
        "memories.parquet:text": {"half_redacted": 1, "phone": 1},
        "summaries.parquet:member_ids": {"phone": 1},
        "summaries.parquet:representative_id": {"phone": 1},
    }
    assert pii.passed and pii.metadata["masked"] == masked and pii.metadata["masked_total"] == 7
    result = publish(paths.packs, content, run_id="run-1")
    assert result.published and result.manifest["redactions"]["pii_masked"] == masked
    pack = paths.packs / "acme" / result.version
    memories = pl.read_parquet(pack / "memories.parquet")
    assert "ring [PHONE] or mail [EMAIL]" in memories["text"].to_list()
    alias = pseudonym(inputs.redactor.key, "acme", "ord-0042-1234567")  # type: ignore[union-attr]
    assert alias in memories["memory_id"].to_list()
    summaries = pl.read_parquet(pack / "summaries.parquet")
    conflicts = pl.read_parquet(pack / "conflicts.parquet")
    assert summaries["member_ids"].to_list() == [[alias]]
    assert conflicts.row(0, named=True)["memory_id_a"] == conflicts["preferred_id"][0] == alias
    for name in DATA_FILES:
        raw = (pack / name).read_bytes()
        assert b"0042-1234567" not in raw and b"030-12345678" not in raw, name
    again = planted()
    assert all(g.passed for g in run_guards(again, inputs) if g.name == "pack_pii_redacted")
    assert not publish(paths.packs, again, run_id="run-2").published  # identical content


def test_counter_ids_pass_the_guard_untouched(paths: Paths) -> None:
    """Issue 40: event ids like ix-000394-153365 are no phones: nothing is masked."""
    inputs = load_inputs(Lake(paths), "acme", AS_OF)
    content = build_pack(inputs)
    ids = content.frames["memories.parquet"]["memory_id"].to_list()
    swap = {old: f"ix-000394-15336{i}" for i, old in enumerate(ids)}
    for name, frame in content.frames.items():
        if "memory_id" in frame.columns:
            content.frames[name] = frame.with_columns(pl.col("memory_id").replace(swap))
    results = {g.name: g for g in run_guards(content, inputs)}
    assert results["pack_pii_redacted"].passed
    assert results["pack_pii_redacted"].metadata["masked_total"] == 0
    result = publish(paths.packs, content, run_id="run-1")
    assert result.published and result.manifest["redactions"]["pii_masked"] == {}
    memories = pl.read_parquet(paths.packs / "acme" / result.version / "memories.parquet")
    assert memories["memory_id"].to_list() == list(swap.values())


def test_corrected_examples_are_allowed_despite_negative_feedback(paths: Paths) -> None:
    inputs = load_inputs(Lake(paths), "acme", AS_OF)
    content = build_pack(inputs)
    content.frames["few_shot.parquet"] = content.frames["few_shot.parquet"].with_columns(
        pl.lit("a-i1").alias("memory_id"), pl.lit(True).alias("is_corrected")
    )
    assert {g.name: g.passed for g in run_guards(content, inputs)}["pack_few_shot_not_negative"]


def test_versions_of_one_as_of_sort_in_publish_order(paths: Paths) -> None:
    """Several publishes for the same as_of: names, list, retention and rollback follow publish
    order whatever their content hashes are (CI once sorted them by hash)."""
    versions = []
    for step in range(6):
        _change_lake(paths, 0.3 + step / 10)
        versions.append(_publish(paths, keep=4).version)
    assert versions == sorted(versions)
    tenant = paths.packs / "acme"
    assert [v.version for v in list_versions(tenant)] == versions[-4:]
    assert read_latest(tenant) == versions[-1]
    assert rollback(tenant) == versions[-2]


def test_a_version_is_after_every_kept_one_even_when_the_clock_steps_back(paths: Paths) -> None:
    published = _publish(paths).version
    past = version_time(published) - timedelta(days=3)
    assert version_time(make_version([published], "ab" * 32, now=past)) == version_time(
        published
    ) + timedelta(microseconds=1)


def test_a_pack_with_an_older_as_of_never_goes_live(paths: Paths) -> None:
    live = _publish(paths).version
    _change_lake(paths, 0.2)
    older = _publish(paths, as_of=AS_OF - timedelta(days=2))
    assert not older.published
    assert older.reason.startswith("not published: as_of 2026-11-06T00:00:00Z is older")
    assert read_latest(paths.packs / "acme") == live


def test_packs_named_before_publish_order_versions_still_list_first(paths: Paths) -> None:
    new = _publish(paths).version
    old = paths.packs / "acme" / "20261101T000000Z-0123abcd"
    (paths.packs / "acme" / new).rename(old)
    _change_lake(paths, 0.4)
    newer = _publish(paths).version
    assert [v.version for v in list_versions(paths.packs / "acme")] == [old.name, newer]


def test_embedding_rows_are_unit_vectors_filled_a_block_at_a_time() -> None:
    """Row i is the unit vector of the i-th memory's text (repeats share it), zeros where the
    text has none; written and read block by block, whatever the block."""
    vectors = TextVectors.from_frame(
        pl.DataFrame(
            {"text_hash": ["a", "b"], "embedding": [[3.0, 4.0], [0.0, 2.0]]},
            schema={"text_hash": pl.String, "embedding": pl.Array(pl.Float32, 2)},
        )
    )
    hashes = pl.Series("text_hash", ["b", None, "a", "zz", "a", "b", "b"], dtype=pl.String)
    expected = np.array(
        [[0, 1], [0, 0], [0.6, 0.8], [0, 0], [0.6, 0.8], [0, 1], [0, 1]], dtype=np.float32
    )
    for block in (1, 2, 3, 100):
        matrix = EmbeddingMatrix(unit_blocks(vectors, hashes, block=block), len(hashes), 2)
        assert [len(rows) for rows in matrix.blocks(3)] == [3, 3, 1]
        np.testing.assert_allclose(np.vstack(list(matrix.blocks(3))), expected, atol=1e-7)
        # The file is what np.save writes of the matrix, and goes with the object.
        saved = io.BytesIO()
        np.save(saved, matrix.read(), allow_pickle=False)
        assert matrix.path.read_bytes() == saved.getvalue()
        path = matrix.path
        del matrix
        assert not path.exists()


def test_embedding_checks_are_exact_across_blocks() -> None:
    """Finite values and row norms are checked a block of rows at a time (no whole-matrix
    temporary): a bad value in any block, and every off-length row, are still found."""
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(10, 4)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix[7] *= 2.0
    matrix[9] = 0.0  # a memory without an embedding
    for block in (1, 3, 10, 16_384):
        finite, norms = finite_and_norms(EmbeddingMatrix.of(matrix).blocks(block))
        assert finite and np.allclose(norms, np.linalg.norm(matrix, axis=1))
    matrix[8, 2] = np.nan
    assert not finite_and_norms(EmbeddingMatrix.of(matrix).blocks(3))[0]


def test_the_packs_vectors_are_the_encoders_of_its_redacted_text(tmp_path: Path) -> None:
    """SPEC §5 round 3: the lake's vectors embed the original texts (here by the installed
    encoder); the pack's rows for texts it redacted are the encoder's of the redacted text,
    encoded at build (only those) and kept in the cache."""
    from pipeline.semantic.embed import (
        EmbedConfig,
        available_backend,
        embed_with_cache,
        encode,
        load_model,
        memory_texts,
        model_name,
        normalise_text,
    )
    from tests.tenant_runs import declared

    paths = make_lake(tmp_path / "home", tenants=("acme",)).for_tenant("acme")
    config = EmbedConfig(export_dir=paths.models / "embeddings")
    name = model_name(None, available_backend(config.backend))
    lake = Lake(paths)
    texts = memory_texts(lake.read("interactions"), lake.read("memory_statements"))
    raw = embed_with_cache(texts, None, name=name, config=config)
    cache = EmbeddingCache(paths.embedding_cache)
    cache.append(name, raw.fresh)
    lake.write("memory_embeddings", declared("memory_embeddings", raw.embeddings))

    content = build_pack(load_inputs(lake, "acme", AS_OF))
    memories = content.frames["memories.parquet"]
    matrix = content.embeddings.read()
    model = load_model(None, available_backend(config.backend), config.export_dir)
    pack_texts = memories.select(normalise_text(pl.col("text")))["text"].to_list()
    on_pack = np.sum(matrix * encode(pack_texts, model=model), axis=1)
    original = dict(texts.select("memory_id", "text").iter_rows())
    on_raw = np.sum(matrix * encode([original[m] for m in memories["memory_id"]], model=model), 1)
    np.testing.assert_allclose(on_pack, 1.0, atol=1e-3)
    redacted = np.array(["[" in t for t in memories["text"]])
    assert redacted.sum() == 3 and on_raw[redacted].max() < 0.98
    assert len(cache.hashes(name)) == raw.fresh.height + 3
