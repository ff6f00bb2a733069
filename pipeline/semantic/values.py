"""The values a statement names (numbers, days, months, times of day, places, one pole of an
opposite pair, …), so that "one subject, another value" is told apart from "one statement, other
words": "prefers afternoon meetings" / "prefers morning meetings" sit 0.07-0.10 apart, closer than
most paraphrases, and are two statements, never one."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.sparse import csr_matrix

# Phrases that name one value in several words, matched first and replaced by one token
# (`<class>_<value>`), so that "early in the day" and "in the morning" are one value. Times of day
# only: a clock time is a number ("9am" / "10am" differ by their digits) and its am/pm a daypart.
PHRASES: tuple[tuple[str, str], ...] = (
    (r"\bearly in the day\b|\bfirst thing\b|\bbefore (?:noon|lunch|midday)\b", "daypart_morning"),
    (r"\bmornings?\b|\bbreakfast\b", "daypart_morning"),
    (r"\bafter (?:lunch|noon|midday)\b|\bafternoons?\b", "daypart_afternoon"),
    (r"\bafter (?:work|dinner)\b|\bevenings?\b|\btonight\b", "daypart_evening"),
    (r"\bovernight\b|\bmidnight\b|\bnights?\b", "daypart_night"),
    (r"\bevery day\b|\beach day\b|\bdaily\b", "period_day"),
    (r"\bevery week\b|\beach week\b|\bweekly\b", "period_week"),
    (r"\bevery month\b|\beach month\b|\bmonthly\b", "period_month"),
    (r"\bevery year\b|\beach year\b|\byearly\b|\bannually\b", "period_year"),
    (r"\bphone calls?\b|\bon the phone\b|\bby phone\b", "channel_phone"),
    (r"\btext messages?\b|\bin person\b|\bface to face\b", "channel_other"),
)


# A clock time's half of the day ("9am", "5 p.m."): after a digit only ("I am" names no time).
CLOCK: tuple[tuple[str, str], ...] = (
    (r"(\d)\s?a\.?m\b\.?", "daypart_morning"),
    (r"(\d)\s?p\.?m\b\.?", "daypart_pm"),
)
TOKEN = r"^(?:daypart|period|channel)_[a-z]+$"


def _table(cls: str, groups: dict[str, str]) -> dict[str, str]:
    """word → "<class>:<value>" for every word of every space-separated group (value: its key)."""
    return {w: f"{cls}:{value}" for value, words in groups.items() for w in words.split()}


_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday"
_MONTHS = "january february march april june july august september october november december"
_NUMBERS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
]
# Words that name a value, by class. `opposite` holds one pole of a scale per word: its value is
# "<scale>=<pole>", and two statements differ only where they name two poles of one scale.
WORD_VALUES: dict[str, str] = {
    **{w: f"number:{i}" for i, w in enumerate(_NUMBERS)},
    **_table("number", {"30": "thirty", "40": "forty", "50": "fifty", "100": "hundred"}),
    **_table("number", {"1000": "thousand", "12": "dozen", "1": "once single", "2": "twice"}),
    **_table("number", {"#1": "first", "#2": "second", "#3": "third", "#4": "fourth"}),
    **_table("weekday", {d: f"{d} {d}s" for d in _WEEKDAYS.split()}),
    **_table("weekday", {"weekend": "weekend weekends", "weekday": "weekday weekdays"}),
    **_table("month", {m: m for m in _MONTHS.split()}),
    **_table("period", {"day": "today", "tomorrow": "tomorrow", "yesterday": "yesterday"}),
    **_table("period", {"hour": "hourly", "quarter": "quarterly"}),
    **_table(
        "colour",
        {
            c: c
            for c in ["red", "blue", "green", "yellow", "black", "white", "brown", "orange", "pink"]
        },
    ),
    **_table("colour", {"gray": "gray grey", "purple": "purple violet"}),
    **_table("channel", {"email": "email emails e-mail mail", "phone": "phone call calls"}),
    **_table("channel", {"other": "sms slack chat whatsapp video zoom letter"}),
    **_table(
        "gender", {"m": "man men boy boys guy male", "f": "woman women girl girls lady female"}
    ),
    **_table(
        "opposite",
        {
            "level=high": "higher high",
            "level=low": "lower low",
            "move=up": "rise rises rose rising increase increases increased gain gains",
            "move=down": "fall falls fell falling decrease decreases decreased drop drops",
            "order=before": "before earlier early",
            "order=after": "after later late",
            "amount=more": "more most",
            "amount=less": "less fewer least",
            "trade=buy": "buy buys bought buying",
            "trade=sell": "sell sells sold selling",
            "outcome=win": "win wins won winning",
            "outcome=lose": "lose loses lost losing",
            "size=big": "big bigger large larger huge",
            "size=small": "small smaller little tiny",
            "length=long": "long longer lengthy detailed",
            "length=short": "short shorter brief concise",
            "speed=fast": "fast faster quick quickly",
            "speed=slow": "slow slower slowly",
            "heat=hot": "hot warm",
            "heat=cold": "cold cool iced",
            "price=cheap": "cheap cheaper inexpensive",
            "price=dear": "expensive pricey",
            "register=formal": "formal",
            "register=casual": "casual informal",
            "with=with": "with",
            "with=without": "without",
            "market=open": "open opens opened",
            "market=close": "close closes closed",
            "compass=north": "north northern",
            "compass=south": "south southern",
            "compass=east": "east eastern",
            "compass=west": "west western",
        },
    ),
}
# A class per column of `mismatches`; `opposite` differs per scale, the others per class.
CLASSES = (
    "number",
    "weekday",
    "month",
    "daypart",
    "period",
    "colour",
    "channel",
    "gender",
    "opposite",
    "proper",
)
CLASS_INDEX = {c: i for i, c in enumerate(CLASSES)}
# A capitalised word after the first names a person, place or thing ("Lisbon", "Porto"); its first
# letters are its value, so that "Syria" / "Syrian" and "Egypt" / "Egypt's" stay one. Text whose
# words are mostly capitalised (a headline in title case) names nothing this way.
PROPER_PREFIX = 4
TITLE_CASE_SHARE = 0.5


def _plain(texts: pl.Expr) -> pl.Expr:
    """Lower case, the PHRASES as single tokens, punctuation as spaces."""
    expr = texts.fill_null("").str.to_lowercase().str.replace_all("[\u2019\u2018`]", "'")
    for pattern, token in CLOCK:
        expr = expr.str.replace_all(pattern, f"${{1}} {token} ")
    for pattern, token in PHRASES:
        expr = expr.str.replace_all(pattern, f" {token} ")
    expr = expr.str.replace_all(r"(\d)(?:st|nd|rd|th)\b", "${1}")  # "1st" / "15th": numbers
    return expr.str.replace_all(r"(\d),(\d{3})", "${1}${2}").str.replace_all(r"[^\w\s]", " ")


def _prefix(words: pl.Expr) -> pl.Expr:
    return words.list.eval(
        pl.lit("proper:") + pl.element().str.to_lowercase().str.slice(0, PROPER_PREFIX)
    )


def _proper_values(texts: pl.Expr) -> pl.Expr:
    """The prefixes of the capitalised words after the first (not "I", not a day or month)."""
    words = texts.fill_null("").str.extract_all(r"[A-Za-z][\w'-]*").list.slice(1)
    capitalised = words.list.eval(
        pl.element().filter(
            pl.element().str.contains(r"^[A-Z][\w'-]{2,}")
            & ~pl.element().str.to_lowercase().is_in(list(WORD_VALUES))
        )
    )
    title_case = capitalised.list.len() > words.list.len() * TITLE_CASE_SHARE
    return pl.when(title_case).then(pl.lit([], pl.List(pl.String))).otherwise(_prefix(capitalised))


def value_tokens(texts: pl.Series) -> pl.DataFrame:
    """row, token ("<class>:<value>"), named: one row per distinct value a text names (`named`)
    or only mentions: every word's prefix as a `proper` token, so that a name counts as another
    value only when the other side does not hold it anywhere, its first word or lower case too
    ("Castro celebrates" / "Fidel Castro celebrates")."""
    frame = pl.DataFrame({"text": texts}).with_row_index("row")
    plain = frame.select(
        "row",
        words=_plain(pl.col("text")).str.split(" "),
        proper=_proper_values(pl.col("text")),
        mentioned=_prefix(pl.col("text").fill_null("").str.extract_all(r"[A-Za-z][\w'-]{2,}")),
    )
    words = plain.select("row", "words").explode("words").drop_nulls()
    by_word = words.select(
        "row",
        token=pl.when(pl.col("words").str.contains(r"^\d+$"))
        .then(pl.lit("number:") + pl.col("words").str.strip_chars_start("0").replace("", "0"))
        .when(pl.col("words").str.contains(TOKEN))
        .then(pl.col("words").str.replace("_", ":"))
        .otherwise(pl.col("words").replace_strict(WORD_VALUES, default=None)),
        named=pl.lit(True),
    )
    proper = plain.select("row", token="proper", named=pl.lit(True)).explode("token")
    mentioned = plain.select("row", token="mentioned", named=pl.lit(False)).explode("token")
    return (
        pl.concat([by_word, proper, mentioned])
        .drop_nulls()
        .sort("row", "token", "named", descending=[False, False, True])
        .unique(["row", "token"], keep="first", maintain_order=True)
    )


def _scale(token: pl.Expr) -> pl.Expr:
    """What a token's value is a value of: its class, or for `opposite` its scale."""
    return pl.when(token.str.starts_with("opposite:")).then(token.str.split("=").list.first())


