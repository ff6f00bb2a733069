"""Peak memory of ingesting a gzip of blank lines (issue 51 item 3): a 5 KB gzip of newlines once
took 3.8 GB, a 100 KB one passed 13.5 GB (a quarantine row held per line); a landing folder's
memory is now bounded by a batch, whatever the file decompresses to.

A gzip of `--mb` MB of newlines (about 1,000 a byte: 100 MB is ~100 GiB, ~100 billion blank
lines; written as one member of 1 GiB of newlines repeated, which gzip reads as one stream) is
ingested by `ingest_folder` in a fresh process; its peak RSS over what the imports took is the
figure. The baseline, in the same run: the same process ingesting a folder of one event.

    python -m bench.blank_gzip --mb 100
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
from datetime import date
from pathlib import Path

from bench.common import write_json

ROOT = Path(__file__).resolve().parents[1]
DAY = "2026-11-04"
MEMBER_BYTES = 1 << 30  # of newlines, one gzip member
# What the measured process runs: the imports, then ingest, each peak RSS noted.
MEASURE = """
import json, resource, sys, time
from datetime import date
from pathlib import Path
from pipeline.ingest.folder import ingest_folder
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
imported = peak()
began = time.perf_counter()
result = ingest_folder(Path(sys.argv[1]), date.fromisoformat(sys.argv[2]))
print(json.dumps({"seconds": time.perf_counter() - began, "imported_bytes": imported,
                  "peak_bytes": peak(), "stats": result.stats, "rows": result.quarantine.height}))
"""


def newlines_gzip(path: Path, megabytes: int) -> int:
    """A gzip of newlines, about `megabytes` MB compressed; returns its line count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\n" * (64 << 20)
    member = b"".join(packer.compress(chunk) for _ in range(MEMBER_BYTES // len(chunk)))
    member += packer.flush()
    lines = 0
    with path.open("wb") as out:
        while out.tell() < megabytes * 1_000_000:
            out.write(member)
            lines += MEMBER_BYTES
    return lines


def measure(folder: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "lib" / "src")])}
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(folder), DAY],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=100, help="compressed size of the gzip (MB)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-blank-gzip-") as tmp:
        flood, one = Path(tmp) / "flood" / DAY, Path(tmp) / "one" / DAY
        began = time.perf_counter()
        lines = newlines_gzip(flood / "blank.jsonl.gz", args.mb)
        written = time.perf_counter() - began
        size = (flood / "blank.jsonl.gz").stat().st_size
        one.mkdir(parents=True)
        event = {"event_id": "i1", "event_type": "memory", "ts": f"{DAY}T10:00:00Z"}
        event |= {"tenant_id": "acme", "memory_type": "temporary", "content": "hello"}
        (one / "events.jsonl").write_text(json.dumps(event) + "\n")
        baseline, figure = measure(one), measure(flood)
    mib = 1 << 20
    result = {
        "date": date.today().isoformat(),
        "gzip_bytes": size,
        "blank_lines": lines,
        "gzip_written_seconds": round(written, 1),
        "flood": figure,
        "baseline_one_event": baseline,
        "flood_grown_mib": round((figure["peak_bytes"] - figure["imported_bytes"]) / mib, 1),  # type: ignore[operator]
        "baseline_grown_mib": round(
            (baseline["peak_bytes"] - baseline["imported_bytes"]) / mib,  # type: ignore[operator]
            1,
        ),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }
    print(
        f"{size / 1e6:.1f} MB gzip, {lines:,} blank lines: ingest in "
        f"{figure['seconds']:.0f} s, peak RSS {figure['peak_bytes'] / mib:.0f} MiB "  # type: ignore[operator]
        f"(+{result['flood_grown_mib']} MiB over the imports; {figure['rows']} quarantine row)"
    )
    print(
        f"baseline, one event: peak RSS {baseline['peak_bytes'] / mib:.0f} MiB "  # type: ignore[operator]
        f"(+{result['baseline_grown_mib']} MiB over the imports)"
    )
    write_json(args.out / f"{result['date']}-blank-gzip.json", result)


if __name__ == "__main__":
    main()
