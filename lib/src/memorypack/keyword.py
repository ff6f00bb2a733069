"""The keyword channel of hybrid retrieval: BM25 over the pack's memory texts, and score fusion.

Built by the loader from memories.parquet, not shipped in the pack: a format-1 loader refuses a
file its format does not list, so a stored index would make every deployed loader refuse new
packs; and the one tokenizer that makes the index also splits the queries, so the two cannot
drift apart between a pipeline and a library version. It is built on the first text query (or
`MemoryPack.warm()`), in pyarrow and numpy, no Python loop over texts (one over the distinct
tokens, for the stems of a stemmed index: `memorypack.stem`; see the bench for its cost at
100,000 memories).

The keyword channel alone (`retrieval="keyword"`, or "hybrid" without a vector: the library
without `memorypack[embed]`) matches stems, so "refund" finds "refunds"; fused with the vector
channel, which matches inflections by meaning, it matches words as written (the constants below
were chosen so, and stems there lost one of 24 paraphrase queries of tests/test_hybrid_retrieval.py's
planted set, as a query's "want" then matched every "Wants …" row).
"""

from __future__ import annotations

import re
import threading
import unicodedata

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memorypack.stem import stem

# Okapi BM25 with the usual constants (Robertson & Zaragoza 2009): term-frequency saturation k1,
# length normalisation b.
BM25_K1 = 1.2
BM25_B = 0.75
# Each channel's rank (1 = best) among its best RANK_DEPTH rows is reported as a score part.
RANK_DEPTH = 100
# Fusion (issue 41): every candidate row is scored, so a list holds k rows whenever the filter
# does. Each channel's scores are scaled to [0, 1] over the candidates (BM25 by the best row's,
# the cosine min-max) and added, the keyword channel weighted KEYWORD_WEIGHT, the vector channel
# the rest. What answers a question is often said in the turns around the one that matches it,
# so a row also gets NEIGHBOUR_SHARE of the better fused score of its neighbours in time (same
# contact, same kind). Both constants (and ranking's INACTIVE_FACTOR) were chosen by
# leave-one-conversation-out on the bench's LoCoMo conversations (each fold chose these; see
# bench/README.md). Rank fusion (RRF, all rows) and ranking only rows near each channel's best
# (BM25 ≥ half the best, cosine ≥ the best − 0.1: the rule before) found fewer evidence turns
# there (all@10 0.55 and 0.52 against 0.62) and the latter left lists short of k.
KEYWORD_WEIGHT = 0.3
NEIGHBOUR_SHARE = 0.5
# A query term found in more than this share of the rows (and in more than COMMON_TERM_MIN_ROWS
# rows) says nothing about which row is meant, nor does an English function word: ignored.
COMMON_TERM_SHARE = 0.05
COMMON_TERM_MIN_ROWS = 50
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)
# A token is a run of letters and digits: "ORD-48213" → "ord", "48213"; "e-mail" → "e", "mail".
_SEPARATORS = r"[^\p{L}\p{N}]+"


def tokenize(texts: pa.Array) -> pa.Array:
    """Each text's tokens (a list array): NFKC, lower case, split on anything but letters/digits."""
    texts = pc.fill_null(texts.cast(pa.large_string()), "")
    texts = pc.utf8_lower(pc.utf8_normalize(texts, "NFKC"))
    split = pc.utf8_split_whitespace(pc.replace_substring_regex(texts, _SEPARATORS, " "))
    # Splitting leaves an empty token at each end of a text that starts or ends with a separator.
    flat = pc.list_flatten(split)
    keep = pc.greater(pc.utf8_length(flat), 0).to_numpy(zero_copy_only=False)
    parents = pc.list_parent_indices(split).to_numpy(zero_copy_only=False)[keep]
    counts = np.bincount(parents, minlength=len(texts))
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return pa.LargeListArray.from_arrays(pa.array(offsets), pc.filter(flat, pa.array(keep)))


_TOKEN = re.compile(r"[^\W_]+")
# A stop word's term key: set apart from every term, so "us" (a stop word) never drops "uses".
_STOP = "\x00"


def term_key(token: str, stemmed: bool = False) -> str:
    """The term a token counts as: itself, or its stem (memorypack.stem) in a stemmed index, so
    a query for "refund" finds "refunds" and "refunded"; a stop word keeps a key of its own that
    is never searched."""
    if token in STOPWORDS:
        return _STOP + token
    return stem(token) if stemmed else token


def query_tokens(text: str) -> list[str]:
    """`tokenize` for one text, in Python: pyarrow compiles its Unicode regex on every call
    (~4 ms a query); this gives the same tokens (tests/test_hybrid_retrieval.py) in microseconds."""
    # U+0130 (İ) is the one letter whose full lower case (Python's) is two characters; the simple
    # mapping pyarrow uses gives "i".
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).replace("\u0130", "i").lower())


