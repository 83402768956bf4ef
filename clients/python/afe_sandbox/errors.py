"""The errors of afe_sandbox, typed as the Go client's (client/errors.go).

Each carries the reason a caller acts on: the condition's reason the
controller wrote (InvalidSpec, RuntimeNotAllowed...), the access API's reason
from its Status details (SandboxNotFound, PathRefused...), or the Kubernetes
API server's (NotFound, Invalid, Forbidden...). A non-zero exit of a command
is never an error: it is a result.
"""

from __future__ import annotations

import json
from typing import Any, Optional

ACCESS_GROUP = "access.sandbox.afe.dev"


class AfeError(Exception):
    """An error of the controller, its access API or the API server, with
    the reason it gave."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason

    def __str__(self) -> str:
        if self.reason:
            return f"{self.message} ({self.reason})"
        return self.message


class NotFoundError(AfeError, LookupError):
    """The sandbox, ticket, run or workspace path does not exist."""


class NotReadyError(AfeError):
    """The sandbox is not Ready (yet, or any more), or the access API is not
    served now (the API server's 503 while its manager starts): try again
    later."""


class SpecRefusedError(AfeError, ValueError):
    """The spec was refused: by the API server's validation (reason
    Invalid) or by the controller (its Ready condition's reason, such as
    InvalidSpec or RuntimeNotAllowed)."""


class TimedOutError(AfeError, TimeoutError):
    """A deadline passed: the caller's timeout or the Run's own."""


class ForbiddenError(AfeError, PermissionError):
    """The caller may not do this (RBAC)."""


class ConflictError(AfeError):
    """The object exists already, or changed meanwhile."""


class FailedError(AfeError):
    """The object failed (a Run that could not be executed, a ticket that
    finished), or the server erred."""


def _status_of(body: Any) -> dict[str, Any]:
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            parsed = json.loads(body)
        except ValueError:
            return {"message": body.strip()}
        return parsed if isinstance(parsed, dict) else {}
    return body if isinstance(body, dict) else {}


def access_reason(status: dict[str, Any]) -> str:
    """The access API's reason in a Status (the reason of the one cause of
    its details), empty when the Status carries none."""
    details = status.get("details") or {}
    causes = details.get("causes") or []
    if details.get("group") != ACCESS_GROUP or not causes:
        return ""
    return str(causes[0].get("reason", ""))


_BY_CODE: dict[int, type[AfeError]] = {
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    422: SpecRefusedError,
    503: NotReadyError,
    504: TimedOutError,
}

_BY_ACCESS_REASON: dict[str, type[AfeError]] = {
    "SandboxNotFound": NotFoundError,
    "RunNotFound": NotFoundError,
    "PathNotFound": NotFoundError,
    "LogNotFound": NotFoundError,
    "SandboxNotReady": NotReadyError,
    "SandboxDeleting": NotReadyError,
    "NodeUnavailable": NotReadyError,
    "Forbidden": ForbiddenError,
}


def from_status(code: Optional[int], body: Any, what: str) -> AfeError:
    """The typed error of a refusal with this HTTP code and Status body,
    about what (for example "exec in sandbox s1")."""
    status = _status_of(body)
    reason = access_reason(status) or str(status.get("reason") or "")
    message = f"{what}: {status.get('message') or f'HTTP {code}'}"
    cls = _BY_ACCESS_REASON.get(reason) or _BY_CODE.get(code or 0, FailedError)
    return cls(message, reason)


def from_api_exception(err: Exception, what: str) -> AfeError:
    """The typed error of a kubernetes.client.ApiException."""
    return from_status(getattr(err, "status", None), getattr(err, "body", None) or str(err), what)
