"""How two statements' wordings compare: who said each, and how many content words they share."""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy.sparse import csr_matrix

from pipeline.frames import codes

# Phrases that hold a negating word but assert, never deny ("I won't quit, no matter what" says
# the same as "I won't quit"; "can't wait" is eagerness): removed before negations are counted.
NOT_NEGATIONS = (
    r"\b(?:no matter|no doubt|no problem|no worries|no wonder|not only|never mind|"
    r"can't wait|cannot wait|can't believe|cannot believe)\b"
)
# Words that carry no subject of their own: left out when two subjects' words are compared.
FUNCTION_WORDS = (
    r"a|an|the|and|or|but|so|to|of|in|on|at|for|with|by|from|as|is|are|was|were|be|been|am|"
    r"i|me|my|you|your|we|our|it|its|this|that|these|those|he|she|they|them|his|her|their|"
    r"just|really|very|too|also"
)


def speaker(metadata: pl.Expr) -> pl.Expr:
    """Who said a statement: the `speaker` key of its `metadata` object (SPEC §2), else null.

    A memory event's content is usually about its contact in the app's own words (null: one
    author). A log of a conversation between people (an importer such as LoCoMo's) names the
    person who said each line: two people's statements are never a conflict or a repeat of each
    other, however alike. Empty and non-string values count as null.
    """
    said = metadata.str.json_path_match("$.speaker").str.strip_chars()
    return pl.when(said.str.len_chars() > 0).then(said).otherwise(pl.lit(None, pl.String))


def subject_words(subjects: pl.Series) -> csr_matrix:
    """A (rows × words) 0/1 matrix: the words of each subject (FUNCTION_WORDS aside)."""
    words = (
        pl.DataFrame({"words": subjects.fill_null("").str.split(" ")})
        .with_row_index("row")
        .explode("words")
        .filter(
            (pl.col("words").str.len_chars() > 0)
            & ~pl.col("words").str.contains(rf"^(?:{FUNCTION_WORDS})$")
        )
        .unique(["row", "words"])
    )
    columns = codes(words["words"]) if words.height else np.zeros(0, np.int64)
    return csr_matrix(
        (np.ones(words.height, np.float32), (words["row"].to_numpy(), columns)),
        shape=(len(subjects), int(columns.max()) + 1 if len(columns) else 0),
    )


def word_overlap(words: csr_matrix, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Jaccard overlap of the word sets of rows i and j (pairwise); 0 when both are empty."""
    shared = np.asarray(words[i].multiply(words[j]).sum(axis=1)).ravel()
    sizes = np.asarray(words.sum(axis=1)).ravel()
    union = sizes[i] + sizes[j] - shared
    return np.divide(shared, union, out=np.zeros(len(i)), where=union > 0)
