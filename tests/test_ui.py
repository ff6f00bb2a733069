"""`make ui` (issue 54 item 2): host and port reach Dagster, and a stop signal stops the whole
process group, also when the UI was started in the background (SIGINT ignored, as a script's `&`
leaves it) — where `dagster dev` alone ignored SIGTERM and SIGINT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobs.ui import ROOT, ui_command

# A stand-in for `dg dev`: starts a grandchild (as Dagster starts its webserver and daemon),
# writes both pids, then waits; on SIGINT it exits 0, unless told to ignore it.
CHILD = """
import signal, subprocess, sys, time
from pathlib import Path
if sys.argv[2] == "ignore":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
Path(sys.argv[1]).write_text(f"{grandchild.pid}")
try:
    time.sleep(300)
except KeyboardInterrupt:
    sys.exit(0)
"""
WRAPPER = "import sys; from jobs.ui import serve; sys.exit(serve(sys.argv[1:], grace=2.0))"


def _background(script: Path, pids: Path, mode: str) -> subprocess.Popen[bytes]:
    """`python -m jobs.ui`'s serve() on the stand-in, started as `cmd &` in a script starts it."""
    return subprocess.Popen(
        [sys.executable, "-c", WRAPPER, sys.executable, str(script), str(pids), mode],
        cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by init) is gone for our purposes.
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def _wait_for(path: Path, seconds: float = 60.0) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} not written in {seconds} s")


@pytest.mark.parametrize(
    ("mode", "stop", "code"),
    [
        ("obey", signal.SIGTERM, 0),  # Dagster stops on the forwarded SIGINT
        ("obey", signal.SIGINT, 0),
        ("ignore", signal.SIGTERM, 1),  # it does not: the group is killed after the grace
    ],
)
def test_a_stop_signal_stops_the_whole_group(
    tmp_path: Path, mode: str, stop: signal.Signals, code: int
) -> None:
    script, pids = tmp_path / "child.py", tmp_path / "pids"
    script.write_text(CHILD)
    wrapper = _background(script, pids, mode)
    grandchild = _wait_for(pids)
    wrapper.send_signal(stop)
    assert wrapper.wait(timeout=60) == code
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_the_command_binds_the_host_and_port_asked(tmp_path: Path) -> None:
    (tmp_path / "dagster").touch()
    command = ui_command("0.0.0.0", 3001, bin_dir=tmp_path)
    assert command[:2] == [str(tmp_path / "dagster"), "dev"]
    assert command[2:] == [
        "-w",
        str(ROOT / "workspace.yaml"),
        "--host",
        "0.0.0.0",
        "--port",
        "3001",
    ]
    (tmp_path / "dg").touch()  # Dagster's current CLI when installed
    assert ui_command("127.0.0.1", 3000, bin_dir=tmp_path)[:2] == [str(tmp_path / "dg"), "dev"]


def test_make_passes_only_command_line_host_and_port() -> None:
    """`make ui HOST=… PORT=…`; a HOST or PORT in the environment (a shell's HOST is the machine's
    name) does not move the UI off loopback."""
    env = {**os.environ, "HOST": "example-host", "PORT": "8080"}
    dry = ["make", "-n", "-W", ".venv/.installed", "ui"]
    default = subprocess.run(dry, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert "-m jobs.ui --host 127.0.0.1 --port 3000" in default.stdout
    chosen = subprocess.run(
        [*dry, "HOST=0.0.0.0", "PORT=3001"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "-m jobs.ui --host 0.0.0.0 --port 3001" in chosen.stdout
