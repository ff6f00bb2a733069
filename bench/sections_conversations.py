"""Evidence recall on long-term conversations written by people (LoCoMo), beside raw-turn baselines.

The conversations in `../shared/data/locomo/` (relative to the checkout; CC BY-NC, evaluation only,
never copied here) are imported with `memorypack import locomo` (every turn a `memory` event, the
conversation its contact, all five ending on one day) into one load-date folder, and one night
(`memorypack run --date D --workers 1 --fast`: a single partition, so one decay snapshot, as of the
day the questions are asked) publishes the tenant's pack. Each question of categories 1-4 (1
multi-hop, 2 temporal, 3 open-domain, 4 single-hop; 5, adversarial, has no answer to find) is asked
with its conversation as `contact_id`, `now` = the pack's as-of, and scored on its evidence turns:
all@k (every evidence turn among the first k ids) and any@k (at least one):

- `pack.search(question, k=10, contact_id=c)`, `pack.memories_for(c, k=10, query=question)`, and
  `pack.prompt_context(c, query=question, k_memories=10)` (the memories it kept, in order);
- BM25 over the raw turns: the library's own `memorypack.keyword.KeywordIndex` (Okapi BM25, its
  tokenizer, stopwords and common-term cut, no score floor) over every imported turn, ranked within
  the question's conversation;
- dense retrieval over the raw turns with the pack's own encoder (`pack.embed`), cosine, within the
  question's conversation.
Also: search latency p50/p95, and the share of questions with an evidence turn that the pack holds
as inactive, on the losing side of a conflict, or not at all; the conflicts the night flagged and
their precision against the hand labels of `tests/fixtures/locomo_conflicts.csv` (ids only; an
unlabelled conflict counts as false), and the statement clusters: the share of turns clustered with
others, the clusters that mix two speakers (`metadata.speaker`, see pipeline/semantic/wording.py),
and the pairs of turns sharing a cluster that say two different facts, by the hand labels of
`tests/fixtures/locomo_cluster_pairs.csv` (ids only: every pair that shared a cluster at the
statement thresholds 0.20 and 0.15; a pair nobody labelled is counted apart).
Redaction (SPEC §5 round 3): the speakers' names (the importer's `metadata.speaker`) left in the
pack's texts (every text column of every file, case-insensitive whole words), as a share of their
mentions in the raw turns, and the mean cosine of the pack's vectors to the encoder on the pack's
(redacted) text and on the raw text.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import ROOT, Figure, NotAvailable, Sizes, percentile, rounded, run_child

DATA = ROOT.parent / "shared" / "data" / "locomo"
LABELS = ROOT / "tests" / "fixtures" / "locomo_conflicts.csv"
CLUSTER_LABELS = ROOT / "tests" / "fixtures" / "locomo_cluster_pairs.csv"
TENANT = "locomo"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
METHODS = ("search", "memories_for", "prompt_context", "bm25_raw", "dense_raw")
K = 10
GOAL_MARGIN = 0.05  # issue 41: default search ≥ BM25 + 0.05 all@10, not below it in any category


def recall(ranked: list[list[str]], evidence: list[set[str]]) -> dict[str, float]:
    """all@5, all@10 and any@10 over questions: the share whose evidence ids are all (any) in the
    first k ranked ids."""
    n = max(len(evidence), 1)
    return {
        "all@5": sum(e <= set(r[:5]) for r, e in zip(ranked, evidence, strict=True)) / n,
        "all@10": sum(e <= set(r[:10]) for r, e in zip(ranked, evidence, strict=True)) / n,
        "any@10": sum(bool(e & set(r[:10])) for r, e in zip(ranked, evidence, strict=True)) / n,
    }


def by_category(
    ranked: list[list[str]], evidence: list[set[str]], categories: list[int]
) -> dict[str, dict[str, float]]:
    out = {}
    for code, name in CATEGORIES.items():
        rows = [i for i, c in enumerate(categories) if c == code]
        out[name] = recall([ranked[i] for i in rows], [evidence[i] for i in rows])
    out["overall"] = recall(ranked, evidence)
    return out


def names_left(pack_dir: Path, raw: list[dict[str, Any]]) -> dict[str, Any]:
    """Speaker-name mentions (whole words, any case) in the raw turns and in every text column of
    the pack's files (ids and enumerations are no text), with the columns that still hold some."""
    import re

    import polars as pl

    from pipeline.publish.content import ENUM_COLUMNS, ID_COLUMNS

    speakers = sorted({str(e["metadata"]["speaker"]) for e in raw if e.get("metadata")})
    pattern = r"(?i)\b(?:" + "|".join(re.escape(s) for s in speakers) + r")\b"
    raw_n = int(pl.Series([e["content"] for e in raw]).str.count_matches(pattern).sum())
    left: dict[str, int] = {}
    for file in sorted(pack_dir.glob("*.parquet")):
        frame = pl.read_parquet(file)
        for column, dtype in frame.schema.items():
            if column in ENUM_COLUMNS or column in ID_COLUMNS:
                continue
            if dtype == pl.List(pl.String):
                texts = frame[column].explode()
            elif dtype == pl.String:
                texts = frame[column]
            else:
                continue
            n = int(texts.str.count_matches(pattern).sum() or 0)
            if n:
                left[f"{file.name}:{column}"] = n
    total = sum(left.values())
    return {
        "speakers": len(speakers),
        "raw_mentions": raw_n,
        "left": total,
        "share": round(total / raw_n, 4) if raw_n else 0.0,
        "by_column": left,
    }


