"""Whether a Ray cluster answers at ``runtime.address``: asked before anything is written.

``ray.init(address=...)`` does not fail fast. Measured here (Ray 2.60): on a refused port
(``127.0.0.1:1``) and on a port where something other than Ray's GCS listens, it retried for
over 200 s; a bare ``GcsClient`` gives up after ~40 s. So the driver asks first, within bounds:
the host's name resolved and a TCP connection opened within :data:`CONNECT_TIMEOUT_S`, then a
GCS handshake in a child process killed after :data:`GCS_TIMEOUT_S` (a hung C++ client cannot be
stopped in-process). The address's form is the config's check
(``laminar.config.runtime.check_address_form``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

from laminar.errors import LaminarError

CONNECT_TIMEOUT_S = 5.0  # name resolution, then the TCP connection, each
GCS_TIMEOUT_S = 30.0  # the child imports Ray (seconds on a busy machine) and shakes hands

# The child: resolve ``auto`` as ray.init does, then one GCS round trip; prints the address.
_GCS_PROBE = """
import sys
from ray._private.services import canonicalize_bootstrap_address_or_die
from ray._raylet import GcsClient
address = canonicalize_bootstrap_address_or_die(sys.argv[1])
GcsClient(address=address).internal_kv_get(b"laminar-probe", None)
print(address)
"""


class AddressError(LaminarError):
    """No Ray cluster answers at ``runtime.address`` (``--address``)."""

    def __init__(self, address: str, why: str):
        super().__init__(
            f"runtime.address {address[:80]!r}: {why}; start Ray there (`ray start --head` on "
            "the head machine) or leave --address out to start a local Ray for the run"
        )


def check_address(address: str, env: dict[str, str]) -> None:
    """Raise :class:`AddressError` unless a Ray GCS answers at ``address`` (empty: a local Ray,
    nothing to ask); ``env``: variables of the probe's child over this process's (the run's
    offline ones). Bounded: at most ~2 x CONNECT_TIMEOUT_S + GCS_TIMEOUT_S."""
    if not address:
        return
    if address != "auto":
        host, _, port = address.rpartition(":")
        _connect(address, host.strip("[]"), int(port))
    _handshake(address, env)


def _resolve(address: str, host: str, port: int) -> list:
    """``getaddrinfo`` has no timeout of its own (a dead resolver holds it ~30 s): it runs in
    a daemon thread, abandoned after CONNECT_TIMEOUT_S."""
    out: list = []

    def ask() -> None:
        try:
            out.extend(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as e:
            out.append(e)

    t = threading.Thread(target=ask, name="laminar-resolve", daemon=True)
    t.start()
    t.join(CONNECT_TIMEOUT_S)
    if t.is_alive():
        raise AddressError(address, f"{host!r} did not resolve in {CONNECT_TIMEOUT_S:g} s")
    if not out or isinstance(out[0], OSError):
        raise AddressError(address, f"no such host {host!r} ({out[0] if out else 'no address'})")
    return out


def _connect(address: str, host: str, port: int) -> None:
    family, kind, proto, _, where = _resolve(address, host, port)[0]
    with socket.socket(family, kind, proto) as s:
        s.settimeout(CONNECT_TIMEOUT_S)
        try:
            s.connect(where)
        except TimeoutError:
            raise AddressError(
                address, f"no answer within {CONNECT_TIMEOUT_S:g} s (host down or unreachable)"
            ) from None
        except OSError as e:
            raise AddressError(address, f"cannot connect ({e.strerror or e})") from None


def _handshake(address: str, env: dict[str, str]) -> None:
    env = {**os.environ, **env}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _GCS_PROBE, address],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=GCS_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise AddressError(
            address, f"something answers there, but no Ray GCS within {GCS_TIMEOUT_S:g} s"
        ) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise AddressError(address, f"not a Ray cluster: {last[:200]}")
