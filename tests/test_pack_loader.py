"""The loader apps use: verification, refusal, ranking with score parts, skills, selector fallback."""

import json
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from memorypack import MemoryPack, PackError
from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.writer import publish
from pipeline.storage.lake import Lake
from tests.test_pack_support import AS_OF, make_lake

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    paths = make_lake(tmp_path_factory.mktemp("home"))
    for tenant in ("acme", "globex"):
        publish(paths.packs, build_pack(load_inputs(Lake(paths), tenant, AS_OF)))
    return paths.packs


@pytest.fixture(scope="module")
def pack(packs: Path) -> MemoryPack:
    return MemoryPack.load(packs / "acme")


def _copy(packs: Path, tmp_path: Path) -> Path:
    import shutil

    target = tmp_path / "acme"
    shutil.copytree(packs / "acme", target)
    return target


def test_loader_imports_without_the_pipeline_stack() -> None:
    blocked = [
        "polars",
        "duckdb",
        "dagster",
        "torch",
        "transformers",
        "sentence_transformers",
        "trl",
        "sklearn",
    ]
    code = (
        "import sys\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules[name] = None\n"
        "from memorypack import MemoryPack, PackError\n"
        "import memorypack.loader, memorypack.format, memorypack.selector, memorypack.results\n"
        "import pipeline.publish.store\n"  # the pipeline's version store is light too
        f"leaked = [n for n in {blocked!r} if sys.modules.get(n) is not None]\n"
        "assert not leaked, leaked\n"
        "print('light ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "light ok" in done.stdout


def test_the_app_library_never_imports_the_pipeline() -> None:
    code = (
        "import sys\n"
        "import memorypack, memorypack.loader\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in ('pipeline', 'assets', 'jobs')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_load_resolves_latest_and_verifies(packs: Path, pack: MemoryPack) -> None:
    assert pack.tenant_id == "acme"
    assert pack.version == (packs / "acme" / "LATEST").read_text().strip()
    assert len(pack) == 6
    assert isinstance(pack.embeddings, np.memmap)
    assert MemoryPack.load(pack.path).version == pack.version  # a version folder loads directly


def test_tampered_file_is_refused(packs: Path, tmp_path: Path) -> None:
    tenant = _copy(packs, tmp_path)
    version = (tenant / "LATEST").read_text().strip()
    target = tenant / version / "few_shot.parquet"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, different bytes
    target.write_bytes(bytes(data))
    with pytest.raises(PackError, match=r"few_shot\.parquet does not match its sha256"):
        MemoryPack.load(tenant)
    (tenant / version / "conflicts.parquet").write_bytes(b"short")
    with pytest.raises(PackError, match=r"conflicts\.parquet has 5 bytes"):
        MemoryPack.load(tenant)


def test_missing_pack_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PackError, match="no published pack"):
        MemoryPack.load(tmp_path)
    (tmp_path / "LATEST").write_text("../../etc\n")
    with pytest.raises(PackError, match="not a pack version"):
        MemoryPack.load(tmp_path)


def test_memories_for_ranks_with_score_parts(pack: MemoryPack) -> None:
    ranked = pack.memories_for("c1", k=10)
    # c1's active memories plus the contact-less one; never c2's; not a-m1, which lost its
    # conflict with a-m0 (tests/test_pack_confidence.py).
    assert {m.memory_id for m in ranked} == {"a-m0", "a-i0", "a-i1", "a-i3"}
    assert ranked[0].memory_id == "a-m0"
    top = ranked[0]
    assert top.parts["confidence"] == 1.0
    assert top.parts["semantic"] == 1.0  # no query vector: confidence alone
    assert top.parts["same_contact"] == pytest.approx(0.3)
    assert top.parts["recency"] == pytest.approx(
        0.2 - 0.02 * (7 - 10 / 24)
    )  # confirmed Nov 1 10:00
    assert top.score == pytest.approx(sum(v for k, v in top.parts.items() if k != "confidence"))
    general = next(m for m in ranked if m.memory_id == "a-i3")
    assert general.parts["same_contact"] == 0.0
    i0 = next(m for m in ranked if m.memory_id == "a-i0")
    assert i0.parts["feedback"] == pytest.approx(0.2 * 0.6)
    i1 = next(m for m in ranked if m.memory_id == "a-i1")
    assert i1.parts["feedback"] == pytest.approx(0.1 * -0.2)
    assert [m.score for m in ranked] == sorted((m.score for m in ranked), reverse=True)


def test_memories_for_boosts_kind_tags_and_query(pack: MemoryPack) -> None:
    target = np.asarray(pack.embeddings[pack._indexes.row_of["a-i1"]])
    ranked = pack.memories_for(
        "c1", k=3, tags=["address", "orders"], kind="support_reply", query_vector=target * 3
    )
    assert ranked[0].memory_id == "a-i1"
    parts = ranked[0].parts
    assert parts["similarity"] == pytest.approx(1.0, abs=1e-5)
    assert parts["semantic"] == pytest.approx(parts["confidence"], abs=1e-5)
    assert parts["same_kind"] == pytest.approx(0.2)
    assert parts["tags"] == pytest.approx(0.2)  # two matching tags
    with pytest.raises(ValueError, match="dimensions"):
        pack.memories_for("c1", query_vector=[1.0, 2.0])
    later = pack.memories_for("c1", k=1, now=AS_OF + timedelta(days=30))[0]
    assert later.parts["recency"] == 0.0
    assert pack.memories_for("nobody", k=5)[0].memory_id == "a-i3"


def test_few_shot_examples(pack: MemoryPack) -> None:
    examples = pack.few_shot("support", k=3)
    # Both are first of their set; then quality_lower, a corrected output's being 1.0.
    assert [e.memory_id for e in examples] == ["a-i2", "a-i0"]
    assert [e.rank for e in examples] == [1, 2] and [e.group_rank for e in examples] == [1, 1]
    assert examples[0].is_corrected and "[CARD]" in examples[0].output
    assert [e.memory_id for e in pack.few_shot("support", skill_id="empathy_direct")] == ["a-i2"]
    assert [e.memory_id for e in pack.few_shot("support", kind="support_reply", k=1)] == ["a-i2"]
    assert pack.few_shot("nothing") == []
    query = np.asarray(pack.embeddings[pack._indexes.row_of["a-i2"]])
    similar = pack.few_shot("support", k=2, query_vector=query)
    assert similar[0].memory_id == "a-i2" and similar[0].similarity == pytest.approx(1.0, abs=1e-5)
    assert "Input:" in similar[0].as_prompt()


def test_templates(pack: MemoryPack) -> None:
    current = pack.template("concise_response")
    assert current is not None and current.version == 2 and current.is_current
    assert current.eval_accuracy == 0.75
    assert pack.template("concise_response", version=1).template == "Answer in two sentences."
    assert len(pack.template_history("concise_response")) == 2
    assert pack.template("unknown_skill") is None


def test_select_skill_formula_and_exploration(pack: MemoryPack) -> None:
    choice = pack.select_skill("u1")
    assert choice is not None and not choice.explored
    pref = pack._indexes.user_vectors["u1"]
    # Tenant: positive share of every user's votes, smoothed by 2 votes toward 0.5; u1's own EMA
    # confidence counts its votes against 5 votes of the tenant's (u1 never used empathy_direct).
    tenant = {
        "concise_response": (8 + 1) / (9 + 2),
        "detailed_explanation": (1 + 1) / (3 + 2),
        "empathy_direct": (1 + 1) / (1 + 2),
    }
    confidence = {
        "concise_response": (9 * 0.8 + 5 * tenant["concise_response"]) / 14,
        "detailed_explanation": (3 * 0.4 + 5 * tenant["detailed_explanation"]) / 8,
        "empathy_direct": tenant["empathy_direct"],
    }
    scores = {
        s: 0.7 * c + 0.3 * float(np.dot(pref, pack._indexes.skill_vectors[s]))
        for s, c in confidence.items()
    }
    assert dict(choice.ranking) == pytest.approx(scores)
    assert (choice.tenant_confidence, choice.user_votes) == (pytest.approx(0.4), 3)
    # u1's preference vector equals the detailed_explanation skill vector: alignment 1 wins.
    assert choice.skill_id == "detailed_explanation" and choice.alignment == pytest.approx(1.0)
    assert pack.select_skill("u1", context_tags=["orders"]).skill_id == "concise_response"
    rng = np.random.default_rng(3)
    picks = [pack.select_skill("u1", epsilon=1.0, rng=rng) for _ in range(20)]
    assert all(p.explored for p in picks)
    assert {p.skill_id for p in picks} == set(tenant)
    same = [pack.select_skill("u1", epsilon=0.5, rng=seed).skill_id for seed in range(10)]
    assert same == [pack.select_skill("u1", epsilon=0.5, rng=seed).skill_id for seed in range(10)]
    stranger = pack.select_skill("nobody")
    assert stranger is not None and stranger.skill_id == "concise_response"
    assert stranger.confidence == stranger.tenant_confidence == tenant["concise_response"]
    assert stranger.user_votes == 0 and stranger.alignment == 0.0


def test_conflicts_and_explain(pack: MemoryPack) -> None:
    (conflict,) = pack.conflicts("c1")
    assert (conflict.memory_id_a, conflict.memory_id_b, conflict.preferred_id) == (
        "a-m0",
        "a-m1",
        "a-m0",
    )
    assert conflict.text_b == "Pays from IBAN [IBAN]"
    assert pack.conflicts("c2") == []
    text = pack.explain("a-m1")
    assert text.startswith(
        'because of this memory: "Pays from IBAN [IBAN]" (inferred_pattern, about c1)'
    )
    assert "last confirmed 2026-11-02, confidence 0.58" in text
    assert "needs reconfirmation" in text and "conflicts with a-m0" in text
    assert "not preferred: the pack prefers a-m0" in text
    assert pack.explain("zzz") is None and pack.memory("zzz") is None


def test_select_uses_a_good_selector(pack: MemoryPack) -> None:
    query = np.ones(pack.dim, dtype=np.float32)

    def selector(candidates):
        ids = [c.memory_id for c in candidates]
        assert "a-i1" in ids
        return {
            "selected_memories": [
                {"id": "a-i3", "relevance_score": 0.4, "reason": "general"},
                {"id": "a-i1", "relevance_score": 0.9, "reason": "same topic"},
            ]
        }

    selection = pack.select(query, k=5, selector=selector, contact_id="c1")
    assert selection.strategy == "selector" and selection.fallback_reason is None
    assert [m.memory_id for m in selection.memories] == ["a-i1", "a-i3"]
    assert selection.memories[0].parts["selector_relevance"] == 0.9
    assert selection.memories[0].selector_reason == "same topic"
    as_json = pack.select(query, k=1, selector=lambda c: json.dumps(["a-m0"]), contact_id="c1")
    assert [m.memory_id for m in as_json.memories] == ["a-m0"]


@pytest.mark.parametrize(
    ("selector", "reason"),
    [
        (lambda c: 1 / 0, "selector failed: ZeroDivisionError"),
        (lambda c: (time.sleep(1.0), ["a-m0"])[1], "timed out after 50 ms"),
        (lambda c: "not json", "not JSON"),
        (lambda c: {"selected_memories": [{"id": "made-up"}]}, "not a candidate"),
        (lambda c: [{"id": "a-m0", "relevance_score": 7}], "invalid relevance_score"),
        (lambda c: 42, "expected a list"),
    ],
)
def test_select_falls_back_to_the_algorithmic_ranking(
    pack: MemoryPack, selector, reason: str
) -> None:
    query = np.ones(pack.dim, dtype=np.float32)
    algorithmic = pack.select(query, k=3, contact_id="c1")
    began = time.perf_counter()
    selection = pack.select(query, k=3, selector=selector, timeout_ms=50, contact_id="c1")
    assert time.perf_counter() - began < 0.5
    assert selection.strategy == "algorithmic"
    assert reason in (selection.fallback_reason or "")
    assert [m.memory_id for m in selection.memories] == [m.memory_id for m in algorithmic.memories]
    assert [m.memory_id for m in algorithmic.memories] == [
        m.memory_id for m in pack.candidates(query, k=3, contact_id="c1")
    ]


def test_no_tag_codes_group_into_nothing_so_an_untagged_pack_loads() -> None:
    from memorypack.tables import group_rows

    assert group_rows(np.zeros(0, dtype=np.int64)) == {}  # was: zip() argument 2 is longer
    groups = group_rows(np.array([2, 0, 2]))
    assert {code: rows.tolist() for code, rows in groups.items()} == {0: [1], 2: [0, 2]}