def vector_cosines(pack: Any, raw: list[dict[str, Any]]) -> dict[str, float]:
    """Mean cosine of the pack's vectors to the pack's encoder on the pack's text and on the raw
    text of the same memory (SPEC §5 round 3: the vectors are computed from the redacted text)."""
    import polars as pl

    folder = Path(str(pack.path))
    memories = pl.read_parquet(folder / "memories.parquet", columns=["memory_id", "text"])
    matrix = np.load(folder / "embeddings.npy")
    by_id = {e["event_id"]: e["content"] for e in raw}
    rows = [i for i, m in enumerate(memories["memory_id"].to_list()) if m in by_id]
    if not rows or matrix.shape[1] == 0:
        return {"redacted": 0.0, "raw": 0.0, "rows": 0}
    ids = memories["memory_id"].to_list()
    texts = memories["text"].to_list()
    mine = matrix[rows]

    def mean_cos(other: np.ndarray) -> float:
        return round(float(np.mean(np.sum(mine * other, axis=1))), 4)

    return {
        "redacted": mean_cos(pack.embed([texts[i] for i in rows])),
        "raw": mean_cos(pack.embed([by_id[ids[i]] for i in rows])),
        "rows": len(rows),
    }


def pair_labels(path: Path, column: str) -> dict[tuple[str, str], bool]:
    """(memory_id_a, memory_id_b) → the hand label in `column` ("true"/"false") of a fixture."""
    with path.open() as f:
        return {
            (r["memory_id_a"], r["memory_id_b"]): r[column] == "true" for r in csv.DictReader(f)
        }


def conflict_labels(path: Path = LABELS) -> dict[tuple[str, str], bool]:
    """(memory_id_a, memory_id_b) → judged a true conflict, from the hand-labelled fixture."""
    return pair_labels(path, "true_conflict")


def cluster_labels(path: Path = CLUSTER_LABELS) -> dict[tuple[str, str], bool]:
    """(memory_id_a, memory_id_b), a < b → judged the same fact, from the hand-labelled fixture."""
    return pair_labels(path, "same_fact")


def shared_members(summaries: Any) -> Any:
    """cluster_id, memory_id of every member of a statement cluster with more than one member
    (`summaries`: consolidated_summaries rows)."""
    import polars as pl

    shared = summaries.filter((pl.col("scope") == "statement") & (pl.col("n_members") > 1))
    return shared.select("cluster_id", memory_id="member_ids").explode("memory_id")


def judged_cluster_pairs(
    clusters: Any, labels: dict[tuple[str, str], bool]
) -> dict[str, int | float]:
    """Every pair of memories sharing a cluster (`clusters`: cluster_id, memory_id) against the hand
    labels: how many pairs, how many say different facts (and their share), how many nobody
    labelled, and the clusters holding a pair of different facts."""
    import polars as pl

    pairs = clusters.join(clusters, on="cluster_id", suffix="_b").filter(
        pl.col("memory_id") < pl.col("memory_id_b")
    )
    judged = [labels.get(pair) for pair in pairs.select("memory_id", "memory_id_b").rows()]
    pairs = pairs.with_columns(pl.Series("same", judged, dtype=pl.Boolean))
    different = pairs.filter(~pl.col("same"))
    return {
        "cluster_pairs": pairs.height,
        "cluster_pairs_unlabelled": pairs["same"].null_count(),
        "cluster_pairs_different_facts": different.height,
        "cluster_pairs_different_share": round(different.height / max(pairs.height, 1), 4),
        "clusters_with_different_facts": different["cluster_id"].n_unique(),
    }


