"""Only requests addressed to this server by a name of its own: a defence against DNS rebinding.

A web page on evil.example can make its own name resolve to 127.0.0.1 and then read the dashboard
from the user's browser; the browser still sends `Host: evil.example`. The server answers only
the loopback names and the address it was bound to (for a wildcard bind, this machine's names and
addresses); any other Host gets 403.
"""

from __future__ import annotations

import socket

from flask import Flask, request

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def host_name(header: str) -> str:
    """The name of a Host header, lower case, without its port or IPv6 brackets."""
    header = header.strip().lower()
    if header.startswith("["):  # [::1]:8050
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def machine_names() -> set[str]:
    """This machine's host name, fully qualified name and the addresses they resolve to."""
    names = {socket.gethostname().lower(), socket.getfqdn().lower()}
    for name in list(names):
        try:
            _, aliases, addresses = socket.gethostbyname_ex(name)
        except OSError:
            continue
        names.update(a.lower() for a in aliases)
        names.update(addresses)
    return names


def allowed_hosts(bound: str) -> frozenset[str]:
    """The Host names the server answers when bound to `bound`."""
    bound = host_name(bound) if bound.startswith("[") else bound.lower()
    extra = machine_names() if bound in WILDCARDS else {bound}
    return LOOPBACK_NAMES | frozenset(extra - WILDCARDS)


def install_host_check(server: Flask, bound: str) -> frozenset[str]:
    """Refuse (403) every request whose Host is not one of `allowed_hosts(bound)`."""
    allowed = allowed_hosts(bound)

    @server.before_request
    def _only_our_names():
        if host_name(request.host or "") not in allowed:
            return (
                "tpscope dash: this Host is not one of the server's names (DNS rebinding guard)\n",
                403,
            )
        return None

    return allowed
