"""The sandbox port: the shapes of a spec, a handle and a result, and the
Protocol of its four asynchronous operations. A workflow engine written
against SandboxBackend runs on any backend that satisfies it at runtime,
KubernetesBackend among them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Optional, Protocol, Sequence, runtime_checkable


@dataclass(frozen=True)
class ResourceLimits:
    """The limits of a sandbox: its memory in bytes (a process past it is
    killed, exit 137), the CPU seconds each process may use (then SIGXCPU,
    SIGKILL a second later; under runsc the command's own process only, not
    its children), and the largest file a process may write (a
    larger write fails with EFBIG). None leaves the controller's default
    (memory and file size 1 GiB, CPU time unbounded)."""

    memory_bytes: Optional[int] = None
    cpu_seconds: Optional[int] = None
    file_size_bytes: Optional[int] = None


@dataclass(frozen=True)
class SandboxSpec:
    """What spawn makes: a sandbox for sandbox_id (its name, a DNS label),
    owned by learner_id (kept as a label), whose commands start in workdir
    (under /workspace, the persistent workspace), with limits."""

    sandbox_id: str
    learner_id: str
    workdir: str = "/workspace"
    limits: ResourceLimits = field(default_factory=ResourceLimits)


@dataclass(frozen=True)
class SandboxHandle:
    """A spawned sandbox: its id (the Sandbox's name), the folder its
    commands start in, and when it was created."""

    id: str
    workdir: str
    created_at: datetime


@dataclass(frozen=True)
class ExecResult:
    """A command's end: the command, its exit code (137 when killed), its
    stdout and stderr apart, how long it took, in seconds, and whether
    stdout or stderr was cut: each holds at most the last 16 MiB the
    command printed (EXEC_OUTPUT_MAX), and stdout_truncated or
    stderr_truncated is True when it lost its beginning so."""

    cmd: list[str]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float
    stdout_truncated: bool = False
    stderr_truncated: bool = False


@runtime_checkable
class SandboxBackend(Protocol):
    """The four operations of a sandbox backend. A non-zero exit is an
    ExecResult; a refused spec, a missing sandbox and a timeout raise."""

    async def spawn(self, spec: SandboxSpec) -> SandboxHandle:
        """Makes the sandbox and returns once it is Ready."""
        ...

    async def exec(self, handle: SandboxHandle, cmd: Sequence[str]) -> ExecResult:
        """Runs the command list in the sandbox's workdir."""
        ...

    async def snapshot(self, handle: SandboxHandle) -> str:
        """Copies the workspace and returns a reference to the copy."""
        ...

    async def destroy(self, handle: SandboxHandle) -> None:
        """Removes the sandbox; destroying one already gone is no error."""
        ...
