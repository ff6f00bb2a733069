"""Vocabulary banks and text builders: realistic, varied English for the three sample apps."""

from __future__ import annotations

import random
from typing import Any

from pipeline.generate.support_bank import SUPPORT_TOPICS

SKILLS = (
    "concise_response",
    "detailed_explanation",
    "casual_chat",
    "technical_precision",
    "empathy_direct",
    "empathy_subtle",
    "proactive_suggestions",
    "reactive_only",
    "code_review_constructive",
    "summarize_key_points",
)
MODELS = ("gpt-4o-mini", "gpt-4.1-mini", "claude-3-5-haiku", "llama-3.1-8b-instruct")
FIRST = (
    "Maria",
    "James",
    "Aiko",
    "Omar",
    "Lena",
    "Carlos",
    "Priya",
    "Tom",
    "Fatima",
    "Jonas",
    "Sofia",
    "Wei",
    "Grace",
    "Mateo",
    "Nadia",
    "Ethan",
    "Chloe",
    "Ravi",
    "Elena",
    "Sam",
)
LAST = (
    "Lopez",
    "Smith",
    "Tanaka",
    "Haddad",
    "Berg",
    "Silva",
    "Patel",
    "Novak",
    "Okafor",
    "Weber",
    "Rossi",
    "Chen",
    "Murphy",
    "Garcia",
    "Ivanova",
    "Brown",
    "Dubois",
    "Kumar",
    "Costa",
    "Park",
)

# Planted personal data (the pack must redact all of it). Cards pass the Luhn check, IBANs
# mod-97; phones are valid numbers in the formats people type (issue 17's leaks among them).
PII_EMAILS = (
    "maria.lopez@example.com",
    "j.smith@globex-mail.com",
    "kenji.tanaka@example.net",
    "billing+4471@example.org",
    "jürgen.müller@example.de",
)
PII_PHONES = (
    "+1 415 555 0132",
    "(212) 555-0199",
    "+44 20 7946 0958",
    "+49 30 9018 2044",
    "+33 6 12 34 56 78",
    "06 12 34 56 78",
    "(06) 12-34-56-78",
    "030/12345678",
    "+31 6 12345678",
)
PII_CARDS = (
    "4111 1111 1111 1111",
    "5500 0000 0000 0004",
    "4012888888881881",
    "3782 822463 10005",
    "4111.1111.1111.1111",
)
PII_IBANS = (
    "DE89 3704 0044 0532 0130 00",
    "GB82 WEST 1234 5698 7654 32",
    "NL91ABNA0417164300",
    "FR14 2004 1010 0505 0001 3M02 606",
    "de89370400440532013000",
)
PII_IPS = ("8.8.8.8", "10.0.0.1", "2001:db8::8a2e:370:7334")
PII_SSNS = ("536904399", "536-90-4399")
PII_ADDRESSES = ("221B Baker Street", "Hauptstraße 5", "12 rue de la Paix")
PII_NAMES = ("Priya Lopez", "Kenji Tanaka", "Jürgen Müller")
PII_PHRASES = (
    ("You can reach me at {e} if that is easier.", PII_EMAILS),
    ("Call me back on {e} please.", PII_PHONES),
    ("The charge was on my card {e}.", PII_CARDS),
    ("Please refund to IBAN {e}.", PII_IBANS),
    ("The login came from {e} this morning.", PII_IPS),
    ("My SSN is {e}.", PII_SSNS),
    ("Ship the replacement to {e}, please.", PII_ADDRESSES),
    ('Forwarding a note from {e}: "see below".', PII_NAMES),
)
# Look-alikes beside them that must stay (order numbers, versions): see pipeline.generate.pii_corpus.

_TOPICS = tuple(SUPPORT_TOPICS)
PLANS = ("Starter", "Team", "Business", "Pro")

COACH_RELATIONS = (
    "manager",
    "cofounder",
    "partner",
    "sister",
    "biggest client",
    "best friend",
    "new hire",
    "landlord",
    "father",
    "team lead",
)
COACH_BEHAVIORS = (
    "keeps interrupting me in meetings",
    "cancelled our plans again at the last minute",
    "pushes back on every deadline I set",
    "asked me to work this weekend",
    "takes credit for my work in front of others",
    "keeps asking for discounts",
    "goes silent for days after we disagree",
    "criticised my presentation in public",
    "wants an answer on the offer by tomorrow",
    "keeps sending messages late at night",
)
COACH_FEELINGS = (
    "I feel dismissed",
    "I'm frustrated and tired",
    "I don't know how to respond",
    "I want to keep the relationship but set a boundary",
    "I'm tempted to just give in",
    "I get defensive every time",
)
COACH_ADVICE = (
    "Name the pattern calmly and without blame: describe what happened, not who they are.",
    "Ask one clear question and then stay quiet long enough for a real answer.",
    "Decide your boundary before the conversation, so you are not negotiating with yourself.",
    "Keep your reply short; long explanations read as asking for permission.",
    "Acknowledge their point first, then restate what you need.",
    "Move the discussion to a private one-on-one instead of answering in public.",
    "Offer two options you can live with rather than an open-ended yes.",
    "Give yourself a day before replying when you notice you are angry.",
    "Write down the outcome you want in one sentence and open with it.",
    "Thank them for the feedback and ask for one concrete example.",
)

