"""Egress entries as the controller's model reads them (internal/egress in
the Go module): a host name, or a leading-dot domain for the domain and its
subdomains. The client checks each entry before the request, as the proxy's
renderer does; the cases are one table with the Go code's
(internal/egress/testdata/hosts.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .errors import SpecRefusedError

MAX_HOSTS = 64


@dataclass(frozen=True)
class EgressHost:
    """One destination a sandbox may reach through its proxy: name, and
    whether the names under it pass too (".example.com")."""
    name: str
    subdomains: bool = False

    @property
    def entry(self) -> str:
        """The host as the CRD writes it."""
        return ("." if self.subdomains else "") + self.name


def _label(label: str) -> bool:
    return (0 < len(label) <= 63 and label[0] != "-" and label[-1] != "-"
            and all("a" <= c <= "z" or "0" <= c <= "9" or c == "-" for c in label))


def parse_host(entry: str) -> EgressHost:
    """The host of a CRD entry; SpecRefusedError (InvalidSpec) for anything
    that is not a lower-case name of two labels or more (IP literals,
    wildcards, ports, schemes and spaces among them), 4 to 253 characters."""
    name = entry[1:] if entry.startswith(".") else entry
    labels = name.split(".")
    if (not 4 <= len(entry) <= 253 or len(labels) < 2 or not all(_label(part) for part in labels)
            or not "a" <= labels[-1][0] <= "z"):
        raise SpecRefusedError(f"egress entry {entry!r} is not a lower-case host name or .domain", "InvalidSpec")
    return EgressHost(name, entry.startswith("."))


def entries(hosts: Iterable[str]) -> list[str]:
    """The entries, each checked (parse_host), at most MAX_HOSTS, none
    twice."""
    out = [parse_host(h).entry for h in hosts]
    if len(out) > MAX_HOSTS:
        raise SpecRefusedError(f"more than {MAX_HOSTS} egress hosts", "InvalidSpec")
    if len(set(out)) != len(out):
        raise SpecRefusedError("an egress entry is listed twice", "InvalidSpec")
    return out
