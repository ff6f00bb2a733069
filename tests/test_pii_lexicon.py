"""A tenant's name lexicon (pipeline.pii.lexicon, pipeline.pii.names): names the detector never
tags are found from the texts and identifiers alone, and look-alikes — products, places, common
words that are also names — are not (issue 50, item 3)."""

from __future__ import annotations

import polars as pl

from pipeline.pii.lexicon import (
    addressed,
    determined,
    given_names,
    identifier_names,
    mid_sentence,
    names_a_person,
    speaker_labels,
)
from pipeline.pii.names import TenantNames, tenant_names
from pipeline.preference.templates.registry import load_registry

NO_FINDINGS = pl.DataFrame(
    schema={"text": pl.String, "redacted": pl.String, "kinds": pl.List(pl.String)}
)


def _names(
    texts: list[str], identifiers: tuple[str, ...] = (), places: tuple[str, ...] = ()
) -> TenantNames:
    """The lexicon of `texts`, the detector having found `places` as places where they are."""
    findings = pl.DataFrame(
        {
            "text": texts,
            "redacted": [
                next((t.replace(p, "[LOCATION]") for p in places if p in t), t) for t in texts
            ],
        }
    ).with_columns(
        kinds=pl.when(pl.col("redacted") != pl.col("text"))
        .then(pl.lit(["location"]))
        .otherwise(pl.lit([], pl.List(pl.String)))
    )
    return tenant_names(findings, pl.Series(texts), identifiers=identifiers)


def test_the_name_lists_hold_nicknames_of_given_names_only() -> None:
    names = given_names()
    assert {"Jolene", "Nate", "Matt", "Priya", "Siobhan"} <= names
    assert "Little" not in names  # "littleberry has nickname little": no given name
    assert len(names) < 20_000


def test_sources_read_the_texts_vectorised() -> None:
    texts = pl.Series(
        [
            "Nate: I finished the pottery class.",
            "Jolene: Hey Nate, send me a picture!",
            "Thanks, Jolene. I'm Priya by the way.",
            "Yes. Yesterday I met Jolene at the market.",
            "Open the Mercedes plan, then ask our Jasper server.",
        ]
    )
    assert speaker_labels(texts) == {"Nate": 1, "Jolene": 1}
    assert addressed(texts) == {"Nate": 1, "Jolene": 1, "Priya": 1}
    inside = mid_sentence(texts)
    assert inside["Jolene"] == 2 and "Yes" not in inside and "Yesterday" not in inside
    assert determined(texts) == {"Mercedes": 1, "Jasper": 1}


def test_a_name_only_people_use_is_found_however_rarely_the_ner_does() -> None:
    chat = [
        "Nate: I finally finished the pottery class today.",
        "Jolene: That's wonderful! Hey Nate, send me a picture?",
        "Nate: Thanks, Jolene! I will after dinner.",
        "Nate: I met Jolene's sister at the market.",
        "Jolene: Nate keeps surprising everyone.",
        "Zorblax: the build is green.",
        "Zorblax: the build is red.",
        "Zorblax: the build is green again.",
    ]
    assert _names(chat).words == {"Nate", "Jolene"}  # Zorblax: in no list, never addressed


def test_identifiers_name_their_people() -> None:
    ids = [
        "jane.doe@example.com",
        "priya_lopez",
        "Siobhan O'Callaghan",
        "c00006",
        "u42",
        "acme-bot",
    ]
    assert identifier_names(ids) == {"Jane", "Doe", "Priya", "Lopez", "Siobhan", "Callaghan"}
    names = _names(["Ask Doe about the refund."], identifiers=tuple(ids))
    texts, n = names.redact(pl.Series(["ask doe and priya about it", "c00006 wrote"]))
    assert texts.to_list() == ["ask [PERSON] and [PERSON] about it", "c00006 wrote"] and n == 2


# Words that are names too, used as things, places and common words, each several times.
LOOK_ALIKES = [
    "I booked a flight to Paris in May and will pay in August.",
    "Will you reset the Echo? The Echo keeps restarting.",
    "Ask the Alexa skill, then open an Alexa routine.",
    "The Chase card was declined, so I used the Amex card.",
    "Upgrade to the Mercedes plan; the Mercedes plan has priority support.",
    "Open it in Safari or in Chrome; Safari is faster for me.",
    "We use Slack and Zoom, and our Jasper server runs the reports.",
    "The grace period is 30 days, and Grace Hopper wrote the first compiler.",
    "Python and the Julia language are installed; the Julia build failed.",
    "Deploy to the Victoria region and the Sydney region.",
    "The Amber alert came from the Ruby gem and the Crystal shard.",
    "Order the Jordan sneakers in June; the Jordan line sells out.",
    "Mark the ticket as urgent and send a summary to the Team channel.",
    "The Sierra laptop and the Dakota tablet shipped from Austin.",
    "My Kindle and the Apple Watch both failed to sync on Monday.",
] * 3


def test_look_alikes_stay_and_the_people_among_them_go() -> None:
    """Measured: of 16 look-alike words used as things, places or common words, none becomes a
    name; the one person among them (Grace Hopper, found by her full name) would be."""
    names = _names(LOOK_ALIKES, places=("Austin",))  # the NER finds the city as a place
    look_alikes = {
        "Paris", "May", "Will", "August", "Echo", "Alexa", "Chase", "Mercedes", "Safari", "Jasper",
        "Julia", "Victoria", "Sydney", "Amber", "Ruby", "Crystal", "Jordan", "June", "Mark",
        "Sierra", "Dakota", "Austin", "Kindle", "Apple", "Monday", "Team",
    }  # fmt: skip
    assert names.words & look_alikes == set()
    texts, n = names.redact(pl.Series(LOOK_ALIKES))
    assert n == 0 and texts.to_list() == LOOK_ALIKES


def test_labels_of_the_registry_and_the_generator_name_nobody() -> None:
    from pipeline.generate.world import SYSTEMS, TENANT_NAMES

    kinds = [kind for _, kind in SYSTEMS.values()]
    labels = [*load_registry(), *SYSTEMS, *kinds, *TENANT_NAMES]
    assert [label for label in labels if names_a_person(label)] == []
    assert names_a_person("Bartholomew Quigley desk") and names_a_person("sarah_connor")
