"""A relay as a standalone process: ``python -m laminar.runtime.relay.proc --id r1 --root DIR``.

Prints its :class:`~laminar.runtime.relay.node.RelayInfo` as one JSON line on stdout, then
serves until a ``stop`` control request, SIGTERM or SIGINT; its store is removed on the way out.
Tests and ``laminar bench relay`` start one per simulated machine, so transfers between relays
cross process boundaries as they would cross machines.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from laminar.runtime.cluster.lifeline import child_env
from laminar.runtime.relay.control import ControlClient, ControlError
from laminar.runtime.relay.node import RelayInfo


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--id", required=True, help="relay id, e.g. relay-3")
    ap.add_argument("--root", required=True, help="store directory (under /dev/shm)")
    ap.add_argument("--transport", choices=("ucx", "tcp"), default="tcp")
    ap.add_argument("--ucx-tls", default="tcp,self", help="UCX transports (UCX_TLS)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--machine", default="", help="machine id (default: the relay id)")
    ap.add_argument("--keep", type=int, default=3, help="committed versions kept")
    ap.add_argument(
        "--chunk-delay-s",
        type=float,
        default=0.0,
        help="fault-injection tests only: "
        "sleep this long before forwarding each chunk, to stretch a broadcast",
    )
    ap.add_argument(
        "--link-bytes-per-s",
        type=float,
        default=0.0,
        help="pace every link of this relay to this bandwidth (0: as fast as it goes)",
    )
    args = ap.parse_args(argv)
    from laminar.runtime.cluster.lifeline import parent_from_env, tie_to_parent

    tie_to_parent(parent_from_env())  # dies with whoever started it, even SIGKILLed
    from laminar.runtime.relay.host import RelayHost

    host = RelayHost(
        args.id,
        args.root,
        transport=args.transport,
        ucx_tls=args.ucx_tls,
        host=args.host,
        machine=args.machine,
        keep=args.keep,
        chunk_delay_s=args.chunk_delay_s,
        link_bytes_per_s=args.link_bytes_per_s,
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    parent = os.getppid()
    print(json.dumps(host.info.to_json()), flush=True)
    # a parent killed outright (SIGKILL, a test's timeout) cannot stop its relays: they notice
    # they were orphaned and stop themselves, freeing their shared memory
    while not stop.is_set() and not host.wait_stopped(0.2) and os.getppid() == parent:
        pass
    host.stop()
    return 0


class RelayProcesses:
    """``n`` relays as separate processes on this machine, ``relay-0`` .. ``relay-{n-1}``, each
    standing for one machine (its machine id is its relay id). Stores live under ``base``.

    Use as a context manager: on exit every relay is stopped (killed if it does not stop) and
    ``base`` is removed from shared memory."""

    def __init__(
        self,
        n: int,
        base: str | Path,
        *,
        transport: str = "tcp",
        ucx_tls: str = "tcp,self",
        keep: int = 3,
        chunk_delay_s: float = 0.0,
        link_bytes_per_s: float = 0.0,
    ):
        self.base = Path(base)
        self.procs: dict[str, subprocess.Popen] = {}
        self.infos: list[RelayInfo] = []
        env = child_env({**os.environ, "UCX_WARN_UNUSED_ENV_VARS": "n"})
        try:
            for i in range(n):
                rid = f"relay-{i}"
                cmd = [
                    sys.executable,
                    "-m",
                    "laminar.runtime.relay.proc",
                    "--id",
                    rid,
                    "--root",
                    str(self.base / rid),
                    "--transport",
                    transport,
                    "--ucx-tls",
                    ucx_tls,
                    "--keep",
                    str(keep),
                    "--chunk-delay-s",
                    str(chunk_delay_s),
                    "--link-bytes-per-s",
                    str(link_bytes_per_s),
                ]
                self.procs[rid] = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
            for rid, proc in self.procs.items():
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"{rid} exited before it started (code {proc.wait()})")
                self.infos.append(RelayInfo.from_json(json.loads(line)))
        except BaseException:
            self.close()
            raise

    def kill(self, relay_id: str) -> None:
        """SIGKILL one relay: what a machine failure looks like to the others."""
        self.procs[relay_id].kill()
        self.procs[relay_id].wait()

    def pause(self, relay_id: str) -> None:
        """SIGSTOP one relay: alive but silent, like a machine that hangs."""
        self.procs[relay_id].send_signal(signal.SIGSTOP)

    def resume(self, relay_id: str) -> None:
        self.procs[relay_id].send_signal(signal.SIGCONT)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)  # a paused relay could not stop
        for info in self.infos:
            if self.procs[info.id].poll() is None:
                with contextlib.suppress(ControlError, RuntimeError):
                    ControlClient(info.host, info.ctrl_port, timeout_s=2.0).request({"op": "stop"})
        deadline = time.monotonic() + 10.0
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> RelayProcesses:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


if __name__ == "__main__":
    sys.exit(main())
