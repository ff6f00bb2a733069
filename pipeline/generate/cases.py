"""The planted cases' data: decay ages far from every threshold, paraphrases, conflicts."""

from datetime import timedelta

# (memory_type, age, impact, status, needs_reconfirmation, stale, content): far from every threshold
DECAY_CASES: tuple[tuple[str, timedelta, str, str, bool, bool, str], ...] = (
    (
        "single_inference",
        timedelta(days=40),
        "low",
        "archived",
        False,
        False,
        "{n} seemed annoyed by the late reply.",
    ),
    (
        "single_inference",
        timedelta(days=1),
        "medium",
        "active",
        False,
        False,
        "{n} skipped the standup today.",
    ),
    (
        "temporary",
        timedelta(days=3),
        "low",
        "archived",
        False,
        False,
        "{n} is at the airport today.",
    ),
    (
        "temporary",
        timedelta(hours=10),
        "medium",
        "active",
        False,
        False,
        "{n} is in back-to-back interviews until 6pm.",
    ),
    (
        "explicit_instruction",
        timedelta(days=400),
        "medium",
        "active",
        False,
        True,
        "Always cc legal on vendor contracts for {n}.",
    ),
    (
        "inferred_pattern",
        timedelta(days=150),
        "low",
        "inactive",
        False,
        False,
        "{n} tends to reply late on Sundays.",
    ),
    (
        "confirmed_pattern",
        timedelta(days=10),
        "medium",
        "active",
        False,
        False,
        "{n} responds to invoices within one hour.",
    ),
    (
        "inferred_pattern",
        timedelta(days=25),
        "high",
        "active",
        True,
        False,
        "{n} seems to escalate after two ignored follow-ups.",
    ),
    (
        "correction",
        timedelta(days=300),
        "medium",
        "active",
        False,
        True,
        "Don't call {n} 'buddy' in client emails.",
    ),
    (
        "confirmed_pattern",
        timedelta(days=200),
        "low",
        "inactive",
        False,
        True,
        "{n} orders the team lunch on Thursdays.",
    ),
    (
        "correction",
        timedelta(days=60),
        "high",
        "active",
        False,
        False,
        "Mark {n}'s requests as 'urgent', not 'high priority'.",
    ),
)
# Re-wordings people would score "same meaning", in other words as people reword a preference
# (the generator's first wordings, and the morning example of issue 52): 0.09-0.30 apart as the
# pipeline embeds them, beyond any one distance that keeps "prefers afternoon meetings" / "prefers
# morning meetings" (0.07-0.10) apart. They were never worded to fit a rule. The default merge (the
# distance rule 0.15) merges 2-5 of their 12 pairs depending on the person's name, the opt-in
# judgement (pipeline/semantic/judgement.py) 6-10 (bench/README.md "merges").
PARAPHRASES = (
    (
        "communication",
        (
            "{n} prefers short answers in bullet points.",
            "{n} likes replies kept brief, ideally as a bulleted list.",
            "Keep replies to {n} short, in bullet points.",
        ),
    ),
    (
        "scheduling",
        (
            "{n} prefers meetings in the afternoon.",
            "{n} likes to schedule meetings after lunch.",
            "Afternoon meetings work best for {n}.",
        ),
    ),
    (
        "money",
        (
            "{n} wants invoices sent as PDF attachments.",
            "Send invoices to {n} as attached PDF files.",
            "{n} prefers to receive invoices as attached PDFs.",
        ),
    ),
    (
        "scheduling",
        (
            "{n} likes calls early in the day.",
            "Calls in the morning work best for {n}.",
            "{n} would rather take calls before noon.",
        ),
    ),
)
# (kind, category, (type, content) of the older statement, (type, content) of the newer one, preferred)
CONFLICTS = (
    (
        "supersedes",
        "communication",
        ("inferred_pattern", "{n} prefers phone calls for contract questions."),
        ("explicit_instruction", "Only email {n} about contracts; no phone calls."),
        "b",
    ),
    (
        "polarity",
        "scheduling",
        ("inferred_pattern", "Always call {n} before 9am."),
        ("explicit_instruction", "Never call {n} before 9am."),
        "b",
    ),
    (
        "polarity",
        "communication",
        ("confirmed_pattern", "{n} prefers email for project updates."),
        ("single_inference", "{n} avoids email for project updates."),
        "a",
    ),
    (
        "correction",
        "preferences",
        ("inferred_pattern", "{n} likes detailed weekly reports."),
        (
            "correction",
            "{n} does not like detailed weekly reports; send a three-line summary instead.",
        ),
        "b",
    ),
)