class KeywordIndex:
    """BM25 postings, term-major: the rows holding each term and each row's weight for it; with
    `stemmed`, a term is a stem (texts and queries alike)."""

    def __init__(self, texts: pa.Array, stemmed: bool = False) -> None:
        n = len(texts)
        self.stemmed = stemmed
        tokens = tokenize(texts)
        flat = pc.list_flatten(tokens)
        lengths = pc.list_value_length(tokens).to_numpy(zero_copy_only=False).astype(np.float64)
        self.n = n
        if n == 0 or len(flat) == 0:
            self._terms: dict[str, int] = {}
            self._starts = np.zeros(1, dtype=np.int64)
            self._rows = np.zeros(0, dtype=np.int64)
            self._weights = np.zeros(0, dtype=np.float32)
            return
        encoded = pc.dictionary_encode(flat)
        term_ids = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        rows = pc.list_parent_indices(tokens).to_numpy(zero_copy_only=False).astype(np.int64)
        # The distinct tokens become terms (stems, when stemmed): one Python call per distinct
        # token, never one per row.
        distinct = encoded.dictionary.to_pylist()
        ids: dict[str, int] = {}
        stem_of = np.fromiter(
            (ids.setdefault(term_key(t, stemmed), len(ids)) for t in distinct),
            np.int64,
            len(distinct),
        )
        vocabulary = list(ids)
        term_ids = stem_of[term_ids]
        keys, tf = np.unique(term_ids * n + rows, return_counts=True)  # sorted: term, then row
        terms, posting_rows = keys // n, keys % n
        df = np.bincount(terms, minlength=len(vocabulary)).astype(np.float64)
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths / max(float(lengths.mean()), 1e-9))
        tf = tf.astype(np.float64)
        weights = idf[terms] * tf * (BM25_K1 + 1) / (tf + norm[posting_rows])
        common = df > max(COMMON_TERM_SHARE * n, COMMON_TERM_MIN_ROWS)
        self._terms = {
            term: i
            for i, term in enumerate(vocabulary)
            if not common[i] and not term.startswith(_STOP)
        }
        self._starts = np.concatenate([[0], np.cumsum(df.astype(np.int64))])
        self._rows = posting_rows
        self._weights = weights.astype(np.float32)

    def query_terms(self, query: str) -> list[int]:
        keys = {term_key(t, self.stemmed) for t in query_tokens(query)}
        return sorted({self._terms[k] for k in keys if k in self._terms})

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every row for the query (0 where no query term occurs)."""
        scores = np.zeros(self.n, dtype=np.float32)
        for term in self.query_terms(query):
            start, end = self._starts[term], self._starts[term + 1]
            scores[self._rows[start:end]] += self._weights[start:end]  # a row once per term
        return scores


class LazyKeywordIndex:
    """Each index (exact or stemmed) built once, on first use, by whichever thread asks first."""

    def __init__(self, texts: pa.Array) -> None:
        self._texts = texts  # the pack's own column: kept, not copied
        self._indexes: dict[bool, KeywordIndex] = {}
        self._lock = threading.Lock()

    def get(self, stemmed: bool = False) -> KeywordIndex:
        if stemmed not in self._indexes:
            with self._lock:
                if stemmed not in self._indexes:
                    self._indexes[stemmed] = KeywordIndex(self._texts, stemmed)
        return self._indexes[stemmed]


def top_ranks(scores: np.ndarray, valid: np.ndarray, depth: int = RANK_DEPTH) -> np.ndarray:
    """1-based rank of each entry among the `depth` best valid ones (0: not ranked). Ties keep
    the pack's order, so a ranking never depends on the sort's whims."""
    ranks = np.zeros(scores.size, dtype=np.int64)
    candidates = np.flatnonzero(valid)
    if not candidates.size:
        return ranks
    if candidates.size > depth:
        candidates = candidates[np.argpartition(-scores[candidates], depth - 1)[:depth]]
    order = candidates[np.lexsort((candidates, -scores[candidates]))]
    ranks[order] = np.arange(1, order.size + 1)
    return ranks


def scaled(scores: np.ndarray, valid: np.ndarray, min_max: bool) -> np.ndarray:
    """`scores` on [0, 1] over the valid entries (0 elsewhere): divided by the best (BM25, whose
    zero means "no query term"), or min-max (a cosine, whose zero means nothing)."""
    out = np.zeros(scores.size)
    if not valid.any():
        return out
    values = scores[valid]
    low = float(values.min()) if min_max else 0.0
    span = float(values.max()) - low
    out[valid] = (values - low) / span if span > 0 else 1.0 if min_max else 0.0
    return out


def fuse(keyword: np.ndarray, vector: np.ndarray | None) -> np.ndarray:
    """The channels' scaled scores (see `scaled`) weighted by KEYWORD_WEIGHT and the rest: 1.0 =
    best in both; the keyword channel's alone without a vector."""
    if vector is None:
        return keyword
    return KEYWORD_WEIGHT * keyword + (1 - KEYWORD_WEIGHT) * vector