@dataclass(frozen=True)
class Values:
    """Per text, the values it names and those it mentions (a sparse 0/1 row each, one column a
    token), which scale each token is a value of, and each scale's class (index in CLASSES)."""

    named: csr_matrix
    mentioned: csr_matrix
    scales: csr_matrix
    scale_class: np.ndarray


def value_matrix(texts: pl.Series) -> Values:
    tokens = value_tokens(texts)
    per_token = (
        tokens.select(pl.col("token").unique().sort())
        .with_row_index("column")
        .with_columns(
            cls=pl.col("token").str.split(":").list.first(),
            scale=_scale(pl.col("token")).fill_null(pl.col("token").str.split(":").list.first()),
        )
        .with_columns(scale_id=pl.col("scale").rank("dense").cast(pl.Int64) - 1)
    )
    tokens = tokens.join(per_token, on="token", how="left", maintain_order="left")

    def rows(frame: pl.DataFrame) -> csr_matrix:
        return csr_matrix(
            (np.ones(frame.height, np.float32), (frame["row"], frame["column"])),
            shape=(len(texts), per_token.height),
        )

    n_scales = per_token["scale_id"].n_unique()
    first = per_token.unique("scale_id").sort("scale_id")
    return Values(
        named=rows(tokens.filter("named")),
        mentioned=rows(tokens),
        scales=csr_matrix(
            (np.ones(per_token.height, np.float32), (per_token["column"], per_token["scale_id"])),
            shape=(per_token.height, n_scales),
        ),
        scale_class=first["cls"].replace_strict(CLASS_INDEX, return_dtype=pl.Int64).to_numpy(),
    )


