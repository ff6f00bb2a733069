"""Planted preference pairs with a consistent pattern (polite, concise ≻ rude, rambling): a known answer for DPO."""

from __future__ import annotations

import random

import polars as pl

TOPICS = ["my order", "the invoice", "my password", "the delivery", "a refund", "my account",
          "the app", "the meeting", "my subscription", "the report", "the printer", "my booking"]  # fmt: skip
ASKS = ["Where is", "How do I fix", "Can you check", "What happened to", "Please help with",
        "Any news about"]  # fmt: skip
POLITE = ["Thanks for asking!", "Happy to help.", "Thank you for your patience."]
CLOSE = ["Have a great day!", "Let me know if anything else comes up."]
RUDE = ["Ugh, whatever.", "Not my problem.", "Seriously? Again?"]
DISMISS = ["figure it out yourself.", "stop bothering me.", "I don't care."]


def planted_mined_pairs(
    n: int, seed: int = 0, tenant: str = "acme", skill: str = "concise_response"
) -> pl.DataFrame:
    """Mined-pair rows (before `pairs.finalize_pairs`): chosen polite and concise, rejected rude
    and rambling, same topic — a preference any working DPO run must learn."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        topic = rng.choice(TOPICS)
        rows.append(
            {
                "tenant_id": tenant,
                "prompt": f"{rng.choice(ASKS)} {topic}? (ticket {seed}-{i})",
                "chosen": f"{rng.choice(POLITE)} I checked {topic}: it is sorted. {rng.choice(CLOSE)}",
                "rejected": f"{rng.choice(RUDE)} So, {topic}, well, there are many things and honestly it "
                f"could be anything, maybe this, maybe that, {rng.choice(DISMISS)}",
                "source": "correction",
                "margin": 1.0,
                "skill_id": skill,
                "chosen_id": f"{tenant}-c{i}",
                "rejected_id": f"{tenant}-r{i}",
            }
        )
    return pl.DataFrame(rows)
