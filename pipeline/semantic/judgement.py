"""Whether two statements say the same thing: a pair judgement learned from people's labels (STS
Benchmark pairs, score ≥ 4 of 5 = same meaning) on features of the frozen encoder and the words,
and the rule that one subject with another value is never one statement (SPEC §4.4 round 4)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from scipy.sparse import csr_matrix

from pipeline.semantic.values import CLASSES, mismatches, shared_names, value_matrix
from pipeline.semantic.wording import FUNCTION_WORDS, subject_words, word_overlap

# The judgement ships as this committed file (26 numbers and where they came from): a machine
# never trains or fetches anything at run time, and the shared data (never in the repository) is
# needed only to re-make it: `python -m pipeline.semantic.training` writes it from
# ../shared/data/paraphrase/stsb_train.tsv, and tests/test_merge_judgement.py (CI has shared/ beside
# the clone) trains it again and compares, to within this CPU's encoder numerics.
MODEL_FILE = Path(__file__).with_name("judgement.json")
FEATURES = (
    "cosine",
    "cosine_squared",
    "word_overlap",
    "log_unshared_min",
    "log_unshared_max",
    "log_shared_names",
    *(f"other_{c}" for c in CLASSES),
    *(f"extra_{c}" for c in CLASSES),
)
# "Same subject, another value": a pair naming two values of one of these never merges, whatever
# the judgement says (a conflict candidate, SPEC §4.4). People scored 0 of the 768 train pairs
# they called the same meaning with two values of these (and 7 with two numbers — "$1.0 bn" /
# "$1 billion", "2-2" / "2": unit words the number rule keeps apart, as it always has).
NEVER_MERGE = ("number", "weekday", "month", "daypart", "period", "channel", "opposite")
# Places, people, colours and genders are a value when the rest is one statement: the pair differs
# in at most this many other words a side ("lives in Lisbon" / "lives in Porto"); beyond it the
# names may be two ways to say one thing ("Tel Aviv" / "Israel"), which the judgement weighs.
SUBSTITUTED = ("proper", "colour", "gender")
MAX_OTHER_WORDS = 1
# Where a sentence ends and another begins: . ! or ? (closing quotes or brackets), space, then a
# capital, opening quote or bracket. The judgement learned from single sentences (every STS-B
# train pair is one caption or one headline a side) and reads a text with more as if it were one:
# a chat turn that adds a fact to another ("Thanks! … Also, I'm off to Paris next week") passes
# it. So a pair with more than one sentence on a side is decided by the distance rule instead
# (`pair_probabilities`).
SENTENCE_BREAK = r"[.!?]+[\"')\]]*\s+[\"'(\[]?[A-Z]"


FUNCTION_ONLY = rf"^(?:{FUNCTION_WORDS})$"
STEM = 5
PAIR_CHUNK = 8_192
OTHER = FEATURES.index(f"other_{CLASSES[0]}")


@dataclass(frozen=True)
class Judgement:
    """A logistic regression over FEATURES: P(same statement) = σ(intercept + coefficients · x),
    its probabilities those of a class-balanced fit (even odds of same and different)."""

    coefficients: np.ndarray
    intercept: float
    source: dict[str, Any]

    @classmethod
    def from_file(cls, path: Path = MODEL_FILE) -> Judgement:
        data = json.loads(path.read_text(encoding="utf-8"))
        if list(data["features"]) != list(FEATURES):
            raise ValueError(f"{path} was trained on other features: train it again")
        return cls(np.array(data["coefficients"], np.float64), float(data["intercept"]), data)

    @property
    def fingerprint(self) -> str:
        """Which judgement this is: last night's clusters are reused only under the same one."""
        return hashlib.sha256(json.dumps(self.source, sort_keys=True).encode()).hexdigest()[:16]

    def probability(self, features: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(features @ self.coefficients + self.intercept)))


@lru_cache(maxsize=1)
def shipped() -> Judgement:
    return Judgement.from_file()


