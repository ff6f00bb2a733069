"""Statement merges: the default (the learned judgement; a pair with several sentences on a side by
the distance rule), the distance rule with the value guard (the default before) and the distance
rule alone, side by side in one run.

Precision and recall of "these two statements merge" on the STS-B sample (480 pairs people scored,
≥ 4 = same meaning; disjoint from the train file the judgement learned from), on the generator's
planted paraphrases against every other memory it writes about one person, and the consolidation
of statements (pipeline.semantic.consolidate.label_groups, the step the judgement changes) timed
with each rule on the same contacts, interleaved. Every rule keeps consolidation's cannot-link rules
(opposite polarity, other numbers). No MRPC-style set is measured: MRPC itself is under Microsoft
Research's terms (as are STS-B's MSR rows, left out of the sample), and no openly licensed set of
that kind is in shared/.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from bench.common import Figure, Sizes, interleaved, rounded
from bench.sections_paraphrase import SAMPLE, generator_pairs, load_sample, pair_distances

CONTACTS = 200  # contacts of the timed consolidation, each with every statement of one person
# The generator's names measured for the judgement's dependence on the person's name: every 20th
# of the 400 `texts.person` makes.
NAME_INDICES = range(0, 400, 20)


def _scores(merged: np.ndarray, same: np.ndarray) -> dict[str, Any]:
    true = int((merged & same).sum())
    return {
        "precision": rounded(true / max(int(merged.sum()), 1), 4),
        "recall": rounded(true / max(int(same.sum()), 1), 4),
        "merged": int(merged.sum()),
        "true_merges": true,
        "same": int(same.sum()),
    }


RULES = ("judged", "distance", "guarded")


def _decisions(a: pl.Series, b: pl.Series, model: Any) -> dict[str, np.ndarray]:
    """Per pair (a[k], b[k]), merged or not by each of RULES: the learned judgement (the default),
    the distance rule alone (before the value guard), the distance rule with the value guard (the
    default before the judgement)."""
    from pipeline.semantic.consolidate import ConsolidationConfig
    from pipeline.semantic.consolidate.clusters import merge_rule
    from pipeline.semantic.embed import encode, normalise_text
    from pipeline.semantic.judgement import PairTexts, pair_probabilities, shipped

    config = ConsolidationConfig()
    distance, cannot = pair_distances(a, b, model, guard=True)
    texts = pl.concat([a, b])
    vectors = encode(texts.to_frame("t").select(normalise_text(pl.col("t")))["t"], model=model)
    pairs, rows = PairTexts(texts, vectors), np.arange(len(a))
    other_value = pairs.other_value(rows, rows + len(a))
    same = pair_probabilities(pairs, shipped(), merge_rule(config), rows, rows + len(a))
    judged = (same >= config.merge_probability) & (distance <= config.candidate_distance) & ~cannot
    by_distance = (distance <= config.statement_distance) & ~cannot
    return {"judged": judged, "distance": by_distance, "guarded": by_distance & ~other_value}


def _mask_shared_names(a: pl.Series, b: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Each pair with the capitalised words both sides hold (stop words aside: here the people's
    names) written "someone" on both sides: the judgement then sees what is said, not who."""
    import re

    from spacy.lang.en.stop_words import STOP_WORDS

    def names(text: str) -> set[str]:
        return {w for w in re.findall(r"\b[A-Z][a-z]+\b", text) if w.lower() not in STOP_WORDS}

    masked = []
    for x, y in zip(a.to_list(), b.to_list(), strict=True):
        shared = "|".join(sorted(names(x) & names(y)))
        run = rf"\b(?:{shared})\b(?:\s+\b(?:{shared})\b)*"
        masked.append((re.sub(run, "someone", x), re.sub(run, "someone", y)) if shared else (x, y))
    return pl.Series([m[0] for m in masked]), pl.Series([m[1] for m in masked])


