"""Time the DPO stage (SFT + TRL DPO + eval) at the default policy config on synthetic or OASST pairs.

    .venv/bin/python bench/dpo_scale.py --n 10000          # synthetic planted pairs
    .venv/bin/python bench/dpo_scale.py --oasst FILE       # ranked siblings of an OASST export
Prints one JSON line: pairs, train/eval sizes, wall seconds, eval accuracy and margin.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline import contracts
from pipeline.dpo import DPOPolicyConfig, train_policy
from pipeline.generate.preference import planted_mined_pairs
from pipeline.pairs import finalize_pairs, ranked_pairs


def synthetic_pairs(n: int, seed: int = 0) -> pl.DataFrame:
    """Polite, concise answers ≻ rude, rambling ones on the same topic (a consistent pattern)."""
    return finalize_pairs(planted_mined_pairs(n, seed, tenant="bench"))


def oasst_pairs(path: Path) -> pl.DataFrame:
    """Ranked assistant siblings of an OASST message-tree export."""
    rows: list[dict[str, Any]] = []

    def walk(node: dict[str, Any]) -> None:
        for reply in node.get("replies", []):
            if reply.get("role") == "assistant" and reply.get("rank") is not None:
                rows.append(
                    {
                        "tenant_id": "oasst",
                        "event_id": reply["message_id"],
                        "input": node["text"],
                        "output": reply["text"],
                        "metadata": json.dumps(
                            {"rank": reply["rank"], "parent_id": reply["parent_id"]}
                        ),
                    }
                )
            walk(reply)

    with path.open() as handle:
        for line in handle:
            walk(json.loads(line)["prompt"])
    base = {c: None for c in contracts.INTERACTION_COLUMNS}
    inter = pl.DataFrame([{**base, **r} for r in rows], schema=contracts.INTERACTION_SCHEMA)
    return finalize_pairs(ranked_pairs(inter))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="synthetic pairs")
    parser.add_argument("--oasst", type=Path, default=None, help="OASST tree export instead")
    parser.add_argument("--epochs", type=float, default=DPOPolicyConfig.epochs)
    args = parser.parse_args()
    pairs = oasst_pairs(args.oasst) if args.oasst else synthetic_pairs(args.n)
    train = pairs.filter(pl.col("split") == "train")
    evals = pairs.filter(pl.col("split") == "eval")
    sft = train.select("tenant_id", "prompt", pl.col("chosen").alias("completion"))
    config = DPOPolicyConfig(epochs=args.epochs)
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
                "eval_accuracy": run.eval_accuracy,
                "eval_margin": run.eval_margin,
                "config": {
                    "n_layer": config.n_layer,
                    "n_embd": config.n_embd,
                    "epochs": config.epochs,
                    "max_length": config.max_length,
                },
            }
        )
    )


if __name__ == "__main__":
    main()
