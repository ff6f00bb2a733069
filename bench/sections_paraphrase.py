"""Merge thresholds against paraphrases judged by people: precision/recall of "distance ≤ t merges".

The sample is 480 sentence pairs of the STS Benchmark (Cer et al., SemEval-2017), scored 0–5 by
crowd raters: a pair scored ≥ 4 ("mostly equivalent, only unimportant details differ") is a
paraphrase, the rest are not. Per split (dev, test): 120 paraphrases and 120 non-paraphrases, the
latter spread over the score bands as STS-B spreads them, so precision reads "of the merges made on
pairs as likely to be paraphrases as not". Genres: news headlines and image captions, not personal
statements: short sentences, but a different domain. The sample is data from outside the project,
kept in shared/ (see README.md there), never in this repository; the section and its test skip
without it. The generator's own case is always measured: its planted paraphrases against every
other memory it writes about one person.

Texts go through the pipeline's own path: `normalise_text`, `encode` with the default backend.
A statement pair merges when its distance is ≤ t and no cannot-link rule of consolidation holds
(opposite polarity, different numbers); requests (same-prompt pairs, interaction clusters) have none.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from bench.common import Figure, Sizes

SAMPLE_ENV = "MEMORYPACK_PARAPHRASE_SAMPLE"
SAMPLE = Path(os.environ.get(SAMPLE_ENV, "/work/shared/data/paraphrase/stsb_sample.tsv"))
PARAPHRASE_SCORE = 4.0
# Thresholds are chosen on this grid: ~240 pairs a split move precision by ~0.5 % a pair, so a
# finer step would fit the sample, not the model.
GRID = tuple(round(0.05 * k, 2) for k in range(1, 13))
# Floors on precision: a statement merge hides one memory behind another (the 0.8); a
# same-prompt pair on two different requests teaches DPO noise, so it needs more.
STATEMENT_FLOOR = 0.8
SAME_PROMPT_FLOOR = 0.95
RECALL_GOAL = 0.7
OLD_STATEMENT_DISTANCE = 0.45  # tuned on the generator's phrasings before this calibration


def load_sample(path: Path = SAMPLE) -> pl.DataFrame:
    """split, dataset, year, sid, score, sentence1, sentence2, attribution (tab-separated)."""
    return pl.read_csv(path, separator="\t", quote_char=None, schema_overrides={"sid": pl.String})


def pair_distances(
    a: pl.Series, b: pl.Series, model: Any, guard: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine distance of each (a[i], b[i]) as the pipeline embeds them, and whether consolidation
    would refuse to merge the pair whatever its distance (`guard`; all False without it)."""
    from pipeline.conflicts import with_subjects
    from pipeline.embed import encode, normalise_text

    def side(texts: pl.Series) -> tuple[np.ndarray, pl.DataFrame]:
        frame = pl.DataFrame({"content": texts})
        return encode(frame.select(normalise_text(pl.col("content")))["content"], model=model), (
            with_subjects(frame)
        )

    (va, sa), (vb, sb) = side(a), side(b)
    distance = 1.0 - np.sum(va.astype(np.float64) * vb, axis=1)
    cannot = (sa["polarity"] != sb["polarity"]) | (sa["subject_numbers"] != sb["subject_numbers"])
    return distance, cannot.to_numpy() & guard


def scores(
    distance: np.ndarray, cannot: np.ndarray, positive: np.ndarray, t: float
) -> dict[str, float]:
    merged = (distance <= t) & ~cannot
    tp, fp = int((merged & positive).sum()), int((merged & ~positive).sum())
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / int(positive.sum())
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "threshold": t,
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "merged": tp + fp,
        "pairs": len(distance),
        "paraphrases": int(positive.sum()),
    }


def by_split(
    sample: pl.DataFrame, distance: np.ndarray, cannot: np.ndarray, t: float
) -> dict[str, dict[str, float]]:
    positive = (sample["score"] >= PARAPHRASE_SCORE).to_numpy()
    return {
        split: scores(distance[rows], cannot[rows], positive[rows], t)
        for split in ("dev", "test")
        for rows in [(sample["split"] == split).to_numpy()]
    }


def calibrate(
    sample: pl.DataFrame, distance: np.ndarray, cannot: np.ndarray, floor: float
) -> float:
    """The rule: the largest grid threshold (the most recall) whose precision is ≥ `floor` on each
    split of the sample."""
    passing = [
        t
        for t in GRID
        if all(s["precision"] >= floor for s in by_split(sample, distance, cannot, t).values())
    ]
    return max(passing, default=GRID[0])


