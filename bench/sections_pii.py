"""PII: precision and recall per kind on the labelled corpus (the redactor and the publish guard's
independent detector), and the redaction cost per 1,000 texts — a first run (empty cache) vs a
night that sees the same texts again (every one served by the cache) vs one with 10 % new texts;
and what the NER costs and finds: the same texts and corpus analysed with spaCy's NER left out.

The texts are the generator's own (`pipeline.generate.texts`): support, coaching and scan
requests with people's names, 1.5 % with a planted PII sentence, as the pack stage sees them.
"""

from __future__ import annotations

import importlib
import random
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from bench.common import Figure, Sizes, interleaved, rounded

GOAL_TEXTS = 100_000
NEW_SHARE = 0.10  # an incremental night: this share of the texts is new
NER_TEXTS = 3_000  # texts timed with and without the NER


def texts(n: int, seed: int) -> list[str]:
    from pipeline.generate import texts as bank

    rng = random.Random(seed)
    out = []
    for i in range(n):
        name = bank.person(rng.randrange(400))
        builder = rng.choice((bank.support_texts, bank.coaching_texts, bank.scan_texts))
        text = builder(rng, rng.choice(bank.SKILLS), name)[1]
        if rng.random() < 0.015:
            text += " " + bank.pii_phrase(rng)[0]
        out.append(f"{text} (#{i})" if rng.random() < 0.5 else text)  # half are distinct
    return out


def _corpus_found(rows: list[Any]) -> list[list[tuple[int, int, str]]]:
    from pipeline.pii import detect

    return [[(s.start, s.end, s.kind) for s in spans] for spans in detect([r.text for r in rows])]


def _corpus_figures() -> list[Figure]:
    from pipeline.generate.pii_corpus import GUARD_KINDS, corpus, evaluate
    from pipeline.pii.guard import find_spans

    rows = corpus()
    redactor = evaluate(rows, _corpus_found(rows))
    guard = evaluate(rows, [find_spans(r.text) for r in rows], GUARD_KINDS)
    figures = []
    for kind, row in redactor.items():
        other = guard.get(kind)
        figures.append(
            Figure(
                name=f"pii {kind}: recall (precision in details)",
                value=rounded(float(row["recall"])),
                unit="recall",
                baseline_name="publish guard's independent detector, recall" if other else None,
                baseline_value=rounded(float(other["recall"])) if other else None,
                details={
                    "precision": rounded(float(row["precision"])),
                    "planted": row["planted"],
                    "detected": row["detected"],
                    "guard_precision": rounded(float(other["precision"])) if other else None,
                    "look_alikes": sum(1 for r in rows if not r.values),
                },
            )
        )
    return [*figures, _world_figure()]


def _world_figure() -> Figure:
    """Issue 50: the look-alikes beyond English kept unchanged, and what a text of the
    multilingual corpus (national ids, 13 scripts, obfuscated values) costs to analyse."""
    from pipeline.generate.pii_corpus import LOOK_ALIKES_KEPT, look_alikes_world, world_rows
    from pipeline.pii import analyse

    look_alikes = [r.text for r in look_alikes_world()]
    kept = sum(r == t for t, (r, _) in zip(look_alikes, analyse(look_alikes), strict=True))
    texts = [r.text for r in world_rows()] + look_alikes
    start = time.perf_counter()
    analyse(texts)
    per_text = (time.perf_counter() - start) / len(texts) * 1000
    return Figure(
        name="pii look-alikes beyond English kept unchanged (products, checksummed order "
        "numbers, common words that are names, 12 languages)",
        value=rounded(kept / len(look_alikes)),
        unit="share",
        goal=f">= {LOOK_ALIKES_KEPT}",
        goal_met=kept / len(look_alikes) >= LOOK_ALIKES_KEPT,
        details={
            "look_alikes": len(look_alikes),
            "kept": kept,
            "world_texts": len(texts),
            "analysis_ms_per_world_text": rounded(per_text),
        },
    )