def conflicts_and_clusters(
    conflicts: Any,
    summaries: Any,
    statements: Any,
    labels: dict[tuple[str, str], bool],
    same_fact: dict[tuple[str, str], bool],
) -> dict[str, Any]:
    """Conflicts flagged and their precision by `labels` (unlabelled = false; 1.0 when none is
    flagged), and of the statement clusters with more than one member: how many, the share of
    statements in them, how many mix speakers, and their pairs judged by `same_fact`
    (`statements`: memory_statements rows)."""
    import polars as pl

    from pipeline.semantic.wording import speaker

    pairs = conflicts.select("memory_id_a", "memory_id_b").rows()
    true = sum(labels.get(pair, False) for pair in pairs)
    who = statements.select(memory_id="event_id", speaker=speaker(pl.col("metadata")))
    members = shared_members(summaries).join(who, on="memory_id", how="left")
    mixed = members.group_by("cluster_id").agg(pl.col("speaker").n_unique() > 1)["speaker"].sum()
    return {
        "conflicts": len(pairs),
        "conflicts_labelled": sum(pair in labels for pair in pairs),
        "conflict_precision": round(true / len(pairs), 4) if pairs else 1.0,
        "shared_clusters": members["cluster_id"].n_unique(),
        "share_of_statements_clustered": round(members.height / max(statements.height, 1), 4),
        "clusters_mixing_speakers": int(mixed),
        **judged_cluster_pairs(members.select("cluster_id", "memory_id"), same_fact),
    }


def _semantics(home: Path) -> dict[str, Any]:
    from pipeline.ingest.layout import Paths
    from pipeline.storage.lake import Lake

    lake = Lake(Paths(home))
    conflicts, summaries, statements = (
        lake.read(t).collect()
        for t in ("memory_conflicts", "consolidated_summaries", "memory_statements")
    )
    return conflicts_and_clusters(
        conflicts, summaries, statements, conflict_labels(), cluster_labels()
    )


