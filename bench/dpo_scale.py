"""Time the DPO stage (SFT + TRL DPO + eval) at the default policy config on synthetic or OASST pairs.

    .venv/bin/python bench/dpo_scale.py --n 10000          # synthetic planted pairs
    .venv/bin/python bench/dpo_scale.py --oasst FILE       # ranked siblings of an OASST export
Prints one JSON line: pairs, train/eval sizes, wall seconds, eval accuracy (95 % interval) beside
the reference model's and the length rule's, and the margin. OASST pairs are split by message tree.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.generate.preference import planted_mined_pairs
from pipeline.ingest.folder import ingest_folder, typed_tables
from pipeline.ingest.importers import import_oasst
from pipeline.preference.dpo import DPOPolicyConfig, train_policy
from pipeline.preference.pairs import (
    SCORE_SCHEMA,
    PairConfig,
    assign_split,
    finalize_pairs,
    mine_pairs,
)

OASST_SAMPLE = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "oasst" / "en_100_tree.jsonl"
)
OASST_DAY = date(2023, 2, 5)


def synthetic_pairs(n: int, seed: int = 0) -> pl.DataFrame:
    """Polite, concise answers ≻ rude, rambling ones on the same topic (a consistent pattern)."""
    return finalize_pairs(planted_mined_pairs(n, seed, tenant="bench"))


def oasst_pairs(path: Path, eval_fraction: float = PairConfig.eval_fraction) -> pl.DataFrame:
    """Ranked assistant siblings of an OASST message-tree export, imported and mined as the product
    does (`import_oasst` → ingest → `mine_pairs`: ranked siblings), then split by message tree: a conversation's
    turns share context, so no tree has pairs on both sides (`tree_id` is kept as a column)."""
    with tempfile.TemporaryDirectory(prefix="bench-oasst-") as tmp:
        import_oasst(path, Path(tmp), load_date=OASST_DAY)
        events = ingest_folder(Path(tmp) / OASST_DAY.isoformat(), OASST_DAY).events
    typed = typed_tables(events.lazy())
    interactions = typed["interactions"]
    trees = interactions.select(
        pl.col("event_id").alias("chosen_id"),
        pl.col("metadata").str.json_path_match("$.tree_id").alias("tree_id"),
    )
    # ranked siblings only: no corrections, no scores
    pairs = mine_pairs(interactions, typed["feedback"].clear(), pl.DataFrame(schema=SCORE_SCHEMA))
    pairs = pairs.join(trees, on="chosen_id", how="left")
    # The product's split rule (a salted hash bucket per group), grouped by tree, not by prompt.
    by_tree = assign_split(
        pairs.select(pl.col("tree_id").alias("prompt")), PairConfig(eval_fraction=eval_fraction)
    )
    return pairs.with_columns(by_tree["split"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="synthetic pairs")
    parser.add_argument("--oasst", type=Path, default=None, help="OASST tree export instead")
    parser.add_argument("--epochs", type=float, default=DPOPolicyConfig.num_train_epochs)
    args = parser.parse_args()
    pairs = oasst_pairs(args.oasst) if args.oasst else synthetic_pairs(args.n)
    train = pairs.filter(pl.col("split") == "train")
    evals = pairs.filter(pl.col("split") == "eval")
    sft = train.select("tenant_id", "prompt", pl.col("chosen").alias("completion"))
    config = DPOPolicyConfig(num_train_epochs=args.epochs)
    with tempfile.TemporaryDirectory() as models:
        started = time.perf_counter()
        run = train_policy(pairs["tenant_id"][0], train, evals, sft, config, models)
        wall = time.perf_counter() - started
    print(
        json.dumps(
            {
                "source": "oasst" if args.oasst else "synthetic",
                "pairs": pairs.height,
                "n_train": run.n_train,
                "n_eval": run.n_eval,
                "wall_seconds": round(wall, 1),
                "steps": run.steps,
                "train_loss": run.train_loss,
                "sft_loss": run.sft_loss,
                **{
                    k: getattr(run, k)
                    for k in (
                        "eval_accuracy",
                        "eval_accuracy_low",
                        "eval_accuracy_high",
                        "reference_accuracy",
                        "length_rule_accuracy",
                        "verdict",
                        "eval_margin",
                    )
                },
                "config": {
                    "n_layer": config.n_layer,
                    "n_embd": config.n_embd,
                    "epochs": config.num_train_epochs,
                    "max_length": config.max_length,
                },
            }
        )
    )


if __name__ == "__main__":
    main()
