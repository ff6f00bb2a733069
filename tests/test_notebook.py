"""The analyst notebook runs end to end on a small snapshot (nbclient, kernel python3 of this venv)."""

from datetime import timedelta
from pathlib import Path

import nbformat
import polars as pl
import pytest

from jobs.notebook import render
from pipeline.errors import UserError
from pipeline.publish.analytics import build_snapshot
from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.writer import publish
from pipeline.storage.lake import Lake
from tests.tenant_runs import declared
from tests.test_pack_support import AS_OF, RUN_DATE, make_lake


def _small_home(tmp_path: Path) -> Path:
    paths = make_lake(tmp_path / "home")
    for tenant in ("acme", "globex"):  # a second, older decay snapshot: the plot has a curve
        own = paths.for_tenant(tenant)
        latest = pl.read_parquet(own.partition("decay_snapshots", RUN_DATE))
        earlier = latest.with_columns(
            (pl.col("as_of") - timedelta(days=3)).alias("as_of"),
            (pl.col("confidence") * 1.1).clip(0, 1),
        )
        Lake(own).write_partition(
            "decay_snapshots", "2026-11-04", declared("decay_snapshots", earlier)
        )
    lake = Lake(paths.for_tenant("acme"))
    lake.write(
        "feedback",
        declared(
            "feedback",
            pl.DataFrame(
                {
                    "tenant_id": ["acme"] * 4,
                    "event_id": [f"f{i}" for i in range(4)],
                    "ts": [
                        "2026-11-02T10:00:00Z",
                        "2026-11-03T10:00:00Z",
                        "2026-11-03T12:00:00Z",
                        "2026-11-04T08:00:00Z",
                    ],
                    "signal": ["thumbs_up", "thumbs_down", "copy", "regenerate"],
                }
            ).with_columns(pl.col("ts").str.to_datetime(time_zone="UTC")),
        ),
    )
    # What two pack versions' receipts measured of one skill (the notebook's uplift plot).
    uplift = {"uplift": [0.05, -0.02], "uplift_lower": [-0.01, -0.09], "uplift_upper": [0.11, 0.05]}
    lake.write(
        "pack_uplift",
        declared(
            "pack_uplift",
            pl.DataFrame(
                {
                    "tenant_id": ["acme"] * 2,
                    "pack_version": ["20261103T020000Z-aaaaaaaa", "20261104T020000Z-bbbbbbbb"],
                    "skill_id": ["concise_response"] * 2,
                    **uplift,
                }
            ),
        ),
    )
    for tenant in ("acme", "globex"):
        publish(paths.packs, build_pack(load_inputs(Lake(paths), tenant, AS_OF)))
    build_snapshot(paths)
    return paths.home


def test_notebook_runs_and_plots(tmp_path: Path) -> None:
    home = _small_home(tmp_path)
    rendered = render(home, tmp_path / "out")  # what `make notebook` runs
    notebook = nbformat.read(rendered.notebook, as_version=4)
    outputs = [
        o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
    ]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, errors
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 4
    # Each plot is a PNG file beside the executed notebook, in the order drawn.
    assert [p.name for p in rendered.plots] == [f"memorypack_overview-{i}.png" for i in range(1, 5)]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in rendered.plots)
    text = rendered.text
    assert f"snapshot {home / 'analytics.duckdb'}" in text
    assert "2 of 2 system/kind pairs have examples" in text
    assert "acme" in text and "6 memories" in text
    # The uplift plot has its points: two pack versions of one tenant × skill.
    assert "uplift of 2 pack versions, 1 tenant × skill series" in text


def test_without_a_snapshot_the_notebook_says_so_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"no analytics snapshot at .*: run make demo first"):
        render(tmp_path, tmp_path / "out")