def _night(files: list[Path], work: Path) -> tuple[Path, dict[str, Any], float, float]:
    """Import, then one night in a child process: (pack folder, truth, import s, night s)."""
    from pipeline.ingest.importers.locomo import end_date, import_locomo

    landing, home = work / "landing", work / "home"
    end = end_date(files)
    started = time.perf_counter()
    import_locomo(files, landing, TENANT, load_date=end)
    imported_s = time.perf_counter() - started
    (home / "dagster").mkdir(parents=True)
    (home / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env |= {"DAGSTER_HOME": str(home / "dagster"), "MEMORYPACK_FIRST_DATE": end.isoformat()}
    argv = ["-m", "jobs.cli", "run", "--home", str(home), "--landing", str(landing)]
    argv += ["--date", end.isoformat(), "--workers", "1", "--fast"]
    log = work / "night.log"
    with log.open("w") as sink:
        child = run_child([sys.executable, *argv], env=env, stdout=sink, stderr=sink)
    if child.returncode != 0:
        raise RuntimeError(f"the night failed ({child.returncode}): {log.read_text()[-1500:]}")
    truth = json.loads((landing / "truth.json").read_text())
    truth["raw"] = [
        json.loads(line) for f in sorted(landing.glob("*/*.jsonl")) for line in f.open()
    ]
    return home / "packs" / TENANT, truth, imported_s, child.seconds


def _baselines(pack: Any, raw: list[dict[str, Any]]) -> dict[str, Callable[[str, str], list[str]]]:
    """BM25 and dense retrieval over the raw turns, each ranking within one conversation."""
    import pyarrow as pa

    from memorypack.keyword import KeywordIndex

    ids = np.array([e["event_id"] for e in raw])
    texts = [e["content"] for e in raw]
    contacts = np.array([e["contact_id"] for e in raw])
    index = KeywordIndex(pa.array(texts))
    vectors = pack.embed(texts)

    def top(scores: np.ndarray, contact: str) -> list[str]:
        rows = np.flatnonzero(contacts == contact)
        order = rows[np.argsort(-scores[rows], kind="stable")[:K]]
        return ids[order].tolist()

    return {
        "bm25_raw": lambda q, c: top(index.scores(q).astype(np.float64), c),
        "dense_raw": lambda q, c: top(vectors @ pack.embed([q])[0], c),
    }


def _evaluate(pack_dir: Path, truth: dict[str, Any]) -> dict[str, Any]:
    from memorypack import MemoryPack

    pack = MemoryPack.load(pack_dir).warm()
    now = pack.as_of
    questions = [q for q in truth["questions"] if q["category"] in CATEGORIES and q["evidence_ids"]]
    timings: dict[str, list[float]] = {m: [] for m in METHODS}
    methods: dict[str, Callable[[str, str], list[str]]] = {
        "search": lambda q, c: [m.memory_id for m in pack.search(q, k=K, contact_id=c)],
        "memories_for": lambda q, c: [
            m.memory_id for m in pack.memories_for(c, k=K, query=q, now=now)
        ],
        "prompt_context": lambda q, c: [
            m.memory_id for m in pack.prompt_context(c, query=q, k_memories=K, now=now).memories
        ],
        **_baselines(pack, truth["raw"]),
    }
    ranked: dict[str, list[list[str]]] = {m: [] for m in METHODS}
    for q in questions:
        for name, method in methods.items():
            started = time.perf_counter()
            ranked[name].append(method(q["question"], q["contact_id"]))
            timings[name].append(time.perf_counter() - started)
    evidence = [set(q["evidence_ids"]) for q in questions]
    categories = [q["category"] for q in questions]
    status = dict(
        zip(
            pack.memories.column("memory_id").to_pylist(),
            pack.memories.column("status").to_pylist(),
            strict=True,
        )
    )
    losing = {
        side
        for c in {q["contact_id"] for q in questions}
        for conflict in pack.conflicts(c)
        if conflict.preferred_id is not None
        for side in (conflict.memory_id_a, conflict.memory_id_b)
        if side != conflict.preferred_id
    }
    n = len(questions)
    hidden = {
        "inactive": sum(any(status.get(e, "active") != "active" for e in ev) for ev in evidence),
        "overruled": sum(bool(ev & losing) for ev in evidence),
        "missing_from_pack": sum(any(e not in status for e in ev) for ev in evidence),
    }
    return {
        "questions": n,
        "per_category_questions": {
            name: categories.count(code) for code, name in CATEGORIES.items()
        },
        "recall": {m: by_category(ranked[m], evidence, categories) for m in METHODS},
        "latency_ms": {
            m: {
                "p50": rounded(percentile(timings[m], 50) * 1e3),
                "p95": rounded(percentile(timings[m], 95) * 1e3),
            }
            for m in METHODS
        },
        "hidden_share": {k: round(v / n, 4) for k, v in hidden.items()},
        "hidden_questions": hidden,
        "either_inactive_or_overruled": round(
            sum(
                any(status.get(e, "active") != "active" for e in ev) or bool(ev & losing)
                for ev in evidence
            )
            / n,
            4,
        ),
        "pack": {
            "version": pack.version,
            "as_of": now.isoformat(),
            "memories": pack.memories.num_rows,
        },
        "names_left": names_left(Path(str(pack.path)), truth["raw"]),
        "vector_cosine": vector_cosines(pack, truth["raw"]),
    }


def table_md(result: dict[str, Any]) -> str:
    """Evidence recall per method and category: all@5 / all@10 / any@10."""
    names = [*CATEGORIES.values(), "overall"]
    counts = result["per_category_questions"] | {"overall": result["questions"]}
    lines = [
        "conversations — evidence recall all@5 / all@10 / any@10 "
        f"({result['questions']} questions):",
        "",
        "| method | " + " | ".join(f"{c} ({counts[c]})" for c in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for method in METHODS:
        cells = [
            "{all@5:.3f} / {all@10:.3f} / {any@10:.3f}".format(**result["recall"][method][c])
            for c in names
        ]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    names, cosine = result["names_left"], result["vector_cosine"]
    lines += [
        "",
        f"speaker names left in pack text: {names['left']} of {names['raw_mentions']} raw mentions"
        f" ({names['share']:.2%}); pack vectors' mean cosine to the encoder on the pack text "
        f"{cosine['redacted']:.3f}, on the raw text {cosine['raw']:.3f}",
    ]
    return "\n".join(lines) + "\n"


def run(sizes: Sizes) -> list[Figure]:
    files = sorted(DATA.glob("conv-*.json"))[: sizes.conversations]
    if not files:
        raise NotAvailable(f"no LoCoMo conversations in {DATA} (see shared/data/locomo/README.md)")
    with tempfile.TemporaryDirectory(prefix="bench-conversations-") as tmp:
        pack_dir, truth, imported_s, night_s = _night(files, Path(tmp))
        started = time.perf_counter()
        result = _evaluate(pack_dir, truth)
        evaluated_s = time.perf_counter() - started
        semantics = _semantics(Path(tmp) / "home")
        shutil.rmtree(tmp, ignore_errors=True)
    overall = {m: result["recall"][m]["overall"]["all@10"] for m in METHODS}
    bm25 = overall["bm25_raw"]
    common = {
        "conversations": [f.stem for f in files],
        "turns": len(truth["raw"]),
        "import_s": rounded(imported_s),
        "night_s": rounded(night_s),
        "evaluate_s": rounded(evaluated_s),
        **result,
    }
    beats = all(
        result["recall"]["search"][c]["all@10"] >= result["recall"]["bm25_raw"][c]["all@10"]
        for c in CATEGORIES.values()
    )

    def figure(
        method: str, goal: str = "reported", met: bool | None = None, **extra: Any
    ) -> Figure:
        return Figure(
            name=f"evidence recall all@10, `{method}` (categories 1-4, contact = conversation)",
            value=rounded(overall[method]),
            unit="all@10",
            baseline_name="BM25 over the raw turns",
            baseline_value=rounded(bm25),
            ratio=rounded(overall[method] / bm25) if bm25 else None,
            goal=goal,
            goal_met=met,
            details={"per_category": result["recall"][method], **extra},
        )

    latency = result["latency_ms"]
    return [
        figure(
            "search",
            f"≥ BM25 + {GOAL_MARGIN} overall and ≥ BM25 in every category (issue 41)",
            overall["search"] >= bm25 + GOAL_MARGIN and beats,
            table_md=table_md(result),
            **common,
        ),
        figure("memories_for"),
        figure("prompt_context"),
        figure("dense_raw"),
        Figure(
            name="`search` latency p50 (p95 in details), a text query with contact_id",
            value=latency["search"]["p50"],
            unit="ms",
            baseline_name="BM25 over the raw turns (numpy, one index)",
            baseline_value=latency["bm25_raw"]["p50"],
            details={"latency_ms": latency},
        ),
        Figure(
            name="speaker-name mentions left in the pack's texts, share of those in the raw turns",
            value=result["names_left"]["share"],
            unit="share",
            baseline_name="mentions in the raw turns",
            baseline_value=result["names_left"]["raw_mentions"],
            goal="≤ 0.02 (issue 41, SPEC §5 round 3)",
            goal_met=result["names_left"]["share"] <= 0.02,
            details={**result["names_left"], "vector_cosine": result["vector_cosine"]},
        ),
        Figure(
            name="questions whose evidence the pack holds inactive or overruled",
            value=result["either_inactive_or_overruled"],
            unit="share",
            details={"share": result["hidden_share"], "questions": result["hidden_questions"]},
        ),
        Figure(
            name="conflict precision on the hand-labelled LoCoMo conflicts (SPEC §4.4 round 3)",
            value=semantics["conflict_precision"],
            unit="precision",
            goal="≥ 0.9 (issue 41)",
            goal_met=semantics["conflict_precision"] >= 0.9,
            details=semantics,
        ),
        Figure(
            name="pairs of turns sharing a statement cluster that say two different facts (hand "
            "labels), share",
            value=semantics["cluster_pairs_different_share"],
            unit="share",
            baseline_name="pairs sharing a cluster",
            baseline_value=semantics["cluster_pairs"],
            goal="0: a cluster never mixes two different facts (issue 41)",
            goal_met=semantics["cluster_pairs_different_facts"] == 0,
            details=semantics,
        ),
    ]
