"""The documented deployment on one machine, every part its own process: PostgreSQL (Dagster's
run, event and schedule storage), a gRPC code server (`dagster api grpc`), `dagster-daemon` (the
schedule, the sensors and the run queue) and `dagster-webserver` (the UI), all on 127.0.0.1.

    python deploy/local_stack.py --home H --landing L [--cron "0 2 * * *"] [--workers 2]

starts them, prints where the UI is, and stops them all on Ctrl-C. `tests/test_deployment.py`
runs a night through it (MEMORYPACK_DEPLOY_TEST=1). The instance's storage block is the one in
`deploy/docker/dagster.yaml` (read from there, not restated); the run queue is jobs/dagster.yaml's.

PostgreSQL comes from the machine (`initdb`, `postgres`, `pg_isready` and `createdb` on PATH, as
Debian's `postgresql` package puts them); as root it runs as the `postgres` user, which it must.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCKER_CONFIG = ROOT / "deploy" / "docker" / "dagster.yaml"
READY_SECONDS = 120.0
PG_USER, PG_DB = "memorypack", "dagster"


def free_ports(n: int) -> list[int]:
    """n distinct ports free on 127.0.0.1 right now (held open together so they differ)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def storage_block() -> dict[str, object]:
    """The `storage:` block every documented deployment uses (deploy/docker/dagster.yaml)."""
    return {"storage": yaml.safe_load(DOCKER_CONFIG.read_text(encoding="utf-8"))["storage"]}


def instance_config(workers: int) -> str:
    """jobs/dagster.yaml (run queue, concurrency, telemetry) with the Postgres storage block."""
    from jobs.instance import rendered_config

    os.environ["MEMORYPACK_WORKERS"] = str(workers)
    config = yaml.safe_load(rendered_config()) | storage_block()
    return yaml.safe_dump(config, sort_keys=False)


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the `postgres` user."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def _wait(ready: object, what: str, log: Path, deadline: float) -> None:
    while not ready():  # type: ignore[operator]
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{what} did not come up in time:\n{tail}")
        time.sleep(0.5)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class LocalStack:
    """The running processes and where they listen; `stop()` ends every one of them."""

    folder: Path
    env: dict[str, str]
    ports: dict[str, int]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def dagster_home(self) -> Path:
        return Path(self.env["DAGSTER_HOME"])

    @property
    def ui(self) -> str:
        return f"http://127.0.0.1:{self.ports['webserver']}"

    def _start(self, name: str, command: list[str], **kwargs: object) -> None:
        log = (self.folder / f"{name}.log").open("wb")
        self.processes[name] = subprocess.Popen(  # own session: stopped as a group
            command,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **kwargs,  # type: ignore[call-overload]
        )

    def stop(self) -> None:
        """The Dagster processes first (the daemon's runs with them), PostgreSQL last."""
        for name in reversed(list(self.processes)):
            process = self.processes[name]
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(10)
        self.processes.clear()


def _start_postgres(stack: LocalStack) -> None:
    data = stack.folder / "postgres"
    data.mkdir(mode=0o700)
    password = stack.env["DAGSTER_PG_PASSWORD"]
    pwfile = data / "pwfile"
    pwfile.write_text(password + "\n")
    if os.geteuid() == 0:
        shutil.chown(stack.folder, "postgres")
        shutil.chown(data, "postgres")
        shutil.chown(pwfile, "postgres")
    init = [
        "initdb", "-D", str(data / "db"), "-U", PG_USER, f"--pwfile={pwfile}",
        "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C",
    ]  # fmt: skip
    subprocess.run(_as_postgres(init), check=True, capture_output=True, env=stack.env)
    port = str(stack.ports["postgres"])
    stack._start(
        "postgres",
        _as_postgres(
            [
                "postgres", "-D", str(data / "db"), "-p", port,
                "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={data}",
            ]
        ),
    )  # fmt: skip
    ready = ["pg_isready", "-q", "-h", "127.0.0.1", "-p", port, "-U", PG_USER, "-d", "postgres"]
    _wait(
        lambda: subprocess.run(ready, env=stack.env).returncode == 0,
        "postgres",
        stack.folder / "postgres.log",
        time.monotonic() + READY_SECONDS,
    )
    create = ["createdb", "-h", "127.0.0.1", "-p", port, "-U", PG_USER, PG_DB]
    subprocess.run(create, check=True, capture_output=True, env=stack.env)


