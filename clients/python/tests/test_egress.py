"""Egress entries checked as the controller's model checks them: the
table of cases is the Go code's (internal/egress/testdata/hosts.json)."""

from __future__ import annotations

import json
import pathlib

import pytest

from afe_sandbox import SpecRefusedError
from afe_sandbox.egress import EgressHost, entries, parse_host

_TABLE = pathlib.Path(__file__).resolve().parents[3] / "internal" / "egress" / "testdata" / "hosts.json"


@pytest.mark.parametrize("case", json.loads(_TABLE.read_text()), ids=lambda c: repr(c["entry"])[:40])
def test_hosts_table(case: dict) -> None:
    if case["valid"]:
        assert parse_host(case["entry"]).entry == case["entry"]
    else:
        with pytest.raises(SpecRefusedError):
            parse_host(case["entry"])


def test_entries() -> None:
    assert parse_host(".pypi.org") == EgressHost("pypi.org", True)
    assert entries(["example.com", ".pypi.org"]) == ["example.com", ".pypi.org"]
    for bad in (["a.com", "a.com"], [f"h{i}.example.com" for i in range(65)], ["a.com\nhttp_access allow all"]):
        with pytest.raises(SpecRefusedError):
            entries(bad)
