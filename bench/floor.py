"""The model-bound floor of a night (issue 53 item 2), measured in the same run as the night.

A night cannot be faster than the work its models must do once, on all of the machine's cores:

    floor = ingest's bare parse of the night's landing files
          + distinct texts to encode × the encoder's per-text cost
          + texts the redactor analyses × its per-text cost (spaCy's NER, behind its gate)

- **Distinct texts to encode:** one vector per distinct memory text of each tenant: the text its
  pack holds (redacted, SPEC §5) for a memory in the pack, the text memory_embeddings embedded for
  one the pack leaves out (archived, yet clustered). An incremental night's: those no earlier
  night had.
- **Texts the redactor analyses:** what the night added to the redaction caches (each tenant's
  pack's and the analytics build's): distinct texts no cache held, each analysed once.
- **Per-text costs, machine-wide:** the encoder as the pipeline runs it (its runs spread over
  every core) on a sample of the night's texts; the redactor's analysis in one process on a
  sample of the night's raw texts, divided by the cores (one analysis per core at best).
- **Bare parse:** DuckDB's read of every contract field of the night's landing files.

The counts are the night's own, read from the home after it; the costs are timed after the
nights, on the same machine, in the same run. Night ÷ floor says how far the night is from
what its models allow (issue 53 asks ≤ 1.3).
"""

from __future__ import annotations

import os
import random
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import polars as pl

from bench.common import Figure, rounded

# Texts timed for each per-text cost (quick runs: every distinct text up to this many).
SAMPLE_TEXTS = 1_000
GOAL = 1.3  # issue 53: both nights within 1.3 × their floor, at 10 × 1,000,000 interactions
HASHES = {"tenant_id": pl.String, "text_hash": pl.String}


@dataclass(frozen=True)
class Costs:
    """Machine-wide seconds per text, and what they were measured on."""

    encode_s: float
    analyse_s: float
    cores: int
    encoded_sample: int
    analysed_sample: int


@dataclass(frozen=True)
class Floor:
    """A night's model-bound work and its floor in seconds."""

    texts_to_encode: int
    texts_analysed: int
    parse_s: float
    encode_s: float
    analyse_s: float

    @property
    def seconds(self) -> float:
        return self.parse_s + self.encode_s + self.analyse_s


def floor_of(counts: dict[str, int], costs: Costs, parse_s: float) -> Floor:
    """The floor of a night whose model-bound `counts` (texts_to_encode, texts_analysed) cost
    `costs` a text, after a bare parse of `parse_s`."""
    return Floor(
        texts_to_encode=counts["texts_to_encode"],
        texts_analysed=counts["texts_analysed"],
        parse_s=parse_s,
        encode_s=counts["texts_to_encode"] * costs.encode_s,
        analyse_s=counts["texts_analysed"] * costs.analyse_s,
    )


# ---- the counts: what a night left in the home --------------------------------------------------
def memory_texts(packed: pl.DataFrame, embedded: pl.DataFrame) -> pl.DataFrame:
    """Distinct (tenant_id, text_hash) a tenant needs one vector each of: the normalised text of
    each packed memory that has an embedding (packed: tenant_id, memory_id, text,
    has_embedding), and the embedded text of each memory the pack leaves out (embedded:
    tenant_id, memory_id, text_hash of memory_embeddings)."""
    from pipeline.semantic.embed import normalise_text, text_hashes

    texts = packed.filter(pl.col("has_embedding")).select(
        "tenant_id", normalise_text(pl.col("text")).alias("text")
    )
    in_pack = texts.with_columns(text_hashes(texts["text"])).select(list(HASHES))
    keys = ["tenant_id", "memory_id"]
    left_out = embedded.join(packed.select(keys), on=keys, how="anti").select(list(HASHES))
    return pl.concat([in_pack, left_out]).unique().cast(HASHES)  # type: ignore[arg-type]


