"""The merge judgement against the distance rule on people's conversations, as a night now embeds
them: the redacted text (issue 52, after issue 53 item 3).

`python -m bench.judgement_redacted`: LoCoMo's shared half (`../shared/data/locomo/`, evaluation
only, never copied here) imported as a night imports it, each statement redacted as its pack holds
it (the detector, then the tenant's names: the speakers), embedded by the night's int8 encoder,
and consolidated without conflicts three ways: the distance rule with the value guard, the
judgement (the default) reading the original text's words, as a night does, and the judgement
reading the redacted text's words. Prints each one's pairs of turns sharing a cluster, judged by the hand labels of
`tests/fixtures/locomo_cluster_pairs.csv` (different facts, and pairs nobody labelled).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import polars as pl

from bench.common import offline_env
from bench.sections_conversations import (
    DATA,
    cluster_labels,
    judged_cluster_pairs,
    shared_members,
)
from pipeline.ingest import contracts
from pipeline.ingest.folder import ingest_folder, typed_tables
from pipeline.ingest.importers.locomo import end_date, import_locomo
from pipeline.ingest.layout import Paths
from pipeline.pii.redactor import Redactor
from pipeline.semantic.consolidate import ConsolidationConfig, consolidate
from pipeline.semantic.embed import EmbedConfig, embed_with_cache, memory_texts
from pipeline.semantic.embed.redacted import memory_redaction
from pipeline.storage.vectors import TextVectors


def main() -> None:
    offline_env()
    files = sorted(DATA.glob("conv-*.json"))
    if not files:
        print(f"no LoCoMo conversations in {DATA}: nothing measured")
        return
    work, day = Path(tempfile.mkdtemp()), end_date(files)
    import_locomo(files, work / "landing", load_date=day)
    statements = typed_tables(ingest_folder(work / "landing" / day.isoformat(), day).events.lazy())[
        "memory_statements"
    ]
    none = pl.DataFrame(schema=contracts.INTERACTION_SCHEMA)
    redact = memory_redaction(Redactor.for_home(Paths(work / "home")), none, statements)
    texts = memory_texts(none, statements, redact=redact)
    started = time.perf_counter()
    done = embed_with_cache(texts, None, name="int8", config=EmbedConfig())
    print(f"{texts.height} statements embedded in {time.perf_counter() - started:.0f} s")
    vectors = TextVectors.from_frame(done.fresh)
    redacted = statements.with_columns(
        content=redact(statements.select("tenant_id", raw="content"))["raw"]
    )
    judged = ConsolidationConfig()
    for name, frame, config in (
        (
            "distance rule 0.15 + value guard",
            statements,
            ConsolidationConfig(statement_judgement=False),
        ),
        ("judgement (default), the original text's words", statements, judged),
        ("judgement, the redacted text's words", redacted, judged),
    ):
        result = consolidate(frame, none, done.embeddings, pl.DataFrame(), vectors, config)
        print(name, judged_cluster_pairs(shared_members(result.summaries), cluster_labels()))


if __name__ == "__main__":
    main()
