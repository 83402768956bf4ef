"""Names and label values made from the port's free-form ids, and the
workdir's place in the workspace."""

from __future__ import annotations

import hashlib
import posixpath
import re

from .errors import SpecRefusedError

WORKSPACE = "/workspace"

_NOT_DNS = re.compile(r"[^a-z0-9-]+")
_NOT_LABEL = re.compile(r"[^A-Za-z0-9._-]+")


def _shorten(value: str, original: str, limit: int) -> str:
    """value cut to limit characters, with a hash of original at its end
    when it differs from original, so that two ids never share a name."""
    if value == original and len(value) <= limit:
        return value
    digest = hashlib.sha256(original.encode()).hexdigest()[:8]
    return f"{value[:limit - 9].rstrip('-._')}-{digest}".lstrip("-._")


def dns_label(sandbox_id: str) -> str:
    """The Sandbox name of a sandbox id: the id itself when it is a DNS
    label (lower case letters, digits and '-', at most 63), else a label
    made from it with a hash of the id at its end."""
    value = _NOT_DNS.sub("-", sandbox_id.lower()).strip("-")
    name = _shorten(value, sandbox_id, 63)
    if not name:
        raise SpecRefusedError(f"sandbox id {sandbox_id!r} gives no name", "InvalidSpec")
    return name


def label_value(learner_id: str) -> str:
    """A label value for a learner id: the id itself when it is one (at
    most 63 letters, digits, '-', '_' and '.', alphanumeric at both ends),
    else one made from it with a hash of the id at its end."""
    value = _NOT_LABEL.sub("_", learner_id).strip("-._")
    return _shorten(value, learner_id, 63)


def workdir_of(workdir: str) -> str:
    """The absolute workdir: a relative one is under /workspace; one
    outside /workspace is refused (only the workspace persists, and only
    it is snapshotted)."""
    path = posixpath.normpath(posixpath.join(WORKSPACE, workdir or "."))
    if path != WORKSPACE and not path.startswith(WORKSPACE + "/"):
        raise SpecRefusedError(f"workdir {workdir!r} is outside {WORKSPACE}", "InvalidSpec")
    return path