class PairTexts:
    """What the features read of each text once (its words, its values), by row."""

    def __init__(self, texts: pl.Series, vectors: np.ndarray) -> None:
        plain = texts.fill_null("").str.to_lowercase().str.replace_all(r"[^\w\s]", " ")
        plain = plain.str.replace_all(r"\s+", " ").str.strip_chars()
        # A word's first letters stand for it, so that inflections count as one word ("bullet" /
        # "bulleted", "meeting" / "meetings", "call" / "calls"); function words are dropped first.
        self.words: csr_matrix = subject_words(
            plain.str.split(" ")
            .list.eval(pl.element().filter(~pl.element().str.contains(FUNCTION_ONLY)))
            .list.eval(pl.element().str.slice(0, STEM))
            .list.join(" ")
        )
        self.values = value_matrix(texts)
        self.sentences = (texts.fill_null("").str.count_matches(SENTENCE_BREAK) + 1).to_numpy()
        self.texts, self.vectors = texts, vectors

    def cosines(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """The vectors' cosines of the row pairs, PAIR_CHUNK pairs at a time (never all the
        pairs' vectors gathered at once: 330k pairs of 384 floats would be 1 GB)."""
        cosine = np.empty(len(i))
        for begin in range(0, len(i), PAIR_CHUNK):
            a, b = i[begin : begin + PAIR_CHUNK], j[begin : begin + PAIR_CHUNK]
            cosine[begin : begin + len(a)] = np.einsum("ij,ij->i", self.vectors[a], self.vectors[b])
        return cosine

    def features(
        self, i: np.ndarray, j: np.ndarray, cosine: np.ndarray | None = None
    ) -> np.ndarray:
        """(pairs × FEATURES) for the row pairs (i[k], j[k]); `cosine`: their vectors' cosines
        when the caller has them (the candidate search does)."""
        cosine = self.cosines(i, j) if cosine is None else cosine.astype(np.float64)
        shared = np.asarray(self.words[i].multiply(self.words[j]).sum(axis=1)).ravel()
        sizes = np.asarray(self.words.sum(axis=1)).ravel()
        only_i, only_j = sizes[i] - shared, sizes[j] - shared
        other, extra = mismatches(self.values, i, j)
        names = shared_names(self.values, i, j)
        return np.column_stack(
            [
                cosine,
                cosine**2,
                word_overlap(self.words, i, j),
                np.log1p(np.minimum(only_i, only_j)),
                np.log1p(np.maximum(only_i, only_j)),
                np.log1p(names),
                other,
                extra,
            ]
        ).astype(np.float64)

    def other_value(
        self, i: np.ndarray, j: np.ndarray, features: np.ndarray | None = None
    ) -> np.ndarray:
        """Pairs that name another value on one subject (never one statement); `features`: the
        pairs' FEATURES when the caller has them (else only the values are compared)."""
        other = (
            features[:, OTHER : OTHER + len(CLASSES)]
            if features is not None
            else mismatches(self.values, i, j)[0]
        ) > 0
        never = other[:, [CLASSES.index(c) for c in NEVER_MERGE]].any(axis=1)
        substituted = other[:, [CLASSES.index(c) for c in SUBSTITUTED]].any(axis=1)
        shared = np.asarray(self.words[i].multiply(self.words[j]).sum(axis=1)).ravel()
        sizes = np.asarray(self.words.sum(axis=1)).ravel()
        few = np.maximum(sizes[i] - shared, sizes[j] - shared) <= MAX_OTHER_WORDS + 1
        return never | (substituted & few)


@dataclass(frozen=True)
class MergeRule:
    """Where pairs merge: P(same) ≥ `probability`; a pair with more than one sentence on a side
    merges by the distance rule instead, within cosine distance `distance`."""

    probability: float
    distance: float


def pair_probabilities(
    texts: PairTexts,
    judgement: Judgement,
    rule: MergeRule,
    i: np.ndarray,
    j: np.ndarray,
    cosine: np.ndarray | None = None,
) -> np.ndarray:
    """P(same statement) of the row pairs (i[k], j[k]): 0 for one subject with another value.

    A pair with more than one sentence on a side gets the distance rule's decision, in the rule's
    own order: P falls linearly with the cosine distance and reaches `rule.probability` at
    `rule.distance`, so complete linkage over these P merges such pairs as the rule would."""
    if not len(i):
        return np.zeros(0)
    features = texts.features(i, j, cosine)
    same = judgement.probability(features)
    several = np.maximum(texts.sentences[i], texts.sentences[j]) > 1
    distance = 1.0 - features[several, 0]
    same[several] = np.clip(1.0 - distance * (1.0 - rule.probability) / rule.distance, 0.0, 1.0)
    same[texts.other_value(i, j, features)] = 0.0
    return same


def judged_distances(
    texts: PairTexts,
    judgement: Judgement,
    rule: MergeRule,
    candidate_distance: float,
    rows: np.ndarray,
) -> np.ndarray:
    """(k × k) 1 − P(same statement) between the texts of `rows`: the judgement on the pairs the
    embedding proposes (cosine distance ≤ `candidate_distance`), 1 for every other pair and for
    one subject with another value."""
    vectors = texts.vectors[rows]
    distance = np.ones((len(rows), len(rows)))
    similarity = vectors @ vectors.T
    i, j = np.nonzero(np.triu(similarity >= 1.0 - candidate_distance, k=1))
    same = pair_probabilities(texts, judgement, rule, rows[i], rows[j], similarity[i, j])
    distance[i, j] = distance[j, i] = 1.0 - same
    np.fill_diagonal(distance, 0.0)
    return distance