def _class_sums(per_scale: csr_matrix, scale_class: np.ndarray) -> np.ndarray:
    """(pairs × scales) → (pairs × CLASSES): summed over each class's scales."""
    to_class = csr_matrix(
        (np.ones(len(scale_class), np.float32), (np.arange(len(scale_class)), scale_class)),
        shape=(len(scale_class), len(CLASSES)),
    )
    return np.asarray((per_scale @ to_class).todense())


def mismatches(values: Values, i: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pair (i[k], j[k]) and class: (other, extra) — `other`: each side names a value of one
    scale that the other does not mention ("mornings" / "afternoons", "two" / "three", "Lisbon" /
    "Porto"); `extra`: only one side does ("meetings" / "meetings on Mondays")."""
    shape = (len(i), len(CLASSES))
    if not values.named.shape[1] or not len(i):
        return np.zeros(shape, bool), np.zeros(shape, bool)
    only_i = (values.named[i] - values.named[i].multiply(values.mentioned[j])) @ values.scales
    only_j = (values.named[j] - values.named[j].multiply(values.mentioned[i])) @ values.scales
    other = _class_sums(only_i.multiply(only_j), values.scale_class) > 0
    extra = (_class_sums(only_i, values.scale_class) > 0) != (
        _class_sums(only_j, values.scale_class) > 0
    )
    return other, extra & ~other


def shared_names(values: Values, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Per pair, how many names (capitalised words, `proper`) one side names and the other
    mentions: one person's statements share that person's name, which brings their vectors
    closer whatever they say ("X reports to Y" / "X is mentoring Y" 0.20 apart)."""
    if not values.named.shape[1] or not len(i):
        return np.zeros(len(i))
    proper = np.flatnonzero(values.scale_class == CLASS_INDEX["proper"])
    columns = np.asarray(values.scales[:, proper].sum(axis=1) > 0).ravel().astype(np.float32)
    from_i = values.named[i].multiply(values.mentioned[j]) @ columns
    from_j = values.named[j].multiply(values.mentioned[i]) @ columns
    return np.maximum(np.asarray(from_i).ravel(), np.asarray(from_j).ravel())