def _by_name(model: Any) -> dict[str, Any]:
    """Per generator name: planted pairs merged and other pairs merged by the judgement, as the
    names are, and with the shared name masked on both sides (the same judgement)."""
    rows = []
    for k in NAME_INDICES:
        a, b, same = generator_pairs(k)
        decided = _decisions(a, b, model)
        judged, default = decided["judged"], decided["guarded"]  # default: the rule's figures
        masked = _decisions(*_mask_shared_names(a, b), model)["judged"]
        rows.append(
            {
                "person": k,
                "default_planted_merged": int((default & same).sum()),
                "default_other_merged": int((default & ~same).sum()),
                "planted_merged": int((judged & same).sum()),
                "other_merged": int((judged & ~same).sum()),
                "masked_planted_merged": int((masked & same).sum()),
                "masked_other_merged": int((masked & ~same).sum()),
            }
        )
    frame = pl.DataFrame(rows)
    return {
        "names": len(rows),
        "planted_pairs": int(same.sum()),
        **{f"{c}_min": int(frame[c].min()) for c in frame.columns[1:]},  # type: ignore[arg-type]
        **{f"{c}_max": int(frame[c].max()) for c in frame.columns[1:]},  # type: ignore[arg-type]
        "per_name": rows,
    }


def _members(model: Any) -> tuple[pl.DataFrame, Any]:
    """CONTACTS contacts, each with every statement the generator writes about one person."""
    from pipeline.semantic.conflicts import numbers, polarity, subject
    from pipeline.semantic.embed import encode, normalise_text, text_hashes
    from pipeline.storage.vectors import TextVectors

    a, b, _ = generator_pairs()
    texts = pl.Series("text", list(dict.fromkeys([*a, *b])))
    frame = pl.DataFrame({"text": texts}).with_columns(
        text_hashes(texts.to_frame().select(normalise_text(pl.col("text")))["text"])
    )
    vectors = encode(frame.select(normalise_text(pl.col("text")))["text"], model=model)
    members = (
        pl.DataFrame({"contact_id": [f"c{k:04d}" for k in range(CONTACTS)]})
        .join(frame, how="cross")
        .with_row_index("n")
        .select(
            tenant_id=pl.lit("bench"),
            contact_id="contact_id",
            memory_id=pl.format("m{}", "n"),
            text="text",
            text_hash="text_hash",
            polarity=polarity(pl.col("text")),
            subject_numbers=numbers(subject(pl.col("text"))),
            speaker=pl.lit(None, pl.String),
        )
    )
    return members, TextVectors.from_frame(
        frame.select("text_hash", embedding=pl.Series(vectors.astype(np.float32)))
    )


def _timed(model: Any, fp32: Any, reps: int) -> dict[str, Any]:
    """Seconds of each rule over the same statements; "judged_fp32" is the default (and
    "guarded_fp32" the rule with the guard) as a night runs it on the int8 encoder: the statements
    that could merge re-encoded in fp32 first (no cache, as on a tenant's first night) so that
    every CPU merges alike."""
    from pipeline.semantic.consolidate import ConsolidationConfig, label_groups
    from pipeline.semantic.consolidate.clusters import fp32_reach
    from pipeline.semantic.embed.exact import decision_vectors

    members, vectors = _members(model)
    keys = ["tenant_id", "contact_id"]
    configs = {
        "judged": ConsolidationConfig(statement_judgement=True),
        "distance": ConsolidationConfig(value_guard=False, statement_judgement=False),
        "guarded": ConsolidationConfig(statement_judgement=False),
    }
    near: dict[str, int] = {}

    def run(config: Any, exact: bool = False) -> Any:
        used = vectors
        if exact:
            reach, eligible = fp32_reach(config, vectors)
            used, near["judged" if config.statement_judgement else "guarded"] = decision_vectors(
                members,
                keys,
                vectors,
                reach,
                lambda rows: fp32.encode(rows["text"].to_list(), 128),
                eligible,
            )
        return label_groups(
            members, keys, config.statement_distance, pl.DataFrame(), config, False, used
        )

    runs: dict[str, Callable[[], Any]] = {k: (lambda c=c: run(c)) for k, c in configs.items()}
    runs["guarded_fp32"] = lambda: run(configs["guarded"], exact=True)
    runs["judged_fp32"] = lambda: run(configs["judged"], exact=True)
    timed = interleaved(runs, reps)
    clusters = {k: int(v[2]["cluster"].n_unique()) for k, v in timed.items()}
    return {
        "statements": members.height,
        "contacts": CONTACTS,
        "distinct_texts": int(members["text_hash"].n_unique()),
        "texts_decided_fp32": near,
        "seconds": {k: round(v[0], 3) for k, v in timed.items()},
        "repetitions": {k: v[1] for k, v in timed.items()},
        "clusters": clusters,
    }


