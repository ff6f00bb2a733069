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
# Re-wordings people would score "same meaning", within the statement threshold (0.15, calibrated
# on people's paraphrases) for every generated name: at most 0.112 apart over all 400 names of
# `texts.person` (0.128 with the name as "[PERSON]"), normalised as the pipeline embeds. The
# wordings before reached 0.164-0.201 for some names ("Send invoices to X as attached PDF files" /
# "X prefers to receive invoices as attached PDFs" 0.201) and split at 0.15.
PARAPHRASES = (
    (
        "communication",
        (
            "{n} prefers short answers in bullet points.",
            "{n} likes short answers in bullet points.",
            "{n} prefers brief answers in bullet points.",
        ),
    ),
    (
        "scheduling",
        (
            "{n} prefers meetings in the afternoon.",
            "{n} prefers afternoon meetings.",
            "{n} likes meetings in the afternoon.",
        ),
    ),
    (
        "money",
        (
            "{n} wants invoices sent as PDF attachments.",
            "{n} likes invoices sent as PDF attachments.",
            "{n} prefers to get invoices as PDF attachments.",
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