@contextlib.contextmanager
def local_stack(
    home: Path, landing: Path, cron: str | None = None, workers: int = 2
) -> Iterator[LocalStack]:
    """Start PostgreSQL, the code server, the daemon and the webserver; stop them on exit."""
    folder = Path(tempfile.mkdtemp(prefix="memorypack-stack-"))  # /tmp: the postgres user enters
    names = ("postgres", "grpc", "webserver")
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "lib" / "src")]),
        "MEMORYPACK_HOME": str(home),
        "MEMORYPACK_LANDING": str(landing),
        "MEMORYPACK_WORKERS": str(workers),
        "DAGSTER_HOME": str(folder / "dagster"),
        "DAGSTER_PG_HOST": "127.0.0.1",
        "DAGSTER_PG_PORT": str(ports["postgres"]),
        "DAGSTER_PG_USER": PG_USER,
        "DAGSTER_PG_PASSWORD": secrets.token_hex(16),
        "DAGSTER_PG_DB": PG_DB,
        "PGPASSWORD": "",
        "HF_HUB_OFFLINE": "1",
    }
    env["PGPASSWORD"] = env["DAGSTER_PG_PASSWORD"]
    if cron:
        env["MEMORYPACK_NIGHTLY_CRON"] = cron
    stack = LocalStack(folder, env, ports)
    try:
        _start_postgres(stack)
        dagster_home = stack.dagster_home
        dagster_home.mkdir()
        (dagster_home / "dagster.yaml").write_text(instance_config(workers), encoding="utf-8")
        workspace = folder / "workspace.yaml"
        workspace.write_text(
            yaml.safe_dump(
                {
                    "load_from": [
                        {
                            "grpc_server": {
                                "host": "127.0.0.1",
                                "port": ports["grpc"],
                                "location_name": "memorypack",
                            }
                        }
                    ]
                }
            ),
            encoding="utf-8",
        )
        bin_dir = Path(sys.executable).parent
        stack._start(
            "grpc",
            [str(bin_dir / "dagster"), "api", "grpc", "-m", "jobs.definitions",
             "-h", "127.0.0.1", "-p", str(ports["grpc"])],
            cwd=ROOT,
        )  # fmt: skip
        _wait(
            lambda: _listening(ports["grpc"]),
            "the code server",
            folder / "grpc.log",
            time.monotonic() + READY_SECONDS,
        )
        stack._start("daemon", [str(bin_dir / "dagster-daemon"), "run", "-w", str(workspace)])
        stack._start(
            "webserver",
            [str(bin_dir / "dagster-webserver"), "-w", str(workspace),
             "-h", "127.0.0.1", "-p", str(ports["webserver"])],
        )  # fmt: skip
        _wait(
            lambda: _listening(ports["webserver"]),
            "the webserver",
            folder / "webserver.log",
            time.monotonic() + READY_SECONDS,
        )
        yield stack
    finally:
        stack.stop()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--landing", type=Path, required=True)
    parser.add_argument("--cron", help="the nightly schedule's cron (default 0 2 * * *)")
    parser.add_argument("--workers", type=int, default=2, help="runs in progress at once")
    args = parser.parse_args()
    with local_stack(args.home.resolve(), args.landing.resolve(), args.cron, args.workers) as s:
        print(
            f"memorypack: UI at {s.ui}, Postgres on 127.0.0.1:{s.ports['postgres']}, logs in {s.folder}"
        )
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(ROOT / "lib" / "src")]
    main()