def _sample_figures(model: Any, backend: str) -> list[Figure]:
    """Each rule on the STS-B sample, by split: the rule + guard beside the rule alone, and the
    judgement (the default) against the issue's goal."""
    sample = load_sample()
    decided = _decisions(sample["sentence1"], sample["sentence2"], model)
    same = (sample["score"] >= 4.0).to_numpy()
    test = (sample["split"] == "test").to_numpy()
    details = {
        rule: {
            "all": _scores(merged, same),
            "dev": _scores(merged[~test], same[~test]),
            "test": _scores(merged[test], same[test]),
        }
        for rule, merged in decided.items()
    }
    default, judged = details["guarded"]["all"], details["judged"]["all"]
    return [
        Figure(
            name="statement merges by the distance rule 0.15 + value guard on the STS-B sample",
            value=default["precision"],
            unit="precision",
            baseline_name="the distance rule alone",
            baseline_value=details["distance"]["all"]["precision"],
            goal="reported (recall in details)",
            details={"backend": backend, **details},
        ),
        Figure(
            name="statement merges by the learned judgement (the default) on the STS-B sample "
            "(held out)",
            value=judged["recall"],
            unit="recall",
            baseline_name="the distance rule + value guard",
            baseline_value=default["recall"],
            goal="precision ≥ 0.9 with recall ≥ 0.75",
            goal_met=bool(judged["precision"] >= 0.9 and judged["recall"] >= 0.75),
            details={"backend": backend, **details},
        ),
    ]


def run(sizes: Sizes) -> list[Figure]:
    from pipeline.semantic.embed import EmbedConfig, available_backend, load_model

    backend = available_backend(EmbedConfig.backend)
    with tempfile.TemporaryDirectory(prefix="bench-merges-") as export_dir:
        model = load_model(None, backend, export_dir)
        a, b, same = generator_pairs()
        decided = _decisions(a, b, model)
        generator = {rule: _scores(merged, same) for rule, merged in decided.items()}
        fp32 = load_model(None, "onnx", export_dir) if backend == "onnx-int8" else model
        cost = _timed(model, fp32, sizes.reps)
        names = _by_name(model)
        figures = [
            Figure(
                name="statement merges by the distance rule + value guard: the "
                "generator's planted paraphrases vs every other memory it writes about one person",
                value=generator["guarded"]["recall"],
                unit="recall",
                baseline_name="the learned judgement (the default)",
                baseline_value=generator["judged"]["recall"],
                goal="reported (precision in details)",
                details=generator,
            ),
            Figure(
                name="the generator's planted paraphrase pairs the rule + guard merges, fewest over "
                f"{names['names']} generator names (of {names['planted_pairs']})",
                value=names["default_planted_merged_min"],
                unit="pairs",
                baseline_name="the learned judgement, fewest (most in details; with the shared "
                "name masked in details)",
                baseline_value=names["planted_merged_min"],
                goal="reported",
                details=names,
            ),
            Figure(
                name="statement consolidation seconds, the default (the judgement) with the "
                "statements that could merge re-encoded in fp32 (the same merges on every CPU) vs "
                "the rule + guard so (both on int8 vectors alone in details)",
                value=cost["seconds"]["judged_fp32"],
                unit="s",
                baseline_name="the distance rule + value guard, fp32 near a merge",
                baseline_value=cost["seconds"]["guarded_fp32"],
                goal="reported (the added cost per night)",
                details=cost,
            ),
            Figure(
                name="statement consolidation seconds, the distance rule + value guard vs the "
                "distance rule alone (the judgement in details)",
                value=cost["seconds"]["guarded"],
                unit="s",
                baseline_name="the distance rule alone",
                baseline_value=cost["seconds"]["distance"],
                goal="reported (the added cost per night)",
                details=cost,
            ),
        ]
        if SAMPLE.exists():
            figures += _sample_figures(model, backend)
    return figures
