"""Runs: a script, a command or a builtin executed in a sandbox by the
controller, waited for from a watch, and the outcome read from its status,
as the Go client's Run, Snapshot and MergeAndCI do (client/run.go,
client/builtins.go)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

from ._kube import Kube
from .errors import AfeError, FailedError, NotFoundError, TimedOutError

_TERMINAL = ("Completed", "TimedOut", "Failed")


@dataclass
class RunOutcome:
    """How a Run ended. A non-zero exit is an outcome (ok False), not an
    error."""

    run: str
    ok: bool
    exit_code: int
    timed_out: bool
    output: str
    output_truncated: bool
    result: dict[str, Any] = field(default_factory=dict)
    attempts: int = 0
    duration_s: float = 0.0
    phase: str = ""
    message: str = ""


@dataclass
class MergeReport:
    """What merge_and_ci did: the Run's result as the controller wrote it
    (merged, conflicts, ci_passed, ci_output, the commits), and ok when
    every lane merged and the CI passed."""

    ok: bool
    result: dict[str, Any]
    run: str


def condition(status: dict, kind: str) -> dict:
    """The condition of that type in a status, or an empty dict."""
    for cond in status.get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return {}


def ready(obj: dict, failed_phase: str, error: type[AfeError]) -> bool:
    """Whether a Sandbox's or Ticket's Ready condition is true; in
    failed_phase instead (Failed, Finished), it raises error with the
    condition's reason."""
    st = obj.get("status") or {}
    cond = condition(st, "Ready")
    if cond.get("status") == "True":
        return True
    if st.get("phase") == failed_phase:
        raise error(f"{str(obj.get('kind', 'object')).lower()} {obj['metadata']['name']} is {failed_phase}: {cond.get('message', '')}",
                    cond.get("reason", failed_phase))
    return False


def run_to_end(kube: Kube, sandbox: str, spec: dict, timeout: float) -> dict:
    """Creates a Run of spec in the sandbox, bounded by timeout (its
    timeoutSeconds no later), and watches it until it ends. A sandbox that
    does not exist raises NotFoundError (reason SandboxNotFound): a Run of
    it would wait, Pending, for a sandbox of that name to be made."""
    try:
        kube.get("sandboxes", sandbox)
    except NotFoundError as e:
        raise NotFoundError(f"sandbox {sandbox} does not exist", "SandboxNotFound") from e
    spec = dict(spec, sandboxRef={"name": sandbox})
    bound = max(1, math.floor(timeout))
    if not spec.get("timeoutSeconds") or spec["timeoutSeconds"] > bound:
        spec["timeoutSeconds"] = bound
    run = kube.create("runs", {"apiVersion": "sandbox.afe.dev/v1alpha1", "kind": "Run",
                               "metadata": {"generateName": sandbox + "-run-"}, "spec": spec})
    name = run["metadata"]["name"]
    try:
        return kube.wait("runs", name, lambda o: (o.get("status") or {}).get("phase") in _TERMINAL, timeout + 30)
    except TimedOutError as e:
        raise TimedOutError(f"run {name} did not end within {timeout:g}s", "DeadlineExceeded") from e


def outcome_of(run: dict) -> RunOutcome:
    """The outcome of an ended Run. A Run that timed out raises
    TimedOutError, one that could not be executed FailedError with the
    Completed condition's reason."""
    st, name = run.get("status") or {}, run["metadata"]["name"]
    cond = condition(st, "Completed")
    o = RunOutcome(run=name, ok=bool(st.get("ok")), exit_code=int(st.get("exitCode", -1)),
                   timed_out=bool(st.get("timedOut")), output=st.get("output", ""),
                   output_truncated=bool(st.get("outputTruncated")), result=dict(st.get("result") or {}),
                   attempts=int(st.get("attempts", 0)), duration_s=st.get("durationMilliseconds", 0) / 1000,
                   phase=st.get("phase", ""), message=cond.get("message", ""))
    if o.phase == "TimedOut":
        raise TimedOutError(f"run {name} timed out and was killed", "TimedOut")
    if o.phase == "Failed":
        raise FailedError(f"run {name} could not be executed: {o.message}", cond.get("reason", ""))
    return o


def snapshot(kube: Kube, sandbox: str, timeout: float) -> str:
    """Copies the sandbox's workspace into a new snapshot volume and
    returns its name."""
    o = outcome_of(run_to_end(kube, sandbox, {"builtin": "Snapshot"}, timeout))
    name = o.result.get("snapshot")
    if not isinstance(name, str) or not name:
        raise FailedError(f"snapshot run {o.run} named no snapshot")
    return name


def merge_and_ci(kube: Kube, sandbox: str, lanes: list[str], ci_script: str, base_ref: Optional[str],
                 integration_branch: Optional[str], timeout: float) -> MergeReport:
    """Commits each lane's worktree, merges the lanes in order into the
    integration branch (reset to base_ref; default "integration") and runs
    the CI script there. A
    conflict or a failing CI is a report with ok False."""
    spec: dict[str, Any] = {"builtin": "MergeAndCI", "lanes": lanes, "ciScript": ci_script}
    if base_ref:
        spec["baseRef"] = base_ref
    if integration_branch:
        spec["integrationBranch"] = integration_branch
    o = outcome_of(run_to_end(kube, sandbox, spec, timeout))
    return MergeReport(ok=o.ok, result=o.result, run=o.run)