def added(after: pl.DataFrame, before: pl.DataFrame | None) -> int:
    """Rows of `after` that `before` (same columns; None: an empty home) did not hold."""
    if before is None:
        return after.unique().height
    return after.unique().join(before, on=after.columns, how="anti").height


def night_counts(
    after: dict[str, pl.DataFrame], before: dict[str, pl.DataFrame] | None
) -> dict[str, int]:
    """The night's model-bound work from the home's snapshots after and before it (`snapshot`)."""
    was = before or {}
    return {
        "texts_to_encode": added(after["memory_texts"], was.get("memory_texts")),
        "texts_analysed": added(after["analysed"], was.get("analysed")),
        "texts_encoded": added(after["encoded"], was.get("encoded")),
    }


def _parts(root: Path, folder: str) -> pl.DataFrame:
    """(cache, text_hash) of every cache part under `root` in a key folder named `folder` (a glob):
    the cache is the part's folder above its key (the home's, or a tenant's)."""
    parts = sorted(root.glob(f"**/{folder}/part-*.parquet"))
    frames = [
        pl.read_parquet(p, columns=["text_hash"]).with_columns(
            cache=pl.lit(str(p.parent.parent.relative_to(root)))
        )
        for p in parts
    ]
    empty = pl.DataFrame(schema={"text_hash": pl.String, "cache": pl.String})
    return (
        pl.concat(frames).select("cache", "text_hash")
        if frames
        else empty.select("cache", "text_hash")
    )


PACKED = {
    "tenant_id": pl.String,
    "memory_id": pl.String,
    "text": pl.String,
    "has_embedding": pl.Boolean,
}


def packed(home: Path) -> pl.DataFrame:
    """Every live pack's memories (PACKED columns)."""
    from memorypack.format import read_latest

    frames = [pl.DataFrame(schema=PACKED)]
    for folder in sorted(p for p in (home / "packs").glob("*") if p.is_dir()):
        version = read_latest(folder)
        if version is not None:
            rows = pl.read_parquet(
                folder / str(version) / "memories.parquet", columns=list(PACKED)[1:]
            )
            frames.append(rows.with_columns(tenant_id=pl.lit(folder.name)).select(list(PACKED)))
    return pl.concat(frames)


def snapshot(home: Path) -> dict[str, pl.DataFrame]:
    """What a night leaves that its model-bound work is counted from: the distinct memory texts
    of the live packs (`memory_texts`), the redaction caches' analysed texts, the embedding
    caches' encoded texts."""
    from pipeline.config import Paths
    from pipeline.pii.rules import detector_version
    from pipeline.storage.lake import Lake

    paths = Paths.from_env(home)
    embedded = (
        Lake(paths).read_or_empty("memory_embeddings").select("tenant_id", "memory_id", "text_hash")
    )
    key = re.sub(r"[^A-Za-z0-9._+-]", "_", detector_version())  # the cache's folder of texts
    return {
        "memory_texts": memory_texts(packed(home), embedded.collect()),
        "analysed": _parts(Path(str(paths.pii_cache)), key),
        "encoded": _parts(Path(str(paths.embedding_cache)), "*"),
    }


# ---- the costs: timed after the nights ----------------------------------------------------------
def _sample(texts: list[str], n: int, seed: int = 0) -> list[str]:
    distinct = sorted(set(texts))
    return random.Random(seed).sample(distinct, min(n, len(distinct)))


def _raw_texts(home: Path) -> list[str]:
    """The lake's raw requests, answers and statements (what the redactor analyses most)."""
    from pipeline.config import Paths
    from pipeline.storage.lake import Lake

    lake = Lake(Paths.from_env(home))
    columns = {"interactions": ["input", "output"], "memory_statements": ["content"]}
    return [
        text
        for table, names in columns.items()
        for name in names
        for text in lake.read_or_empty(table).select(name).collect().to_series().drop_nulls()
    ]


