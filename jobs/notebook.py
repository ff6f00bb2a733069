"""`make notebook`: run the analyst notebook on this home's snapshot and keep what it shows.

    python -m jobs.notebook            # MEMORYPACK_HOME, else data/

Executes `notebooks/memorypack_overview.ipynb` with nbclient (the kernel is this interpreter) and
writes the executed notebook and each plot as a PNG into `<home>/notebooks/` (the home's local
folder), so the figures can be looked at without Jupyter: nbconvert and JupyterLab are not part
of the install. A cell that fails is one line, naming the cell.
"""

from __future__ import annotations

import base64
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import Paths
from pipeline.errors import UserError

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "memorypack_overview.ipynb"
# A hang guard only: a cold kernel start on a busy machine takes minutes.
CELL_TIMEOUT_SECONDS = 600


@dataclass(frozen=True)
class Rendered:
    notebook: Path  # the executed copy
    plots: list[Path]  # its figures, in the order the notebook draws them
    text: str  # what its cells printed


def render(home: Path, out: Path, notebook: Path = NOTEBOOK) -> Rendered:
    """Execute `notebook` on the snapshot of `home`; the executed copy and its PNG plots go to
    `out`. Raises UserError naming the first cell that failed."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    if not (home / "analytics.duckdb").exists():
        raise UserError(
            f"no analytics snapshot at {home / 'analytics.duckdb'}: run make demo first"
        )
    document = nbformat.read(notebook, as_version=4)
    # The notebook reads MEMORYPACK_HOME; the kernel must be this interpreter (first on PATH).
    env = {**os.environ, "MEMORYPACK_HOME": str(home)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    client = NotebookClient(
        document,
        kernel_name="python3",
        timeout=CELL_TIMEOUT_SECONDS,
        resources={"metadata": {"path": str(notebook.parent)}},
    )
    try:
        client.execute(env=env)
    except CellExecutionError as error:
        first = str(error).strip().splitlines()[-1] if str(error).strip() else "failed"
        raise UserError(f"notebook {notebook.name}: a cell failed: {first}") from None
    out.mkdir(parents=True, exist_ok=True)
    executed = out / notebook.name
    nbformat.write(document, executed)
    outputs = [o for c in document.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    plots: list[Path] = []
    for o in outputs:
        png = o.get("data", {}).get("image/png")
        if png:
            plots.append(out / f"{notebook.stem}-{len(plots) + 1}.png")
            plots[-1].write_bytes(base64.b64decode(png))
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    return Rendered(executed, plots, text)


def main() -> int:
    paths = Paths.from_env()
    try:
        rendered = render(paths.local, paths.local / "notebooks")
    except UserError as error:
        print(f"memorypack: {error}", file=sys.stderr)
        return 2
    print(rendered.text, end="")
    print(f"executed notebook: {rendered.notebook}")
    for plot in rendered.plots:
        print(f"plot: {plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
