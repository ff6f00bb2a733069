"""A labelled PII corpus: each kind in many formats inside everyday sentences, plus look-alikes
that must stay (order numbers, versions, dates, times, prices). Measures the redactor and the
publish guard (tests/test_pii.py floors, bench section `pii`). The values beyond English —
national ids, names in other scripts, postcodes, obfuscated values, a multilingual look-alike
corpus — are in `pipeline.generate.pii_world`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.generate import pii_world as world

# Values per kind, in the formats people write them. Phones and cards are valid numbers.
VALUES: dict[str, tuple[str, ...]] = {
    "email": (
        "jane.doe@example.com",
        "billing+4471@example.org",
        "j.smith@globex-mail.co.uk",
        "jürgen.müller@example.de",
        "KENJI.TANAKA@EXAMPLE.NET",
        "a_b-c@sub.domain.example.io",
    ),
    "phone": (
        "+33 6 12 34 56 78",
        "06 12 34 56 78",
        "(06) 12-34-56-78",
        "030/12345678",
        "+1 (415) 555-0132",
        "(212) 555-0199",
        "415-555-0132",
        "+44 20 7946 0958",
        "020 7946 0958",
        "+49 30 9018 2044",
        "0176 1234567",
        "+4915112345678",
        "+31 6 12345678",
        "06-12345678",
        "+34 612 345 678",
        "+61 2 9876 5432",
        "+91 98765 43210",
        "+81 3-1234-5678",
        "+39 06 6982 1234",
        "+41 44 668 18 00",
        *world.CN_PHONES,
        "555.123.4567",
        "555-123-4567",
        "(555) 123-4567",
    ),
    "card": (
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "4111.1111.1111.1111",
        "4111111111111111",
        "5500 0000 0000 0004",
        "3782 822463 10005",
        "6011 1111 1111 1117",
        "4012888888881881",
    ),
    "iban": (
        "DE89 3704 0044 0532 0130 00",
        "de89370400440532013000",
        "GB82 WEST 1234 5698 7654 32",
        "NL91ABNA0417164300",
        "nl91 abna 0417 1643 00",
        "FR14 2004 1010 0505 0001 3M02 606",
        "ES91 2100 0418 4502 0005 1332",
        "BE68 5390 0754 7034",
    ),
    "ssn": ("536-90-4399", "078-05-1121", "219-09-9999", "123 45 6789"),
    "ip_address": (
        "8.8.8.8",
        "10.0.0.1",
        "192.168.10.20",
        "172.16.254.1",
        "2001:db8::8a2e:370:7334",
        "fe80::1",
        "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
        "192.168.001.010",
        "010.000.000.001",
    ),
    "person": (
        "Priya Lopez",
        "Jürgen Müller",
        "Kenji Tanaka",
        "Anna Weber",
        "Olusegun Adeyemi",
        "Siobhan Kelly",
        "María García",
        "Fatima Haddad",
        "Tom Novak",
        "Grace Okafor",
        "Priya Raghunathan",
        "Siobhan O'Callaghan",
        "Priyanka Raghunathan",
        "Liam O'Brien",
    ),
    "address": (
        "221B Baker Street",
        "1600 Pennsylvania Ave NW",
        "350 Fifth Avenue",
        "Hauptstraße 5",
        "Keizersgracht 123",
        "12 rue de la Paix",
        "Calle Mayor 5",
        "Via Roma 10",
        "NW1 6XE",  # a postcode, left beside [ADDRESS] before
        "DC 20500",
        "SW1A 1AA",
        "CA 94103-1234",
    ),
    "location": ("Paris", "Berlin", "Lyon", "Amsterdam", "Chicago", "Madrid"),
}
# Sentences around a value, per kind ({v} is the value).
TEMPLATES: dict[str, tuple[str, ...]] = {
    "email": (
        "You can reach me at {v} if that is easier.",
        "Please send the receipt to {v}.",
        "Contact: {v}",
    ),
    "phone": (
        "Call me back on {v} please.",
        "My number is {v}, any time after 5.",
        "reach me at {v}",
    ),
    "card": (
        "The charge was on my card {v}.",
        "Card number {v} was declined twice.",
    ),
    "iban": ("Please refund to IBAN {v}.", "Our account: {v}, thanks."),
    "ssn": ("My SSN is {v}.", "SSN: {v}"),
    "ip_address": (
        "The login came from {v} this morning.",
        "Whitelist {v} on the firewall.",
    ),
    "person": (
        'Scan this message from {v}: "Can we talk tomorrow?"',
        "{v} prefers short answers in bullet points.",
        "Please forward the contract to {v} before Friday.",
        "Meeting with {v} moved to the afternoon.",
    ),
    "address": (
        "Ship the replacement to {v}, please.",
        "We moved to {v} last month.",
    ),
    "location": ("I am flying to {v} next week.", "Our office in {v} is closed today."),
}
# Look-alikes: none of these holds personal data; every one must come out unchanged.
LOOK_ALIKES: tuple[str, ...] = (
    "Order #12345678901 shipped yesterday.",
    "Order 12345 cost 3.50 (v2.3.1).",
    "Please upgrade to version 1.2.3.4 of the app.",
    "The release 10.0.0.1 fixes the login bug.",
    "Your appointment is on 2026-11-02 at 10:30.",
    "The job ran at 12:30:45 and again at 23:59.",
    "It costs $12.50, or 1,250.00 EUR for the year.",
    "Score 72/100 on the last review.",
    "Ticket 123456789 was closed.",
    "Invoice INV-2026-0042 is attached.",
    "Build 20261102 is live.",
    "The report for 02/11/2026 is late.",
    "Error code 0x80070005 on port 8080, then HTTP 404.",
    "Mark the ticket as urgent.",
    "May we move the call to Monday?",
    "The grace period is 30 days on the Team plan.",
    "Upgrade to the Business plan for 10 000 units.",
    "Customer c00006 asked about user u123.",
    "The refund of 2 500 EUR arrives in Q3 2026.",
    "Our tracking number is 1Z999AA10123456784.",
    "Tracking 9400100000000000000000 is in transit.",
    "Reference 2026/11/02-7 was filed.",
    "Keep replies under 120 words and use bullet points.",
    "The meeting is at 9am on Thursday, room 4.12.",
    "Python 3.11.7 and numpy 2.4.6 are installed.",
    "She bought 3 tickets for 45.00 each.",
    # Look-alikes of the shapes above (dotted numbers, zero-padded quads, ids, capitals).
    "Order 555.123.4567 was split in two parcels.",
    "Ticket #555-123-4567 is waiting for a reply.",
    "Please install version 192.168.001.010 tonight.",
    "Firmware 001.002.003.010 is rolling out.",
    "It went from 555.12 to 4,567.00 after tax.",
    "The batch of 2026.11.02 and the one of 12.11.2026 are late.",
    "Event ix-000394-153365 was replayed after ix-000394-153366.",
    "Row 000123-456789 of the export is empty.",
    "The Team plan costs 20 EUR in Q3 2026.",
)
# Look-alikes of the guard's own kinds (the guard must stay silent on them too).
GUARD_KINDS = ("email", "phone", "card", "iban", "ssn", "national_id", "ip_address")
KINDS = (*VALUES, "national_id")
# The look-alikes beyond English (products, checksummed order numbers, common words that are
# names, 12 languages): at least this share must come out unchanged.
LOOK_ALIKES_WORLD = world.LOOK_ALIKES_WORLD
LOOK_ALIKES_KEPT = 0.95


@dataclass(frozen=True)
class Labelled:
    text: str
    values: tuple[tuple[str, str], ...]  # (kind, value) planted in the text


def corpus() -> list[Labelled]:
    """Every value in every template of its kind, then the look-alikes (no values)."""
    rows = [
        Labelled(template.format(v=value), ((kind, value),))
        for kind, values in VALUES.items()
        for i, value in enumerate(values)
        for template in (TEMPLATES[kind][i % len(TEMPLATES[kind])],)
    ]
    # A second template for each value so every format is seen in two contexts.
    rows += [
        Labelled(template.format(v=value), ((kind, value),))
        for kind, values in VALUES.items()
        for i, value in enumerate(values)
        for template in (TEMPLATES[kind][(i + 1) % len(TEMPLATES[kind])],)
    ]
    rows += world_rows()
    rows += [Labelled(text, ()) for text in LOOK_ALIKES]
    return rows


def world_rows() -> list[Labelled]:
    """The rows of `pipeline.generate.pii_world` (not its look-alikes: `look_alikes_world`)."""
    rows = [
        Labelled(template.format(label=label, v=value), (("national_id", value),))
        for label, value in world.NATIONAL_IDS
        for template in world.ID_TEMPLATES
    ]
    rows += [
        Labelled(world.SHAPED_TEMPLATE.format(v=value), (("national_id", value),))
        for value in world.SHAPED_IDS
    ]
    for value, native in world.SCRIPT_NAMES:
        for template in (native, TEMPLATES["person"][2]):
            rows.append(Labelled(template.format(v=value), (("person", value),)))
    rows += [
        Labelled(template.format(v=value), (("location", value),))
        for value in world.POSTCODE_PLACES
        for template in world.POSTCODE_TEMPLATES
    ]
    rows += [
        Labelled(world.OBFUSCATED_TEMPLATES[kind].format(v=value), ((kind, value),))
        for kind, values in world.OBFUSCATED.items()
        for value in values
    ]
    rows += [Labelled(f"Open {url} to reply.", ((kind, value),)) for kind, url, value in world.URLS]
    return rows


def look_alikes_world() -> list[Labelled]:
    """The look-alikes beyond English, as rows without values (`LOOK_ALIKES_KEPT` must stay)."""
    return [Labelled(text, ()) for text in world.LOOK_ALIKES_WORLD]


Found = Sequence[tuple[int, int, str]]  # (start, end, kind) spans a detector reports in a text


def evaluate(
    rows: list[Labelled], found: list[Found], kinds: Sequence[str] = KINDS
) -> dict[str, dict[str, float | int]]:
    """Per kind: recall = planted values entirely covered by detected spans (of any kind: the
    value is gone), precision = detected spans of the kind that overlap a planted value (a
    detection on a look-alike, or beside the value, is a false positive)."""
    table: dict[str, dict[str, float | int]] = {}
    for kind in kinds:
        planted = covered = detections = warranted = 0
        for row, spans in zip(rows, found, strict=True):
            targets = []
            for value_kind, value in row.values:
                start = row.text.index(value)
                targets.append((start, start + len(value)))
                if value_kind == kind:
                    planted += 1
                    inside = [(s, e) for s, e, _ in spans if s < start + len(value) and start < e]
                    chars = set().union(*(range(s, e) for s, e in inside)) if inside else set()
                    covered += set(range(start, start + len(value))) <= chars
            for s, e, found_kind in spans:
                if found_kind == kind:
                    detections += 1
                    warranted += any(s < te and ts < e for ts, te in targets)
        table[kind] = {
            "planted": planted,
            "recall": covered / planted if planted else 1.0,
            "detected": detections,
            "precision": warranted / detections if detections else 1.0,
        }
    return table