SCAN_SNIPPETS = (
    "Just checking if you had a chance to look at my last three emails?",
    "We need this signed by Friday or the price goes up.",
    "Honestly, whatever works for you is fine with me, I can adjust.",
    "Great meeting today, let's pick the pilot scope next week.",
    "I'm not sure this is worth our time unless you can do better on price.",
    "Sorry to bother you again, I know you're really busy.",
    "Per my last message, the numbers are final.",
    "Happy to jump on a call whenever suits you, no pressure at all!",
)
SCAN_FRAMES = ("apex", "neutral", "supplicating", "defensive", "collaborative")
SCAN_SIGNALS = (
    "over-apologising",
    "urgency pressure",
    "clear next step",
    "deference to the reader",
    "implicit threat",
    "shared goal",
    "vague commitment",
    "status assertion",
    "repeated follow-up",
    "warm tone",
)

MEMORY_BANK: dict[str, tuple[str, ...]] = {
    "communication": (
        "{n} prefers email over phone calls.",
        "{n} wants a text message before any call.",
        "{n} likes short, direct replies.",
        "{n} answers faster on Slack than by email.",
        "{n} dislikes voice notes.",
        "{n} wants a written summary after every meeting.",
    ),
    "scheduling": (
        "{n} prefers morning meetings.",
        "Never schedule {n} on Fridays after 3pm.",
        "{n} blocks lunch from 12 to 1 every day.",
        "{n} likes 25-minute meetings instead of 30.",
        "{n} is usually travelling on Mondays.",
        "{n} wants agendas at least a day ahead.",
    ),
    "money": (
        "{n} approves expenses under $500 without review.",
        "{n} wants invoices on the 1st of the month.",
        "{n} prefers to pay by bank transfer.",
        "{n} says the Q4 budget is frozen.",
        "{n} always asks for a discount on renewals.",
    ),
    "relationships": (
        "{n} reports to {m}.",
        "{n} is mentoring {m} this year.",
        "{n} and {m} studied together.",
        "{n} had a disagreement with {m} last month.",
        "{n} trusts {m}'s judgement on hiring.",
    ),
    "preferences": (
        "{n} is vegetarian; avoid steakhouses.",
        "{n} hates elevators in hotels.",
        "Never book United for {n}.",
        "{n} prefers aisle seats.",
        "{n} likes dark roast coffee.",
        "{n} prefers quiet restaurants for business dinners.",
    ),
    "other": (
        "{n} is learning Spanish.",
        "{n} runs marathons.",
        "{n} is allergic to peanuts.",
        "{n} volunteers at the food bank on Saturdays.",
        "{n} recently moved to Lisbon.",
    ),
}
TEMPORARY_BANK = (
    "{n} is at the dentist this afternoon.",
    "{n} is working from Lisbon this week.",
    "{n} has a cold today; keep calls short.",
    "{n} is offline until tomorrow morning.",
    "{n} is on a flight today.",
)
COMMENTS_POS = (
    "Exactly what I needed, thanks.",
    "Clear and quick.",
    "Used this almost word for word.",
    "Good tone, the customer was happy.",
    "Nice, saved me ten minutes.",
)
COMMENTS_NEG = (
    "Way too long for a simple question.",
    "This is not what I asked.",
    "Too cold, the customer was upset.",
    "The price in this answer is wrong.",
    "Missed the actual problem.",
    "Too short, no steps at all.",
)
LONG_COMMENT = (
    "I want to explain in detail why this answer did not work for us. The customer had "
    "already tried the reset link twice and the reply sent them straight back to the same "
    "step, which made them angrier. It also quoted the old price list and promised a refund "
    "window we no longer offer. Please make sure future replies check the ticket history "
    "first, acknowledge what the person already tried, and only then suggest next steps. "
)
# What a person adds when correcting an answer that was already short.
CORRECTION_ADDITIONS = {
    "too_brief": "Here are the exact steps: open Settings, pick the item, and confirm.",
    "wrong_tone": "Sorry for the trouble, and thanks for your patience.",
    "incorrect_info": "Note: this follows the policy updated this month.",
    "not_helpful": "If that doesn't solve it, reply and I'll call you today.",
    "too_verbose": "",
    "other": "Let me know if anything still looks off.",
}


