"""Which ``Host`` headers the driver's servers (dashboard, REST API, metrics) answer: a
defence against DNS rebinding, where a web page of another site resolves its own name to
the server's address and reads it.

A request is answered when its Host names the bound address, ``localhost`` or a loopback
address (``127.0.0.1``, ``[::1]``), with the bound port or none. Bound to a wildcard
address (``0.0.0.0``, ``::``), any IP literal (a page can only rebind a *name*) and this
machine's own host names are accepted too. Every other name is refused.
"""

from __future__ import annotations

import ipaddress
import socket

__all__ = ["HostCheck", "beyond_loopback"]

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "127.0.0.1", "::1"})


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def beyond_loopback(host: str) -> bool:
    """Whether binding to ``host`` serves other machines (a wildcard, a public or private
    address, or a name that is not ``localhost``)."""
    if host.lower() in _LOOPBACK_NAMES:
        return False
    address = _ip(host.strip("[]"))
    return address is None or not address.is_loopback


def _split_host(header: str) -> tuple[str, int | None] | None:
    """``(host, port)`` of a Host header value, None when it is malformed."""
    header = header.strip()
    if header.startswith("["):
        end = header.find("]")
        if end < 0:
            return None
        host, rest = header[1:end], header[end + 1 :]
    else:
        host, _, port_text = header.partition(":")
        rest = f":{port_text}" if _ else ""
    if rest and (not rest.startswith(":") or not rest[1:].isdigit()):
        return None
    return host.lower(), int(rest[1:]) if rest else None


class HostCheck:
    """The Host headers a server bound to ``bound_host``:``port`` answers."""

    def __init__(self, bound_host: str, port: int) -> None:
        self.port = port
        bound = bound_host.strip("[]").lower()
        address = _ip(bound)
        self.wildcard = address is not None and address.is_unspecified
        names = set(_LOOPBACK_NAMES) | {bound}
        if self.wildcard:
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        self._names = frozenset(names)

    def allows(self, header: str | None) -> bool:
        """Whether a request with this Host header (None: none sent) may be answered."""
        if not header:
            return False
        parsed = _split_host(header)
        if parsed is None:
            return False
        host, port = parsed
        if port is not None and port != self.port:
            return False
        if host in self._names:
            return True
        address = _ip(host)
        if address is None:
            return False
        return address.is_loopback or self.wildcard
