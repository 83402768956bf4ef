"""KubernetesBackend: the sandbox port on the controller. A spawn is a
Sandbox, an exec goes through the access API over WebSocket, a snapshot is
a builtin Snapshot Run, a destroy deletes the Sandbox. The blocking
Kubernetes calls run in threads (asyncio.to_thread), so one event loop
drives many sandboxes at once; the loop's default executor bounds how many
(min(32, cores + 4) threads unless the engine sets a larger one).
"""

from __future__ import annotations

import asyncio
import io
import posixpath
import tarfile
import time
from datetime import datetime
from typing import Optional, Sequence

from . import runs
from ._kube import Kube
from .egress import entries
from .errors import SpecRefusedError, TimedOutError
from .names import WORKSPACE, dns_label, label_value, workdir_of
from .port import ExecResult, SandboxHandle, SandboxSpec

LEARNER_LABEL = "sandbox.afe.dev/learner"
LEARNER_ANNOTATION = "sandbox.afe.dev/learner-id"
SANDBOX_ID_ANNOTATION = "sandbox.afe.dev/sandbox-id"

# Runs a command in the folder $1: an exec starts in /workspace.
_IN_WORKDIR = ["sh", "-c", 'cd -- "$1" && shift && exec "$@"', "sh"]


class KubernetesBackend:
    """The sandbox port on the afe sandbox controller, in namespace, with
    sandboxes of image; kubeconfig None reads KUBECONFIG (or
    ~/.kube/config, or the pod's service account). egress lists the hosts
    each sandbox may reach through its proxy (none: no network); runtime
    names an OCI runtime the manager allows (None: its default). Timeouts
    are in seconds."""

    def __init__(self, namespace: str, image: str, kubeconfig: Optional[str] = None, *,
                 egress: Sequence[str] = (), runtime: Optional[str] = None,
                 spawn_timeout: float = 180.0, exec_timeout: float = 600.0) -> None:
        self.namespace = namespace
        self.image = image
        self.egress = entries(egress)
        self.runtime = runtime
        self.spawn_timeout = spawn_timeout
        self.exec_timeout = exec_timeout
        self._kube = Kube(namespace, kubeconfig)

    async def spawn(self, spec: SandboxSpec) -> SandboxHandle:
        """Creates the Sandbox and waits from a watch until it is Ready. A
        spec the API server or the controller refuses raises
        SpecRefusedError with the reason (the condition's); no Ready within
        spawn_timeout raises TimedOutError. Either way the Sandbox is
        deleted: a failed spawn leaves nothing behind."""
        return await asyncio.to_thread(self._spawn, spec)

    def _spawn(self, spec: SandboxSpec) -> SandboxHandle:
        name, workdir = dns_label(spec.sandbox_id), workdir_of(spec.workdir)
        obj = self._kube.create("sandboxes", self.sandbox_object(name, spec))
        try:
            self._kube.wait("sandboxes", name, _ready, self.spawn_timeout)
            if workdir != WORKSPACE:
                self._kube.put_tar(name, WORKSPACE, _folder_tar(workdir), self.spawn_timeout)
        except TimedOutError as e:
            try:
                why = self._not_ready_reason(name)
            finally:
                self._kube.delete("sandboxes", name, self.spawn_timeout)
            raise TimedOutError(f"sandbox {name} was not Ready within {self.spawn_timeout:g}s: {why[1]}",
                                why[0] or e.reason) from e
        except BaseException:
            # Refused, or anything else: the caller has no handle to it.
            self._kube.delete("sandboxes", name, self.spawn_timeout)
            raise
        created = datetime.fromisoformat(obj["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
        return SandboxHandle(id=name, workdir=workdir, created_at=created)

    def _not_ready_reason(self, name: str) -> tuple[str, str]:
        """The reason and message of the Sandbox's Ready condition."""
        cond = runs.condition(self._kube.get("sandboxes", name).get("status") or {}, "Ready")
        return cond.get("reason", ""), cond.get("message", "")

    def sandbox_object(self, name: str, spec: SandboxSpec) -> dict:
        """The Sandbox spawn creates for spec, named name."""
        resources: dict = {}
        if spec.limits.memory_bytes is not None:
            resources["memory"] = str(spec.limits.memory_bytes)
        if spec.limits.cpu_seconds is not None:
            resources["cpuSeconds"] = spec.limits.cpu_seconds
        if spec.limits.file_size_bytes is not None:
            resources["fileSize"] = str(spec.limits.file_size_bytes)
        body: dict = {"image": self.image, "resources": resources}
        if self.egress:
            body["egress"] = self.egress
        if self.runtime:
            body["runtime"] = self.runtime
        return {
            "apiVersion": "sandbox.afe.dev/v1alpha1", "kind": "Sandbox",
            "metadata": {
                "name": name,
                "labels": {LEARNER_LABEL: label_value(spec.learner_id)},
                "annotations": {LEARNER_ANNOTATION: spec.learner_id, SANDBOX_ID_ANNOTATION: spec.sandbox_id},
            },
            "spec": body,
        }

    async def exec(self, handle: SandboxHandle, cmd: Sequence[str], *,
                   timeout: Optional[float] = None) -> ExecResult:
        """Runs the command list in the sandbox, in its workdir, as the
        sandbox's user, through the access API over WebSocket. A non-zero
        exit is a result; a missing sandbox raises NotFoundError, one not
        Ready NotReadyError, and no end within timeout (default
        exec_timeout) TimedOutError."""
        argv = list(cmd)
        if handle.workdir != WORKSPACE:
            argv = _IN_WORKDIR + [handle.workdir] + argv
        start = time.monotonic()
        code, out = await asyncio.to_thread(
            self._kube.exec, handle.id, argv, self.exec_timeout if timeout is None else timeout)
        return ExecResult(cmd=list(cmd), returncode=code, stdout=out.stdout, stderr=out.stderr,
                          duration_s=time.monotonic() - start, stdout_truncated=out.stdout_truncated,
                          stderr_truncated=out.stderr_truncated)

    async def snapshot(self, handle: SandboxHandle) -> str:
        """Copies the workspace into a new snapshot volume (a builtin
        Snapshot Run) and returns its name, the reference a Sandbox starts
        from with spec.workspace.fromSnapshot."""
        return await asyncio.to_thread(runs.snapshot, self._kube, handle.id, self.exec_timeout)

    async def destroy(self, handle: SandboxHandle) -> None:
        """Deletes the Sandbox and waits until its container, proxy,
        network and workspace are gone. A sandbox gone already is no
        error."""
        await asyncio.to_thread(self._kube.delete, "sandboxes", handle.id, self.spawn_timeout)


def _ready(obj: dict) -> bool:
    """Whether the Sandbox is Ready; a Failed one raises SpecRefusedError
    with its Ready condition's reason."""
    return runs.ready(obj, "Failed", SpecRefusedError)


def _folder_tar(workdir: str) -> bytes:
    """A tar of the folders of workdir below /workspace, for an upload
    into /workspace."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        path = ""
        for part in posixpath.relpath(workdir, WORKSPACE).split("/"):
            path = posixpath.join(path, part)
            info = tarfile.TarInfo(path)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
            tar.addfile(info)
    return buf.getvalue()
