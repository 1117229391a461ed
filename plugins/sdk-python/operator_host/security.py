"""Security contexts that pass the Pod Security Standard `restricted`."""

from __future__ import annotations

from typing import Optional


def restricted_pod_security_context(user: Optional[int] = None) -> dict:
    """A pod security context for `restricted`: runs as non-root (as `user`, or the image's
    own non-root user when None) with the runtime's default seccomp profile."""
    context: dict = {"runAsNonRoot": True}
    if user is not None:
        context.update(runAsUser=user, runAsGroup=user, fsGroup=user)
    context["seccompProfile"] = {"type": "RuntimeDefault"}
    return context


def restricted_container_security_context() -> dict:
    """A container security context for `restricted`: no privilege escalation, every
    capability dropped."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
