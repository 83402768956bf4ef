"""Client: the synchronous API beyond the port, as the Go client offers it
(client/): tickets and sandboxes with egress, Runs with their JSON result,
files in and out of the workspace, exec, snapshots, merges with CI, what
sandboxes use, and the end of a ticket. Every method blocks; timeouts are
in seconds."""

from __future__ import annotations

import io
import posixpath
import tarfile
import time
from typing import Optional, Sequence

from . import runs
from ._kube import Kube
from .egress import entries
from .errors import FailedError, NotFoundError, SpecRefusedError
from .port import ExecResult
from .runs import MergeReport, RunOutcome
from .usage import RESOURCE, SandboxUsage, usage_of


class Client:
    """The controller's objects in namespace; kubeconfig None reads
    KUBECONFIG (or ~/.kube/config, or the pod's service account)."""

    def __init__(self, namespace: str, kubeconfig: Optional[str] = None) -> None:
        self.namespace = namespace
        self._kube = Kube(namespace, kubeconfig)

    def create_ticket(self, name: str, image: str = "afe/busybox:dev", egress: Sequence[str] = (),
                      user: Optional[str] = None, timeout: float = 180.0) -> dict:
        """Creates a Ticket whose sandbox (named like the ticket) runs image
        and may reach the egress hosts through its proxy, and waits from a
        watch until the ticket is Ready. A ticket that finishes instead
        raises FailedError with its Ready condition's reason."""
        self._kube.create("tickets", {"apiVersion": "sandbox.afe.dev/v1alpha1", "kind": "Ticket",
                                      "metadata": {"name": name}, "spec": {"sandbox": _template(image, egress, user)}})
        return self._kube.wait("tickets", name, _ticket_ready, timeout)

    def create_sandbox(self, name: str, image: str = "afe/busybox:dev", egress: Sequence[str] = (),
                       user: Optional[str] = None, timeout: float = 180.0) -> dict:
        """Creates a Sandbox of its own (no ticket) and waits until it is
        Ready; KubernetesBackend.spawn is the port's way to the same."""
        self._kube.create("sandboxes", {"apiVersion": "sandbox.afe.dev/v1alpha1", "kind": "Sandbox",
                                        "metadata": {"name": name}, "spec": _template(image, egress, user)})
        return self._kube.wait("sandboxes", name, _sandbox_ready, timeout)

    def run(self, sandbox: str, script: Optional[str] = None, command: Optional[Sequence[str]] = None,
            timeout: float = 600.0, working_dir: Optional[str] = None) -> RunOutcome:
        """Executes the script (with /bin/sh -c) or the command (exec form)
        as a Run and returns its outcome: exit code, output, and result, the
        last stdout line that parses as a JSON object. A Run past timeout
        is killed and raises TimedOutError."""
        if (script is None) == (command is None):
            raise ValueError("run needs a script or a command, not both")
        spec: dict = {"script": script} if script is not None else {"command": list(command or [])}
        if working_dir:
            spec["workingDir"] = working_dir
        return runs.outcome_of(runs.run_to_end(self._kube, sandbox, spec, timeout))

    def exec(self, sandbox: str, cmd: Sequence[str], timeout: float = 600.0) -> ExecResult:
        """Runs the command in /workspace through the access API (over
        WebSocket), stdout and stderr apart; a non-zero exit is a result."""
        start = time.monotonic()
        code, out = self._kube.exec(sandbox, list(cmd), timeout)
        return ExecResult(cmd=list(cmd), returncode=code, stdout=out.stdout, stderr=out.stderr,
                          duration_s=time.monotonic() - start, stdout_truncated=out.stdout_truncated,
                          stderr_truncated=out.stderr_truncated)

    def put_file(self, sandbox: str, path: str, data: bytes, mode: int = 0o644, timeout: float = 120.0) -> None:
        """Writes data as the workspace file path (absolute, under
        /workspace; its folder must exist), owned by the sandbox's user."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(posixpath.basename(path))
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        self._kube.put_tar(sandbox, posixpath.dirname(path), buf.getvalue(), timeout)

    def get_file(self, sandbox: str, path: str, timeout: float = 120.0) -> bytes:
        """The content of the workspace file path. A missing path raises
        NotFoundError (reason PathNotFound)."""
        with tarfile.open(fileobj=io.BytesIO(self._kube.get_tar(sandbox, path, timeout))) as tar:
            # The tar of a file holds that file alone, under its own name;
            # the tar of a folder holds the folder first.
            member = tar.next()
            if member is not None and member.isfile() and member.name == posixpath.basename(path.rstrip("/")):
                f = tar.extractfile(member)
                if f is not None:
                    return f.read()
        raise NotFoundError(f"get {sandbox}:{path}: not a regular file", "PathNotFound")

    def snapshot(self, sandbox: str, timeout: float = 600.0) -> str:
        """Copies the workspace into a new snapshot volume and returns its
        name (for a Sandbox's spec.workspace.fromSnapshot)."""
        return runs.snapshot(self._kube, sandbox, timeout)

    def merge_and_ci(self, sandbox: str, lanes: Sequence[str], ci_script: str, base_ref: Optional[str] = None,
                     integration_branch: Optional[str] = None, timeout: float = 600.0) -> MergeReport:
        """Commits each lane's worktree (/workspace/lanes/<lane>), merges
        the lanes in order into the integration branch and runs ci_script
        there. A conflict or a failing CI is a report with ok False."""
        return runs.merge_and_ci(self._kube, sandbox, list(lanes), ci_script, base_ref, integration_branch, timeout)

    def finish(self, ticket: str, state: str = "Done", timeout: float = 180.0) -> dict:
        """Ends the ticket (Done, Failed or Cancelled) and waits until its
        sandboxes are removed (phase Finished); its objects stay, for the
        record, until delete_ticket."""
        self._kube.patch("tickets", ticket, {"spec": {"state": state}})
        return self._kube.wait("tickets", ticket, lambda t: (t.get("status") or {}).get("phase") == "Finished",
                               timeout)

    def usage(self, sandbox: str) -> SandboxUsage:
        """What the sandbox uses, as its manager last measured it (every
        --usage-period, kept in the manager's memory). A sandbox not
        measured yet (not running, or started since the last measurement)
        raises NotFoundError with reason UsageNotMeasured; one that does not
        exist, reason SandboxNotFound."""
        return usage_of(self._kube.access_get(RESOURCE, sandbox, f"the usage of sandbox {sandbox}"))

    def usages(self, selector: str = "") -> list[SandboxUsage]:
        """What every measured sandbox of the namespace whose labels match
        selector (kubectl's -l; empty: all) uses, in one request, in the
        order of their names."""
        answer = self._kube.access_list(RESOURCE, selector, f"the usage of sandboxes in {self.namespace}")
        return [usage_of(item) for item in answer.get("items") or []]

    def delete_ticket(self, ticket: str, timeout: float = 180.0) -> None:
        """Deletes the ticket and waits until it is gone; gone already is
        no error."""
        self._kube.delete("tickets", ticket, timeout)

    def delete_sandbox(self, sandbox: str, timeout: float = 180.0) -> None:
        """Deletes the Sandbox and waits until it is gone; gone already is
        no error."""
        self._kube.delete("sandboxes", sandbox, timeout)


def _template(image: str, egress: Sequence[str], user: Optional[str]) -> dict:
    spec: dict = {"image": image}
    if egress:
        spec["egress"] = entries(egress)
    if user:
        spec["user"] = user
    return spec


def _ticket_ready(obj: dict) -> bool:
    return runs.ready(obj, "Finished", FailedError)


def _sandbox_ready(obj: dict) -> bool:
    return runs.ready(obj, "Failed", SpecRefusedError)