def person(index: int) -> str:
    """A stable display name for contact number `index`."""
    return f"{FIRST[index % len(FIRST)]} {LAST[(index // len(FIRST)) % len(LAST)]}"


def _values(rng: random.Random, name: str) -> dict[str, str]:
    """The specifics of one ticket, shared by the question and its answer."""
    return {
        "plan": rng.choice(PLANS),
        "amount": f"${rng.randint(9, 480)}.{rng.randint(0, 99):02d}",
        "order": str(rng.randint(100000, 999999)),
        "name": name,
    }


def styled(rng: random.Random, skill: str, short: str, steps: tuple[str, ...], first: str) -> str:
    """One answer in the style of `skill`: the same facts, a different shape."""
    if skill in ("concise_response", "reactive_only"):
        return short
    if skill == "detailed_explanation":
        return " ".join([short, *rng.sample(steps, 3)])
    if skill == "casual_chat":
        return f"Hey {first}! {short} Cheers!" if first else f"Hey! {short} You've got this."
    if skill == "technical_precision":
        picked = rng.sample(steps, 2)
        return f"{short} Details: 1) {picked[0]} 2) {picked[1]}"
    if skill == "empathy_direct":
        return f"I'm sorry this happened, that's really frustrating. {short}"
    if skill == "empathy_subtle":
        return (
            f"Thanks for flagging this, {first}. {short}" if first else f"That sounds hard. {short}"
        )
    if skill == "proactive_suggestions":
        return f"{short} You might also want to know: {rng.choice(steps)}"
    if skill == "code_review_constructive":
        return f"Good instinct to ask. {short} One suggestion: {rng.choice(steps)}"
    return "Key points:\n- " + "\n- ".join([short, *rng.sample(steps, 2)])


def support_texts(rng: random.Random, skill: str, name: str) -> tuple[str, str, str, str]:
    """(topic, input, output, short answer) for one support ticket."""
    topic = rng.choice(_TOPICS)
    bank = SUPPORT_TOPICS[topic]
    first = name.split()[0]
    i = rng.randrange(len(bank["ask"]))
    values = _values(rng, name)
    ask = bank["ask"][i].format(**values)
    opener = rng.choice(("Hi,", "Hello team,", "Hey there,", f"Hi, this is {first}.", ""))
    text = f"{opener} {ask}".strip()
    if rng.random() < 0.5:
        text += " " + rng.choice(
            (
                "This is urgent.",
                "Thanks in advance.",
                "Please help.",
                "I've been a customer for years.",
                "Can you check today?",
            )
        )
    short = bank["short"][i].format(**values)
    return topic, text, styled(rng, skill, short, bank["steps"], first), short


def coaching_texts(rng: random.Random, skill: str, name: str) -> tuple[str, str, str, str]:
    rel = rng.choice(COACH_RELATIONS)
    text = f"My {rel} {rng.choice(COACH_BEHAVIORS)} and {rng.choice(COACH_FEELINGS)}."
    if rng.random() < 0.4:
        text += f" Their name is {name.split()[0]}."
    text += " " + rng.choice(
        (
            "How should I respond?",
            "What do I say?",
            "Should I bring it up?",
            "How do I handle this without a fight?",
        )
    )
    short = rng.choice(COACH_ADVICE)
    return rel, text, styled(rng, skill, short, COACH_ADVICE, ""), short


def scan_texts(rng: random.Random, skill: str, name: str) -> tuple[str, str, dict[str, Any], str]:
    snippet = rng.choice(SCAN_SNIPPETS)
    frame = rng.choice(SCAN_FRAMES)
    text = f'Scan this message from {name}: "{snippet}"'
    report: dict[str, Any] = {
        "frame_score": rng.randint(5, 98),
        "dominant_frame": frame,
        "signals": rng.sample(SCAN_SIGNALS, rng.randint(1, 3)),
        "summary": f"The sender writes from a {frame} frame.",
        "recommendation": rng.choice(COACH_ADVICE),
    }
    if skill == "detailed_explanation":
        report["notes"] = " ".join(rng.sample(COACH_ADVICE, 2))
    return frame, text, report, report["recommendation"]


def memory_text(rng: random.Random, category: str, name: str, other: str) -> str:
    return rng.choice(MEMORY_BANK[category]).format(n=name, m=other)


def pii_phrase(rng: random.Random) -> tuple[str, str]:
    """A sentence holding one planted PII value, and that value."""
    template, values = rng.choice(PII_PHRASES)
    value = rng.choice(values)
    return template.format(e=value), value
