"""Words that say who is or is not a name, without polars (the NER's gate reads them in the fork
server, pipeline.pii.ner_gate): the given-name lists, and the capitalised words that are never
names here — roles, days and months, nationalities, interjections."""

from __future__ import annotations

import csv
import importlib.resources
from functools import lru_cache

from pipeline.pii.rules import COMMON_WORD_NAMES, faker_names

# Labels and salutations that are roles or parts of a message, never a person.
ROLE_WORDS = frozenset(
    "User Assistant Agent Customer Client Bot Ai System Support Admin Moderator Host Guest "  # noqa: SIM905
    "Interviewer Speaker Caller Operator Staff Manager Team Everyone Everybody All Folks Guys "
    "Note Summary Update Answer Question Example Input Output Subject Re Fwd Date Time Total "
    "Status Result Error Warning Step Tip Reminder Edit Ps Human Model Prompt Response Reply "
    "Comment Sir Madam Maam Boss Buddy Friend Dude Mate Babe Honey Sweetie Darling Love Folks "
    "Doctor Doc Patient Teacher Student Coach Mom Mum Dad Mother Father Grandma Grandpa "
    "Sunshine There Again Anyway Yes No Sure Great Good Nice Cool Awesome Amazing Wow".split()
)
# Days and months (and their abbreviations) are capitalised mid-sentence and never names here.
CALENDAR_WORDS = frozenset(
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday Mon Tue Tues Wed Thu Thur Thurs "  # noqa: SIM905
    "Fri Sat Sun January February March April May June July August September October November "
    "December Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Christmas Easter".split()
)
# Nationalities and languages: capitalised in English, and some are given names too ("German").
DEMONYMS = frozenset(
    "American English British Irish Scottish Welsh Canadian Mexican Brazilian Argentine "  # noqa: SIM905
    "Argentinian Chilean Colombian Peruvian Cuban Spanish Portuguese French German Dutch "
    "Belgian Swiss Austrian Italian Greek Turkish Polish Czech Slovak Hungarian Romanian "
    "Bulgarian Serbian Croatian Ukrainian Russian Swedish Norwegian Danish Finnish Icelandic "
    "Estonian Latvian Lithuanian Arabic Arab Egyptian Moroccan Israeli Hebrew Persian Iranian "
    "Iraqi Syrian Lebanese Indian Hindi Pakistani Bengali Chinese Mandarin Cantonese Japanese "
    "Korean Vietnamese Thai Filipino Indonesian Malaysian Australian Kiwi African Nigerian "
    "Kenyan Ghanaian Ethiopian Swahili Zulu European Asian Latin Latino Latina Hispanic Jewish "
    "Christian Muslim Catholic Buddhist Hindu".split()
)
# Interjections open a sentence or follow a greeting ("Oh Yeah!") and are never names.
INTERJECTIONS = frozenset(
    "Yeah Yes Yep Yup Nope Nah Wow Whoa Woah Oh Ah Aw Aww Haha Hah Lol Omg Hmm Ugh Oops "  # noqa: SIM905
    "Please Hello Hi Hey Thanks Okay Ok Alright Yay Woohoo Oof Ooh Gosh Geez Dang Damn Agreed "
    "Absolutely Definitely Totally Exactly Indeed Congrats Congratulations Cheers Bye".split()
)
NOT_NAMES = ROLE_WORDS | CALENDAR_WORDS | DEMONYMS | INTERJECTIONS | COMMON_WORD_NAMES


@lru_cache(maxsize=1)
def given_names() -> frozenset[str]:
    """Given names, title-cased: Faker's person providers in many locales and scripts (MIT), the
    1990 US Census first names (public domain, in the `names` package, MIT) and the English
    nicknames of a given name of those (the `nicknames` package, Apache-2.0: "Nate" of Nathan,
    "Matt", "Mel"; not "Little" of "Littleberry"). ~15,000 words."""
    first, _ = faker_names()
    census = importlib.resources.files("names")
    found = set(first)
    for file in ("dist.female.first", "dist.male.first"):
        found.update(
            line.split()[0].title() for line in census.joinpath(file).open() if line.strip()
        )
    table = importlib.resources.files("nicknames").joinpath("names.csv")
    with table.open() as handle:
        rows = [(row["name1"].title(), row["name2"].title()) for row in csv.DictReader(handle)]
    found.update(nickname for name, nickname in rows if name in found)
    return frozenset(w for w in found if w.isalpha())
