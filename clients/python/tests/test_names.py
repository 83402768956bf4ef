"""The names, label values and workdirs made from the port's ids."""

from __future__ import annotations

import pytest

from afe_sandbox import SpecRefusedError
from afe_sandbox.names import dns_label, label_value, workdir_of


@pytest.mark.parametrize("sandbox_id,want", [
    ("ok-1", "ok-1"),
    ("Task_7/Attempt 2", "task-7-attempt-2-"),
    ("x" * 70, "x" * 54 + "-"),
])
def test_dns_label(sandbox_id: str, want: str) -> None:
    got = dns_label(sandbox_id)
    assert got.startswith(want)
    assert len(got) <= 63
    if got != sandbox_id:
        assert len(got) == len(want) + 8, "a changed id ends with a hash of it"


def test_dns_labels_of_different_ids_differ() -> None:
    assert dns_label("a_b") != dns_label("a/b")


def test_label_value() -> None:
    assert label_value("alice") == "alice"
    assert label_value("") == ""
    got = label_value("alice@example.com")
    assert got.startswith("alice_example.com-") and len(got) == len("alice_example.com-") + 8
    assert len(label_value("l" * 100)) == 63


def test_workdir() -> None:
    assert workdir_of("") == "/workspace"
    assert workdir_of("proj/src") == "/workspace/proj/src"
    assert workdir_of("/workspace/a/../b") == "/workspace/b"
    for outside in ("/tmp", "../etc", "/workspace-other"):
        with pytest.raises(SpecRefusedError) as e:
            workdir_of(outside)
        assert e.value.reason == "InvalidSpec"