def costs(home: Path, export_dir: Path, sample: int = SAMPLE_TEXTS) -> Costs:
    """The encoder's and the redactor's machine-wide seconds per text, each timed once warm on a
    sample of this home's texts: the packs' memory texts (encoded as the pipeline encodes), the
    lake's raw requests, answers and statements (analysed as the redactor analyses)."""
    from pipeline.pii.detect import analyse, warm_up
    from pipeline.semantic.embed import EmbedConfig, encode, load_model

    config = EmbedConfig(export_dir=export_dir)
    model = load_model(None, config.backend, str(export_dir))
    texts = packed(home)["text"].drop_nulls().to_list()
    encode(texts[:16], model, config=config)  # warm
    to_encode = _sample(texts, sample)
    started = time.perf_counter()
    encode(to_encode, model, config=config)
    encode_s = (time.perf_counter() - started) / max(1, len(to_encode))
    warm_up()
    to_analyse = _sample(_raw_texts(home), sample)
    started = time.perf_counter()
    analyse(to_analyse)
    cores = len(os.sched_getaffinity(0))
    analyse_s = (time.perf_counter() - started) / max(1, len(to_analyse)) / cores
    return Costs(encode_s, analyse_s, cores, len(to_encode), len(to_analyse))


def parse_seconds(landing: Path, dates: list[str]) -> float:
    """ingest's bare parse of the load dates' files (DuckDB reads every contract field), warm."""
    from bench.sections_ingest import duck_parse, landing_files

    files = landing_files(*(landing / d for d in dates))
    duck_parse(files[:1])
    started = time.perf_counter()
    duck_parse(files)
    return time.perf_counter() - started


def count(
    night: dict[str, Any], home: Path, before: dict[str, pl.DataFrame] | None
) -> dict[str, pl.DataFrame]:
    """Right after a night: its model-bound work into `night["floor_counts"]`; the home's
    snapshot, the next night's `before`."""
    after = snapshot(home)
    night["floor_counts"] = night_counts(after, before)
    return after


def time_floors(
    home: Path, landing: Path, export_dir: Path, dated: list[tuple[dict[str, Any], list[str]]]
) -> None:
    """After the nights, on the same machine: the per-text costs, and each night's bare parse of
    its load dates (`dated`: night, its dates), into each night (`floor_costs`, `parse_s`)."""
    measured = asdict(costs(home, export_dir))
    for night, dates in dated:
        night["parse_s"] = parse_seconds(landing, dates)
        night["floor_costs"] = measured


# ---- the figure ---------------------------------------------------------------------------------
def figure(
    label: str, night_s: float, floor: Floor, costs_: Costs, counts: dict[str, int]
) -> Figure:
    """`label` night ÷ its floor, with the parts of the floor."""
    share = night_s / floor.seconds if floor.seconds > 0 else None
    return Figure(
        name=f"{label} night ÷ its model-bound floor",
        value=rounded(share),
        unit="×",
        baseline_name="floor (s): bare parse + distinct texts × encoder + analysed texts × NER",
        baseline_value=round(floor.seconds, 1),
        ratio=rounded(share),
        goal=f"≤ {GOAL:g} (issue 53)",
        goal_met=share is not None and share <= GOAL,
        details={
            "night_s": round(night_s, 1),
            "floor": {
                k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(floor).items()
            },
            "costs": asdict(costs_),
            "counts": counts,
            "what": __doc__.split("\n\n")[1] if __doc__ else "",
        },
    )


def night_floor_figures(nights: dict[str, dict[str, Any]]) -> list[Figure]:
    """One figure per labelled night (`count`ed and `time_floors`ed)."""
    figures = []
    for label, night in nights.items():
        counts, costs_ = night["floor_counts"], Costs(**night["floor_costs"])
        floor = floor_of(counts, costs_, night["parse_s"])
        figures.append(figure(label, night["seconds"], floor, costs_, counts))
    return figures
