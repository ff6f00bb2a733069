"""A tiny lake with every pack input (two tenants, planted PII), shared by the pack tests."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.config import Paths
from pipeline.pii import PLACEHOLDER
from pipeline.semantic.embed.texts import normalise_text, text_hashes
from pipeline.storage.lake import Lake
from pipeline.storage.vectors import EmbeddingCache
from tests.tenant_runs import declared

RUN_DATE = "2026-11-07"
AS_OF = datetime(2026, 11, 8, tzinfo=UTC)
DIM = 8
TS = pl.Datetime("us", "UTC")
# Values that must never appear in any pack file.
PLANTED = {
    "email": "jane.doe@example.com",
    "phone": "+1 415 555 0132",
    "card": "4111 1111 1111 1111",
    "iban": "DE89 3704 0044 0532 0130 00",
}


def _ts(day: int, hour: int = 10) -> datetime:
    return datetime(2026, 11, 1, hour, tzinfo=UTC) + timedelta(days=day)


def _vector(seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=DIM).astype(np.float32)
    return [float(x) for x in v / np.linalg.norm(v)]


def _redacted(text: str) -> str:
    for kind, value in PLANTED.items():
        text = text.replace(value, PLACEHOLDER[kind])
    return text


def tenant_frames(tenant: str) -> dict[str, pl.DataFrame]:
    """Rows of every pack input for one tenant; ids are prefixed by the tenant."""
    p = tenant[:1]
    interactions = pl.DataFrame(
        {
            "tenant_id": [tenant] * 4,
            "event_id": [f"{p}-i{i}" for i in range(4)],
            "ts": [_ts(i) for i in range(4)],
            "load_date": [date(2026, 11, 1) + timedelta(days=i) for i in range(4)],
            "contact_id": ["c1", "c1", "c2", None],
            "system": ["support", "support", "support", "framescan"],
            "kind": ["support_reply", "support_reply", "support_reply", "framescan_report"],
            "skill_id": [
                "concise_response",
                "concise_response",
                "empathy_direct",
                "detailed_explanation",
            ],
            "user_id": ["u1", "u1", "u2", "u1"],
            "input": [
                f"Where is my order? mail me at {PLANTED['email']}",
                "Can I change my delivery address?",
                f"Call me on {PLANTED['phone']} about billing",
                "Scan this sales call",
            ],
            "output": [
                "It ships tomorrow.",
                "Yes, from your account page.",
                f"We refunded card {PLANTED['card']}.",
                "Frame score 72/100.",
            ],
            "tags": [["orders"], ["orders", "address"], ["billing"], ["sales"]],
            "importance": [0.6, 0.5, 0.9, 0.7],
            "category": [None, None, None, None],
        },
        schema_overrides={"ts": TS, "category": pl.String},
    )
    statements = pl.DataFrame(
        {
            "tenant_id": [tenant] * 3,
            "event_id": [f"{p}-m{i}" for i in range(3)],
            "ts": [_ts(0), _ts(1), _ts(2)],
            "load_date": [date(2026, 11, 1), date(2026, 11, 2), date(2026, 11, 3)],
            "contact_id": ["c1", "c1", "c2"],
            "memory_type": ["explicit_instruction", "inferred_pattern", "single_inference"],
            "content": [
                "Always email, never call",
                f"Pays from IBAN {PLANTED['iban']}",
                "Seems to dislike long answers",
            ],
            "category": ["communication", "money", "preferences"],
            "impact_level": ["high", "medium", "low"],
            "confidence": [None, None, 0.4],
            "tags": [["contact"], ["money"], ["style"]],
        },
        schema_overrides={"ts": TS, "confidence": pl.Float64},
    )
    ids = interactions["event_id"].to_list() + statements["event_id"].to_list()
    types = ["interaction"] * 4 + statements["memory_type"].to_list()
    decay = pl.DataFrame(
        {
            "as_of": [AS_OF] * 7,
            "tenant_id": [tenant] * 7,
            "memory_id": ids,
            "memory_kind": ["interaction"] * 4 + ["statement"] * 3,
            "memory_type": types,
            "contact_id": ["c1", "c1", "c2", None, "c1", "c1", "c2"],
            "confidence": [0.55, 0.5, 0.8, 0.65, 1.0, 0.58, 0.1],
            "status": ["active"] * 6 + ["archived"],
            "needs_reconfirmation": [False] * 5 + [True, False],
            "stale": [False] * 7,
            "last_confirmed": [_ts(i) for i in range(4)] + [_ts(0), _ts(1), _ts(2)],
        },
        schema_overrides={"as_of": TS, "last_confirmed": TS},
    )
    scores = pl.DataFrame(
        {
            "tenant_id": [tenant] * 7,
            "memory_id": ids,
            "memory_kind": ["interaction"] * 4 + ["statement"] * 3,
            "n_feedback": [3, 1, 0, 0, 0, 0, 0],
            "n_positive": [3, 0, 0, 0, 0, 0, 0],
            "n_negative": [0, 1, 0, 0, 0, 0, 0],
            "quality_score": [0.6, -0.2, 0.0, 0.0, 0.0, 0.0, 0.0],
            "quality_lower": [0.3, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0],
            "has_correction": [False] * 7,
            "reputation": [1.1, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0],
        }
    )
    # Memories are embedded by their redacted text (SPEC §5 round 3): the cache holds each vector
    # under the key of that text, the same text's the same for every tenant.
    texts = interactions["input"].to_list() + statements["content"].to_list()
    redacted = pl.DataFrame({"t": [_redacted(t) for t in texts]})
    keys = text_hashes(redacted.select(normalise_text(pl.col("t")))["t"])
    embeddings = pl.DataFrame(
        {
            "tenant_id": [tenant] * 7,
            "memory_id": ids,
            "memory_kind": ["interaction"] * 4 + ["statement"] * 3,
            "text_hash": keys,
            "embedding": [_vector(i) for i in range(7)],
            "model": ["all-MiniLM-L6-v2+onnx-int8.v2"] * 7,
        },
        schema_overrides={"embedding": pl.Array(pl.Float32, DIM)},
    )
    summaries = pl.DataFrame(
        {
            "tenant_id": [tenant],
            "scope": ["statement"],
            "contact_id": ["c1"],
            "system": [None],
            "kind": [None],
            "cluster_id": [f"{p}-k1"],
            "summary": [f"Prefers email ({PLANTED['email']})"],
            "representative_id": [f"{p}-m0"],
            "member_ids": [[f"{p}-m0"]],
            "n_members": [1],
            "confidence": [1.0],
            "tags": [["contact"]],
            "first_seen": [_ts(0)],
            "last_seen": [_ts(0)],
        },
        schema_overrides={
            "system": pl.String,
            "kind": pl.String,
            "first_seen": TS,
            "last_seen": TS,
        },
    )
    conflicts = pl.DataFrame(
        {
            "tenant_id": [tenant],
            "contact_id": ["c1"],
            "memory_id_a": [f"{p}-m0"],
            "memory_id_b": [f"{p}-m1"],
            "preferred_id": [f"{p}-m0"],
            "reason": ["always_vs_never"],
            "subject": ["contact channel"],
        }
    )
    few_shot = pl.DataFrame(
        {
            "tenant_id": [tenant] * 3,
            "system": ["support", "support", "framescan"],
            "kind": ["support_reply", "support_reply", "framescan_report"],
            "skill_id": ["concise_response", "empathy_direct", None],
            "rank": [1, 1, 1],
            "memory_id": [f"{p}-i0", f"{p}-i2", f"{p}-i3"],
            "input": interactions["input"].to_list()[0:1] + interactions["input"].to_list()[2:4],
            "output": [
                "It ships tomorrow.",
                f"Refunded to {PLANTED['card']}",
                "Frame score 72/100.",
            ],
            "is_corrected": [False, True, False],
            "quality_lower": [0.3, 0.2, 0.0],
            "n_feedback": [3, 0, 0],
            "ts": [_ts(0), _ts(2), _ts(3)],
            "why": ["top quality", "corrected", "only example"],
        },
        schema_overrides={"ts": TS, "skill_id": pl.String},
    )
    skills = pl.DataFrame(
        {
            "tenant_id": [tenant] * 3,
            "user_id": ["u1", "u1", "u2"],
            "skill_id": ["concise_response", "detailed_explanation", "empathy_direct"],
            "usage": [10, 4, 2],
            "n_positive": [8, 1, 1],
            "n_negative": [1, 2, 0],
            "positive_share": [0.8, 0.25, 0.5],
            "ema_confidence": [0.8, 0.4, 0.6],
            "mean_reward": [0.5, -0.2, 0.1],
            "last_used_at": [_ts(3)] * 3,
        },
        schema_overrides={"last_used_at": TS},
    )
    preferences = pl.DataFrame(
        {
            "tenant_id": [tenant] * 2,
            "user_id": ["u1", "u2"],
            "preference_vector": [_vector(100), _vector(101)],
            "n_updates": [5, 2],
        },
        schema_overrides={"preference_vector": pl.List(pl.Float32)},
    )
    skill_vectors = pl.DataFrame(
        {
            "tenant_id": [tenant] * 3,
            "skill_id": ["concise_response", "detailed_explanation", "empathy_direct"],
            "vector": [_vector(200), _vector(100), _vector(202)],
            "n_interactions": [2, 1, 1],
        },
        schema_overrides={"vector": pl.List(pl.Float32)},
    )
    templates = pl.DataFrame(
        {
            "tenant_id": [tenant] * 3,
            "skill_id": ["concise_response", "concise_response", "empathy_direct"],
            "version": [1, 2, 1],
            "template": [
                "Answer in two sentences.",
                "Answer in two sentences; confirm the order number first.",
                "Acknowledge the feeling, then answer.",
            ],
            "is_current": [False, True, True],
            "eval_accuracy": [None, 0.75, None],
            "eval_margin": [None, 0.4, None],
            "evidence": [None, json.dumps({"reasons": {"too_verbose": 3}}), None],
            "policy_id": [None, f"{tenant}-policy-1", None],
            "created_at": [_ts(0), _ts(5), _ts(0)],
        },
        schema_overrides={"created_at": TS, "eval_accuracy": pl.Float64, "eval_margin": pl.Float64},
    )
    dpo_runs = pl.DataFrame(
        {
            "tenant_id": [tenant],
            "policy_id": [f"{tenant}-policy-1"],
            "status": ["trained"],
            "skipped_reason": [None],
            "n_train": [40],
            "n_eval": [10],
            "eval_accuracy": [0.75],
            "eval_margin": [0.4],
            "eval_accuracy_low": [0.4422],
            "eval_accuracy_high": [0.9191],
            "reference_accuracy": [0.5],
            "length_rule_accuracy": [0.6],
            "verdict": [
                "learning beats the length rule: eval accuracy 0.75 (95 % interval 0.44–0.92, "
                "10 pairs), length rule 0.60, reference model 0.50"
            ],
            "train_loss": [0.52],
            "steps": [20],
            "seconds": [2.5],
            "model_dir": ["/tmp/models/x"],
        },
        schema_overrides={"skipped_reason": pl.String},
    )
    return {
        "interactions": interactions,
        "memory_statements": statements,
        "decay_snapshots": decay,
        "feedback_scores": scores,
        "memory_embeddings": embeddings,
        "consolidated_summaries": summaries,
        "memory_conflicts": conflicts,
        "few_shot_sets": few_shot,
        "skill_stats": skills,
        "user_preferences": preferences,
        "skill_vectors": skill_vectors,
        "template_history": templates,
        "dpo_runs": dpo_runs,
    }


def make_lake(
    home: Path, tenants: tuple[str, ...] = ("acme", "globex"), skip: tuple[str, ...] = ()
) -> Paths:
    """Write every pack input for `tenants` into `<home>/lake`, each tenant's rows in its own
    folders as the pipeline lays them out (what a tenant's run reads); tables in `skip` stay
    absent. The home's view is returned: `paths.for_tenant(t)` is a tenant's."""
    paths = Paths.from_env(home)
    for tenant in tenants:
        _write_inputs(paths.for_tenant(tenant), tenant_frames(tenant), skip)
    lake = Lake(paths)
    for day in range(7):
        key = (date(2026, 11, 1) + timedelta(days=day)).isoformat()
        lake.write_partition(
            "ingest_stats",
            key,
            declared(
                "ingest_stats",
                pl.DataFrame(
                    {
                        "load_date": [date.fromisoformat(key)],
                        "files": [1],
                        "lines_read": [10],
                        "accepted": [9],
                        "duplicates": [0],
                        "quarantined": [1],
                    }
                ),
            ),
        )
    events = pl.concat(
        [
            pl.DataFrame(
                {
                    "tenant_id": [t] * 3,
                    "event_id": [f"{t}-e{i}" for i in range(3)],
                    "event_type": ["interaction", "memory", "feedback"],
                    "load_date": [date(2026, 11, 1)] * 3,
                }
            )
            for t in tenants
        ]
    )
    lake.write_partition("events", "2026-11-01", declared("events", events))
    return paths


def _write_inputs(paths: Paths, frames: dict[str, pl.DataFrame], skip: tuple[str, ...]) -> None:
    lake = Lake(paths)
    for name, frame in frames.items():
        if name in skip:
            continue
        if name == "decay_snapshots":
            lake.write_partition(name, RUN_DATE, declared(name, frame))
        elif name == "memory_embeddings":  # the vectors live in the cache, one per text
            lake.write(name, declared(name, frame.drop("embedding")))
            EmbeddingCache(paths.embedding_cache).append(
                frame["model"][0],
                frame.select(
                    "text_hash", "embedding", "model", dim=pl.lit(DIM, pl.Int32)
                ).with_columns(embedded_at=pl.lit(datetime(2026, 11, 1, tzinfo=UTC), TS)),
            )
        else:
            lake.write(name, declared(name, frame))


def test_make_lake_writes_every_input(tmp_path: Path) -> None:
    paths = make_lake(tmp_path)
    lake = Lake(paths)
    assert lake.exists("memory_embeddings")
    assert lake.partition_keys("decay_snapshots") == [RUN_DATE]
    assert lake.read("interactions").collect().height == 8
