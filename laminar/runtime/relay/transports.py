"""Choosing a relay transport by name: plain TCP sockets or ucxx (``ucx.py``), optionally paced
to a link bandwidth; apart from ``transport.py`` so that ``ucx.py`` can build on its base classes
without an import circle."""

from __future__ import annotations

from laminar.runtime.relay.transport import PacedTransport, TcpTransport, Transport


def make_transport(
    kind: str, *, ucx_tls: str = "tcp,self", link_bytes_per_s: float = 0.0
) -> Transport:
    """``"ucx"`` (ucxx, over the UCX transports ``ucx_tls``) or ``"tcp"`` (plain sockets);
    ``link_bytes_per_s`` > 0 paces every link to that bandwidth (:class:`PacedTransport`)."""
    if link_bytes_per_s < 0:
        raise ValueError(f"link_bytes_per_s must be >= 0, got {link_bytes_per_s}")
    if kind == "tcp":
        inner: Transport = TcpTransport()
    elif kind == "ucx":
        from laminar.runtime.relay.ucx import UcxTransport  # ucxx only where it is asked for

        inner = UcxTransport(tls=ucx_tls)
    else:
        raise ValueError(f"unknown relay transport {kind!r} (expected 'ucx' or 'tcp')")
    return PacedTransport(inner, link_bytes_per_s) if link_bytes_per_s else inner
