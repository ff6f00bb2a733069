"""Training the merge judgement (`judgement.json`) on pairs people scored, reproducibly:
`python -m pipeline.semantic.training` reads ../shared/data/paraphrase/stsb_train.tsv."""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.semantic.judgement import FEATURES, MODEL_FILE, Judgement, PairTexts

# Beside the checkout (CI clones with shared/ beside it), never in it.
TRAIN_FILE = (
    Path(__file__).resolve().parents[3] / "shared" / "data" / "paraphrase" / "stsb_train.tsv"
)
# STS: 4 = "mostly equivalent, some unimportant details differ", 5 = "completely equivalent".
SAME_SCORE = 4.0
# sklearn's default strength; 0.1 and 10 gave the same recall at the same precision in 5-fold
# cross-validation on the train file (0.60-0.61 at a balanced precision of 0.9).
REGULARISATION = 1.0


def read_pairs(path: Path) -> pl.DataFrame:
    """An STS Benchmark TSV (stsb_train.tsv, stsb_sample.tsv): score, sentence1, sentence2, …"""
    return pl.read_csv(path, separator="\t", quote_char=None, schema_overrides={"sid": pl.String})


def pair_vectors(pairs: pl.DataFrame, model: Any) -> tuple[np.ndarray, np.ndarray]:
    """Both sentences' vectors, as the pipeline embeds a statement (normalised text, `encode`)."""
    from pipeline.semantic.embed import encode, normalise_text

    return tuple(  # type: ignore[return-value]
        encode(pairs.select(normalise_text(pl.col(c)))[c], model=model)
        for c in ("sentence1", "sentence2")
    )


def labelled_features(
    pairs: pl.DataFrame, a: np.ndarray, b: np.ndarray
) -> tuple[np.ndarray, np.ndarray, PairTexts]:
    """(pairs × FEATURES), same (score ≥ SAME_SCORE), and the texts (rows 0..n-1 the first
    sentences, n..2n-1 the second)."""
    n = pairs.height
    texts = PairTexts(pl.concat([pairs["sentence1"], pairs["sentence2"]]), np.vstack([a, b]))
    rows = np.arange(n)
    return texts.features(rows, rows + n), (pairs["score"] >= SAME_SCORE).to_numpy(), texts


def fit(features: np.ndarray, same: np.ndarray) -> tuple[np.ndarray, float]:
    """Class-balanced L2 logistic regression (deterministic: lbfgs, no sampling)."""
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=REGULARISATION, class_weight="balanced", max_iter=10_000)
    model.fit(features, same)
    return model.coef_[0].astype(np.float64), float(model.intercept_[0])


def train(path: Path = TRAIN_FILE, model: Any = None) -> Judgement:
    """The judgement trained on the pairs of `path`, with where it came from."""
    from pipeline.semantic.embed import EmbedConfig, load_model, model_name

    model = model if model is not None else load_model(None, EmbedConfig.backend)
    pairs = read_pairs(path)
    features, same, _ = labelled_features(pairs, *pair_vectors(pairs, model))
    coefficients, intercept = fit(features, same)
    source = {
        "features": list(FEATURES),
        "coefficients": [round(float(c), 6) for c in coefficients],
        "intercept": round(intercept, 6),
        "trained_on": {
            "file": path.name,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "pairs": pairs.height,
            "same": int(same.sum()),
            "same_score": SAME_SCORE,
        },
        "encoder": model_name(None, getattr(model, "backend", "torch")),
        "fit": {
            "model": "LogisticRegression",
            "C": REGULARISATION,
            "class_weight": "balanced",
            "scikit-learn": importlib.metadata.version("scikit-learn"),
        },
    }
    return Judgement(np.round(coefficients, 6), round(intercept, 6), source)


def write(judgement: Judgement, path: Path = MODEL_FILE) -> None:
    path.write_text(json.dumps(judgement.source, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", type=Path, default=TRAIN_FILE, help="an STS-B TSV")
    parser.add_argument("--out", type=Path, default=MODEL_FILE)
    args = parser.parse_args(argv)
    if not args.train.exists():
        raise SystemExit(f"memorypack: no training pairs at {args.train}")
    judgement = train(args.train)
    write(judgement, args.out)
    print(f"wrote {args.out}: {judgement.source['trained_on']}")


if __name__ == "__main__":
    main()
