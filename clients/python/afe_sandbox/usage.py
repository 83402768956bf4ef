"""What sandboxes use, as their manager last measured it: the access API's
sandboxusages, served from the manager's memory as metrics.k8s.io serves
what Pods use (the Go client's Usage and Usages, client/top.go)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

RESOURCE = "sandboxusages"


@dataclass(frozen=True)
class SandboxUsage:
    """The figures of one sandbox, measured at measured_at, every window_s
    seconds. CPU time and network bytes count from the start of its
    container (a recreated container starts from zero): cumulative, not
    rates. uid is the Sandbox's the figures were measured as."""

    sandbox: str
    uid: str
    ticket: str
    measured_at: datetime
    window_s: float
    cpu_ms: int
    memory_bytes: int
    disk_bytes: int
    writable_layer_bytes: int
    workspace_bytes: int
    network_receive_bytes: int
    network_transmit_bytes: int
    egress_bytes: int
    egress_denials: int


def usage_of(item: dict) -> SandboxUsage:
    """The SandboxUsage of an item of the access API's answer."""
    meta, figures = item.get("metadata") or {}, item.get("usage") or {}
    return SandboxUsage(
        sandbox=meta.get("name", ""),
        uid=meta.get("uid", ""),
        ticket=item.get("ticket", ""),
        measured_at=datetime.fromisoformat(item["timestamp"]),
        window_s=duration_s(item.get("window", "")),
        cpu_ms=figures.get("cpuMilliseconds", 0),
        memory_bytes=figures.get("memoryBytes", 0),
        disk_bytes=figures.get("diskBytes", 0),
        writable_layer_bytes=figures.get("writableLayerBytes", 0),
        workspace_bytes=figures.get("workspaceBytes", 0),
        network_receive_bytes=figures.get("networkReceiveBytes", 0),
        network_transmit_bytes=figures.get("networkTransmitBytes", 0),
        egress_bytes=figures.get("egressBytes", 0),
        egress_denials=figures.get("egressDenials", 0),
    )


_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")


def duration_s(text: str) -> float:
    """Seconds of a Go duration as Kubernetes writes one ("30s", "1m30s");
    0 for none. Anything else raises ValueError."""
    if text in ("", "0", "0s"):
        return 0.0
    parts = _PART.findall(text)
    if "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * _UNITS[u] for n, u in parts)
