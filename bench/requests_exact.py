"""What deciding requests near the interaction threshold in fp32 costs (issue 52 item 4).

`python -m bench.requests_exact [INTERACTIONS]` (default 6,000): one generated tenant over two
days (the bench's cached landing), its requests embedded by the night's int8 encoder into a fresh
cache, then consolidated as a first night and as an incremental night, once with int8 vectors
alone and once with the fp32 path (`exact`, a fresh fp32 cache). Prints, per side, the requests,
distinct texts, interaction clusters, texts decided in fp32, consolidation seconds and the int8
embedding seconds of the same texts, measured in the same run.
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import polars as pl

from bench.common import offline_env
from bench.data import landing
from pipeline.ingest.folder import ingest_folder, typed_tables
from pipeline.semantic.consolidate import Consolidation, consolidate
from pipeline.semantic.embed import EmbedConfig, embed_with_cache, memory_texts
from pipeline.semantic.embed.exact import fp32_vectors
from pipeline.storage.vectors import EmbeddingCache


def main(interactions: int) -> None:
    offline_env()
    root, _ = landing(interactions, days=2, tenants=1)
    days = sorted(p for p in root.iterdir() if p.is_dir())
    typed = [typed_tables(ingest_folder(d, date.fromisoformat(d.name)).events.lazy()) for d in days]
    nights = [pl.concat([t["interactions"] for t in typed[: k + 1]]) for k in range(len(typed))]
    none = pl.DataFrame(schema=typed[0]["memory_statements"].schema)
    config, work = EmbedConfig(), Path(tempfile.mkdtemp())
    for exact_path in (False, True):
        cache = EmbeddingCache(work / f"int8-{exact_path}")
        exact = fp32_vectors(EmbeddingCache(work / "fp32"), config) if exact_path else None
        previous: Consolidation | None = None
        line = [f"fp32 path {'on ' if exact_path else 'off'}:"]
        for k, requests in enumerate(nights):
            texts = memory_texts(requests, none)
            started = time.perf_counter()
            done = embed_with_cache(texts, cache.scan("m"), name="m", config=config)
            embedded_s = time.perf_counter() - started
            cache.append("m", done.fresh)
            vectors = cache.vectors("m", done.embeddings["text_hash"])
            started = time.perf_counter()
            previous = consolidate(
                none, requests, done.embeddings, pl.DataFrame(), vectors, None, previous, "s", exact
            )
            seconds = time.perf_counter() - started
            clusters = previous.summaries.filter(pl.col("scope") == "interaction").height
            line.append(
                f"night {k + 1}: {requests.height} requests, {texts['text_hash'].n_unique()} "
                f"distinct, {clusters} clusters, {previous.exact_interaction_texts} in fp32, "
                f"consolidation {seconds:.1f} s, int8 embedding {embedded_s:.1f} s;"
            )
        print(" ".join(line), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6_000)