def generator_pairs() -> tuple[pl.Series, pl.Series, np.ndarray]:
    """Every pair of the generator's statements about one person: its planted paraphrase groups
    (positives within a group) and every other memory it can write about that person."""
    from pipeline.generate.cases import CONFLICTS, PARAPHRASES
    from pipeline.generate.texts import MEMORY_BANK, TEMPORARY_BANK, person

    name, other = person(3), person(10)
    groups = [[t.format(n=name) for t in phrasings] for _, phrasings in PARAPHRASES]
    others = [
        *(t.format(n=name, m=other) for bank in MEMORY_BANK.values() for t in bank),
        *(t.format(n=name) for t in TEMPORARY_BANK),
        *(text.format(n=name) for case in CONFLICTS for _, text in case[2:4]),
    ]
    texts = list(dict.fromkeys([*itertools.chain(*groups), *others]))
    group = {t: k for k, g in enumerate(groups) for t in g}
    a, b = zip(*itertools.combinations(texts, 2), strict=True)
    positive = np.array(
        [x in group and group[x] == group.get(y) for x, y in zip(a, b, strict=True)]
    )
    return pl.Series(a), pl.Series(b), positive


def _f1_figure(
    name: str, new: Any, old: Any, goal: str, met: bool | None, **details: Any
) -> Figure:
    """F1 at the configured threshold beside F1 at the old one (the test split for the sample)."""
    return Figure(
        name=name,
        value=new.get("test", new)["f1"],
        unit="F1",
        baseline_name=f"F1 at the old statement threshold {OLD_STATEMENT_DISTANCE}",
        baseline_value=old.get("test", old)["f1"],
        goal=goal,
        goal_met=met,
        details={**details, "chosen": new, "old": old},
    )


def run(sizes: Sizes) -> list[Figure]:
    from pipeline.consolidate import ConsolidationConfig
    from pipeline.embed import EmbedConfig, available_backend, load_model
    from pipeline.pairs import PairConfig

    statement_t = ConsolidationConfig().statement_distance
    interaction_t = ConsolidationConfig().interaction_distance
    same_prompt_t = round(1.0 - PairConfig().similarity_threshold, 4)
    backend = available_backend(EmbedConfig.backend)
    common = {"backend": backend, "grid": list(GRID), "paraphrase_score": PARAPHRASE_SCORE}
    with tempfile.TemporaryDirectory(prefix="bench-paraphrase-") as export_dir:
        model = load_model(None, backend, export_dir)
        a, b, positive = generator_pairs()
        distance, cannot = pair_distances(a, b, model, guard=True)
        figures = [
            _f1_figure(
                f"statement merges at distance ≤ {statement_t}: the generator's planted "
                "paraphrases vs every other memory it writes about one person",
                scores(distance, cannot, positive, statement_t),
                scores(distance, cannot, positive, OLD_STATEMENT_DISTANCE),
                "reported (each planted group merges: tests/test_end_to_end.py)",
                None,
                **common,
            )
        ]
        if not SAMPLE.exists():
            reason = f"{SAMPLE} not found (set {SAMPLE_ENV})"
            return [*figures, Figure("STS-B sample", None, "F1", details={"missing": reason})]
        sample = load_sample()
        statement = pair_distances(sample["sentence1"], sample["sentence2"], model, guard=True)
        request = pair_distances(sample["sentence1"], sample["sentence2"], model, guard=False)
    rule = {
        "statement_distance": calibrate(sample, *statement, STATEMENT_FLOOR),
        "same_prompt_distance": calibrate(sample, *request, SAME_PROMPT_FLOOR),
    }
    common = {**common, "sample": str(SAMPLE), "pairs": sample.height, "rule_picks": rule}
    chosen = by_split(sample, *statement, statement_t)
    same_prompt = by_split(sample, *request, same_prompt_t)
    interaction = by_split(sample, *request, interaction_t)
    return [
        *figures,
        _f1_figure(
            f"statement merges at distance ≤ {statement_t} on STS-B pairs scored by people",
            chosen,
            by_split(sample, *statement, OLD_STATEMENT_DISTANCE),
            f"recall ≥ {RECALL_GOAL} at precision ≥ {STATEMENT_FLOOR} on each split",
            all(
                s["precision"] >= STATEMENT_FLOOR and s["recall"] >= RECALL_GOAL
                for s in chosen.values()
            ),
            **common,
        ),
        Figure(
            name=f"same-prompt pairs at cosine ≥ {1 - same_prompt_t:.2f} on STS-B pairs (test split)",
            value=same_prompt["test"]["precision"],
            unit="precision",
            goal=f"precision ≥ {SAME_PROMPT_FLOOR} on each split",
            goal_met=all(s["precision"] >= SAME_PROMPT_FLOOR for s in same_prompt.values()),
            details={**common, "chosen": same_prompt},
        ),
        Figure(
            name=f"interaction merges at distance ≤ {interaction_t} on STS-B pairs (test split)",
            value=interaction["test"]["precision"],
            unit="precision",
            goal="reported (no goal)",
            details={**common, "chosen": interaction},
        ),
    ]