def run(sizes: Sizes) -> list[Figure]:
    from pipeline.pii import analysis_engine
    from pipeline.pii.redactor import RedactionCache, Redactor

    n = sizes.pii_texts
    load_start = time.perf_counter()
    analysis_engine()
    load_s = time.perf_counter() - load_start
    figures = _corpus_figures() + _ner_figures(sizes)

    night = pl.Series("text", texts(n, sizes.seed))
    extra = int(n * NEW_SHARE)
    next_night = pl.concat([night.head(n - extra), pl.Series("text", texts(extra, sizes.seed + 1))])
    with tempfile.TemporaryDirectory() as tmp:
        cache = RedactionCache(Path(tmp) / "pii_cache")
        timings: dict[str, float] = {}
        counts: dict[str, int] = {}
        for label, series in (("first", night), ("cached", night), ("incremental", next_night)):
            redactor = Redactor(b"bench", cache)
            start = time.perf_counter()
            _, found = redactor.series(series)
            redactor.flush()
            timings[label] = time.perf_counter() - start
            counts[label] = redactor.analysed
        distinct = night.n_unique()
    per_1k = {k: v / n * 1000 * 1000 for k, v in timings.items()}  # ms per 1,000 texts
    first_100k_min = timings["first"] / n * GOAL_TEXTS / 60
    common = {"texts": n, "distinct": distinct, "engine_load_s": rounded(load_s)}
    figures += [
        Figure(
            name="pii redaction, first run (empty cache)",
            value=rounded(per_1k["first"]),
            unit="ms / 1k texts",
            details={
                **common,
                "analysed": counts["first"],
                "extrapolated_100k_texts_min": rounded(first_100k_min),
                "found": dict(found),
            },
        ),
        Figure(
            name="pii redaction, same texts again (all cached)",
            value=rounded(per_1k["cached"]),
            unit="ms / 1k texts",
            baseline_name="first run",
            baseline_value=rounded(per_1k["first"]),
            ratio=rounded(per_1k["cached"] / per_1k["first"]),
            details={**common, "analysed": counts["cached"]},
        ),
        Figure(
            name=f"pii redaction, incremental night ({NEW_SHARE:.0%} new texts)",
            value=rounded(per_1k["incremental"]),
            unit="ms / 1k texts",
            baseline_name="first run",
            baseline_value=rounded(per_1k["first"]),
            ratio=rounded(per_1k["incremental"] / per_1k["first"]),
            details={**common, "analysed": counts["incremental"]},
        ),
    ]
    return figures


@contextmanager
def _no_ner() -> Iterator[None]:
    """The redactor's detector with spaCy's NER left out (a what-if, this bench only): every
    recognizer but presidio's SpacyRecognizer, the texts only tokenized."""
    detect = importlib.import_module("pipeline.pii.detect")
    analyzer, _ = detect.analysis_engine()
    registry = analyzer.registry
    kept, docs = registry.recognizers, detect._docs
    registry.recognizers = [r for r in kept if type(r).__name__ != "SpacyRecognizer"]
    detect._docs = lambda nlp, texts, ner: (nlp.make_doc(t) for t in texts)
    try:
        yield
    finally:
        registry.recognizers, detect._docs = kept, docs


def _ner_figures(sizes: Sizes) -> list[Figure]:
    """Issue 17's cost goal needs an incremental night's redaction to add ≤ 20 % to its pack stage:
    how much of a text's analysis is the NER, and what leaving it out would lose."""
    from pipeline.generate.pii_corpus import corpus, evaluate
    from pipeline.pii import analyse

    sample = texts(min(sizes.pii_texts, NER_TEXTS), sizes.seed + 7)

    def without() -> None:
        with _no_ner():
            analyse(sample)

    timed = interleaved(
        {"without": without, "with": lambda: analyse(sample)}, sizes.reps, warmup=True
    )
    per_text = {k: v[0] / len(sample) * 1000 for k, v in timed.items()}  # ms
    rows = corpus()
    recall = evaluate(rows, _corpus_found(rows))
    with _no_ner():
        recall_without = evaluate(rows, _corpus_found(rows))
    kinds = ("person", "location", "address")
    return [
        Figure(
            name="pii analysis per text without spaCy's NER (a what-if: patterns, phone matcher, "
            "name list only)",
            value=rounded(per_text["without"]),
            unit="ms / text",
            baseline_name="the redactor's analysis, with the NER",
            baseline_value=rounded(per_text["with"]),
            ratio=rounded(per_text["without"] / per_text["with"]),
            details={
                "texts": len(sample),
                "reps": [round(t, 3) for t in timed["without"][1]],
                "baseline_reps": [round(t, 3) for t in timed["with"][1]],
                "recall_without_ner": {k: rounded(recall_without[k]["recall"]) for k in kinds},
                "recall_with_ner": {k: rounded(recall[k]["recall"]) for k in kinds},
                "precision_without_ner": {
                    k: rounded(recall_without[k]["precision"]) for k in kinds
                },
            },
        )
    ]
