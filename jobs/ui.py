"""`make ui`: the Dagster UI on this home, on a chosen host and port, stopped cleanly by SIGTERM or
SIGINT.

    python -m jobs.ui [--host 127.0.0.1] [--port 3000]

It prepares the instance `memorypack run` uses (`jobs.instance`: DAGSTER_HOME) and runs Dagster's
`dg dev -w workspace.yaml` (`dagster dev` where `dg` is not installed) in a process group of its
own. Why a wrapper: Dagster maps SIGTERM to whatever SIGINT does, and a process started in the
background by a script inherits SIGINT ignored, so `dagster dev` started that way ignored both
and never stopped; and a signal to `make` alone never reached it. Here SIGTERM, SIGINT or SIGHUP
sends SIGINT to the whole group (what Ctrl-C in a terminal does: the webserver, the daemon, the
code servers and any run in progress stop as Dagster stops them), and whatever is left after
GRACE_SECONDS is killed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from jobs.instance import dagster_home
from pipeline.config import Paths

ROOT = Path(__file__).resolve().parents[1]
# Loopback only unless asked: the UI has no login and can launch runs and wipe assets.
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 3000
# How long a stop waits for Dagster to shut its services down before killing what is left
# (measured on the demo's home: 4.2 s idle, 12.7 s with two tenant runs training).
GRACE_SECONDS = 30.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def ui_command(host: str, port: int, bin_dir: Path = Path(sys.executable).parent) -> list[str]:
    """`dg dev` (Dagster's current CLI), else `dagster dev` (the same server, older entry point)."""
    dg = bin_dir / "dg"
    base = [str(dg), "dev"] if dg.exists() else [str(bin_dir / "dagster"), "dev"]
    return [*base, "-w", str(ROOT / "workspace.yaml"), "--host", host, "--port", str(port)]


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is gone already
        os.killpg(pid, signum)


def serve(
    command: Sequence[str], grace: float = GRACE_SECONDS, env: dict[str, str] | None = None
) -> int:
    """Run `command` in a new process group until it exits or a stop signal comes; then SIGINT to
    the group, and SIGKILL to what is left of it after `grace` seconds. The command's exit code,
    0 after a stop it obeyed in time, 1 when the group had to be killed."""
    stop_at: list[float] = []
    started: list[subprocess.Popen[bytes]] = []

    def stop(signum: int, _frame: FrameType | None) -> None:
        if not stop_at:
            stop_at.append(time.monotonic())
            print(f"memorypack ui: {signal.Signals(signum).name}: stopping Dagster", flush=True)
            for process in started:
                _signal_group(process.pid, signal.SIGINT)

    # Handlers first: the child starts with SIGINT at its default even if it was ignored here.
    previous = {s: signal.signal(s, stop) for s in STOP_SIGNALS}
    try:
        child = subprocess.Popen(list(command), cwd=ROOT, env=env, start_new_session=True)
        started.append(child)
        if stop_at:  # asked to stop while it started
            _signal_group(child.pid, signal.SIGINT)
        while True:
            try:
                code = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if stop_at and time.monotonic() - stop_at[0] > grace:
                    print(f"memorypack ui: still running after {grace:.0f} s: killed", flush=True)
                    _signal_group(child.pid, signal.SIGKILL)
                    child.wait()
                    return 1
        _signal_group(child.pid, signal.SIGKILL)  # a code server or run it left behind
        if stop_at:
            print(f"memorypack ui: stopped in {time.monotonic() - stop_at[0]:.1f} s", flush=True)
            return 0
        return code
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.ui", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to bind (default: loopback)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)
    home = dagster_home(Paths.from_env().local)
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    command = ui_command(args.host, args.port)
    shown = "localhost" if args.host in ("127.0.0.1", "::1") else args.host
    print(f"memorypack ui: http://{shown}:{args.port}  (DAGSTER_HOME={home})", flush=True)
    print(f"memorypack ui: {' '.join(command)}", flush=True)
    return serve(command, env=env)


if __name__ == "__main__":
    sys.exit(main())
