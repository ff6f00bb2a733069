"""Text queries: the pack's own encoder (the vector channel) and BM25 (the keyword channel), fused."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from memorypack import keyword as _channels
from memorypack.encoder import EncoderUnavailable, TextEncoder, check_text, encoder_spec
from memorypack.fs import Location
from memorypack.indexes import PackIndexes
from memorypack.keyword import LazyKeywordIndex, fuse, scaled, top_ranks
from memorypack.tables import has_text, strings, unit_query

log = logging.getLogger("memorypack.loader")
RETRIEVALS = ("hybrid", "keyword", "vector")


class TextQueries:
    """How relevant each memory is to a query text or vector (`relevance`): the pack's encoder
    (loaded on first use) and keyword index (built on first use) over its memories."""

    def __init__(
        self,
        indexes: PackIndexes,
        embeddings: np.ndarray,
        folder: Location,
        manifest: dict[str, Any],
    ) -> None:
        self.indexes = indexes
        self.embeddings = embeddings
        self.dim = int(embeddings.shape[1])
        self.folder = folder
        self.manifest = manifest
        self._keyword = LazyKeywordIndex(strings(indexes.memories, "text"))
        self._encoder: TextEncoder | None = None
        self.encoder_error: str | None = None  # why text queries run without the vector channel
        self._encoder_lock = threading.Lock()

    def encoder(self) -> TextEncoder:
        """The pack's embedding model (loaded and sha256-checked on first use, then kept).

        EncoderUnavailable (a PackError) when the pack ships none or `memorypack[embed]` is not
        installed; PackError when a model file does not match the manifest."""
        with self._encoder_lock:
            if self._encoder is None:
                if self.encoder_error is not None:
                    raise EncoderUnavailable(self.encoder_error)
                spec = encoder_spec(self.manifest)
                try:
                    if spec is None:
                        raise EncoderUnavailable(
                            f"pack {self.manifest['version']} ships no embedding model (published before "
                            "text queries, or its model could not be exported)"
                        )
                    self._encoder = TextEncoder(self.folder.parent, spec, self.dim)
                except EncoderUnavailable as error:
                    self.encoder_error = str(error)
                    raise
            return self._encoder

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length vectors of `texts` by the pack's model, comparable to `embeddings`."""
        return self.encoder().encode(list(texts))

    def warm(self, keyword: bool = True, encoder: bool = True) -> None:
        """`MemoryPack.warm`: the keyword index built and the encoder loaded now."""
        if encoder:
            with contextlib.suppress(EncoderUnavailable):
                self.encoder()
        if keyword:  # the index text queries will use: stems without the vector channel
            self._keyword.get(stemmed=self._encoder is None)

    def _query_vector(self, query: str, required: bool) -> np.ndarray | None:
        try:
            encoder = self.encoder()
        except EncoderUnavailable as error:
            if required:
                raise
            if not self._warned_keyword_only:
                log.warning("text queries use the keyword channel only: %s", error)
                self._warned_keyword_only = True
            return None
        return encoder.encode([query])[0]

    _warned_keyword_only = False

    def relevance(
        self,
        rows: np.ndarray,
        query: str | None,
        query_vector: Sequence[float] | np.ndarray | None,
        retrieval: str,
    ) -> dict[str, np.ndarray]:
        """The relevance parts of `rows` for a query (see `search`); {} without a query."""
        if retrieval not in RETRIEVALS:
            raise ValueError(f"retrieval must be one of {', '.join(RETRIEVALS)}, not {retrieval!r}")
        if query is not None and not isinstance(query, str):
            raise ValueError(f"query must be text, not {type(query).__name__}")
        if query is not None:
            check_text(query)
        text = query if has_text(query) else None
        if text is None and query_vector is None:
            return {}
        parts: dict[str, np.ndarray] = {}
        if retrieval != "keyword" and self.dim:
            vector = (
                unit_query(query_vector, self.dim)
                if query_vector is not None
                else self._query_vector(str(text), required=retrieval == "vector")
            )
            if vector is not None:
                parts["similarity"] = self._similarities(rows, vector).astype(np.float64)
        if text is None or retrieval == "vector":
            return parts  # the cosine is the relevance, as before text queries
        # Alone, the keyword channel matches stems; beside a cosine, words (memorypack.keyword).
        index = self._keyword.get(stemmed="similarity" not in parts)
        keyword = index.scores(text)[rows].astype(np.float64)
        parts["keyword"] = keyword
        parts["keyword_rank"] = top_ranks(keyword, keyword > 0).astype(np.float64)
        dense = None
        if "similarity" in parts:
            # A memory without an embedding has a zero row: no cosine to rank it by.
            similarity = parts["similarity"]
            parts["vector_rank"] = top_ranks(similarity, similarity != 0).astype(np.float64)
            dense = scaled(similarity, similarity != 0, min_max=True)
        fused = fuse(scaled(keyword, keyword > 0, min_max=False), dense)
        parts["neighbours"] = self._neighbour_share(rows, fused)
        parts["relevance"] = fused + parts["neighbours"]
        return parts

    def _neighbour_share(self, rows: np.ndarray, fused: np.ndarray) -> np.ndarray:
        """NEIGHBOUR_SHARE × the better fused score of a row's neighbours in time (the memories of
        its contact and kind just before and after it, when they are candidates too)."""
        everywhere = np.zeros(self.indexes.n + 1)  # the last entry stands for "no neighbour"
        everywhere[rows] = fused
        before, after = self.indexes.previous[rows], self.indexes.next[rows]
        return _channels.NEIGHBOUR_SHARE * np.maximum(everywhere[before], everywhere[after])

    def _similarities(self, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
        # Gathering a few rows is cheaper than a full scan; past a quarter of the pack it is not.
        if rows.size * 4 > self.indexes.n:
            return np.asarray(self.embeddings @ q)[rows]
        return np.asarray(self.embeddings[rows] @ q)
