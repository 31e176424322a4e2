"""Starts the real gateway binary for the tests: REPLYONCE_GATEWAY_BIN, or
one built from this repository with `go build` when that is unset (never in
CI, where .ci/run builds it once for every suite)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "clients" / "python" / "src"))

_built: Optional[str] = None


def gateway_binary() -> str:
    global _built
    env = os.environ.get("REPLYONCE_GATEWAY_BIN")
    if env:
        if not os.path.exists(env):
            raise RuntimeError(f"REPLYONCE_GATEWAY_BIN={env} does not exist")
        return env
    if os.environ.get("CI"):
        raise RuntimeError("REPLYONCE_GATEWAY_BIN is not set: CI must build the gateway for the client suites")
    if _built is None:
        out = os.path.join(tempfile.mkdtemp(prefix="gw-bin-"), "gateway")
        subprocess.run(["go", "build", "-o", out, "./cmd/gateway"], cwd=REPO, check=True)
        _built = out
    return _built


def free_port() -> int:
    """A loopback port that was free a moment ago, for a process that must
    be told its address up front."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gateway:
    """`gateway serve` on a config written to a fresh directory ("{dir}" in
    it is replaced by that directory). The config listens on 127.0.0.1:0 with
    JSON logs: the addresses come from the "gateway listening" line."""

    def __init__(self, config: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="gw-")
        self.config_path = os.path.join(self.dir, "gateway.yaml")
        with open(self.config_path, "w") as f:
            f.write(config.replace("{dir}", self.dir))
        self.logs: list[str] = []
        self._ready = threading.Event()
        self.public_url = self.admin_url = ""
        self._proc = subprocess.Popen([gateway_binary(), "serve", "--config", self.config_path],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(60) or not self.admin_url:
            self.stop()
            raise RuntimeError("gateway serve did not start:\n" + "\n".join(self.logs))

    def _read(self) -> None:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            self.logs.append(line.rstrip("\n"))
            if self._ready.is_set():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("msg") == "gateway listening":
                self.public_url = "http://" + rec["listen"]
                self.admin_url = "http://" + rec["admin"]
                self._ready.set()
        self._ready.set()

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._reader.join(10)
        if self._proc.stderr is not None:
            self._proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def ledger_config(token: str = "") -> str:
    """A gateway whose ledger API is what the test uses (its one source
    forwards nowhere it will reach)."""
    tok = f", token: {token}" if token else ""
    return f"""listen: 127.0.0.1:0
admin: {{listen: 127.0.0.1:0{tok}}}
store: {{kind: bolt, path: "{{dir}}/ledger.db"}}
log: {{level: info, format: json}}
sources:
  unused:
    provider: standard-webhooks
    secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]
    forward: {{url: "http://127.0.0.1:9/unused", mode: inline}}
"""
