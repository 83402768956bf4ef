"""afe_sandbox: the Python client of the afe sandbox controller.

The sandbox port, asynchronous: ResourceLimits, SandboxSpec, SandboxHandle,
ExecResult, the runtime-checkable Protocol SandboxBackend, and
KubernetesBackend, which implements it on the controller (spawn, exec,
snapshot, destroy). Beyond the port, synchronous, as the Go client offers
it: Client (tickets with egress, Runs with their JSON result, files,
snapshots, merge_and_ci, and what sandboxes use as SandboxUsage). Errors are typed (errors.py) and carry the reason
the controller or its access API gave. docs/python.md describes it.
"""

from .backend import KubernetesBackend
from .client import Client
from .errors import (
    AfeError,
    ConflictError,
    FailedError,
    ForbiddenError,
    NotFoundError,
    NotReadyError,
    SpecRefusedError,
    TimedOutError,
)
from .port import ExecResult, ResourceLimits, SandboxBackend, SandboxHandle, SandboxSpec
from .runs import MergeReport, RunOutcome
from .usage import SandboxUsage

__all__ = [
    "AfeError",
    "Client",
    "ConflictError",
    "ExecResult",
    "FailedError",
    "ForbiddenError",
    "KubernetesBackend",
    "MergeReport",
    "NotFoundError",
    "NotReadyError",
    "ResourceLimits",
    "RunOutcome",
    "SandboxBackend",
    "SandboxHandle",
    "SandboxSpec",
    "SandboxUsage",
    "SpecRefusedError",
    "TimedOutError",
]
