"""The SandboxUsage read from the access API's answer, and the durations
Kubernetes writes."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from afe_sandbox import SandboxUsage
from afe_sandbox.usage import duration_s, usage_of


def test_usage_of_an_item() -> None:
    item = {"kind": "SandboxUsage", "metadata": {"name": "box", "namespace": "a", "uid": "u1"}, "ticket": "t1",
            "timestamp": "2026-12-03T10:00:00Z", "window": "30s",
            "usage": {"cpuMilliseconds": 1500, "memoryBytes": 7, "diskBytes": 30, "writableLayerBytes": 10,
                      "workspaceBytes": 20, "networkReceiveBytes": 5, "networkTransmitBytes": 6, "egressBytes": 9,
                      "egressDenials": 2}}
    assert usage_of(item) == SandboxUsage(
        sandbox="box", uid="u1", ticket="t1", measured_at=datetime(2026, 12, 3, 10, tzinfo=timezone.utc), window_s=30.0,
        cpu_ms=1500, memory_bytes=7, disk_bytes=30, writable_layer_bytes=10, workspace_bytes=20,
        network_receive_bytes=5, network_transmit_bytes=6, egress_bytes=9, egress_denials=2)


def test_usage_of_an_item_without_egress() -> None:
    got = usage_of({"metadata": {"name": "box"}, "timestamp": "2026-12-03T10:00:00Z", "window": "1m0s", "usage": {}})
    assert (got.egress_bytes, got.egress_denials, got.ticket, got.window_s) == (0, 0, "", 60.0)


@pytest.mark.parametrize("text,want", [("30s", 30.0), ("1m30s", 90.0), ("1h0m0s", 3600.0), ("1.5s", 1.5),
                                       ("250ms", 0.25), ("0s", 0.0), ("", 0.0)])
def test_duration_s(text: str, want: float) -> None:
    assert duration_s(text) == want


@pytest.mark.parametrize("text", ["30", "5x", "1m 30s", "-1s"])
def test_duration_s_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        duration_s(text)
