"""Kubernetes kinds a plugin reconciles or returns, and the common built-in ones."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """A Kubernetes API kind, as the contract's `group-version-kind`."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """`apiVersion` as objects carry it: `group/version`, or `version` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def matches(self, obj: dict) -> bool:
        """Whether the JSON object `obj` is of this kind."""
        return obj.get("apiVersion") == self.api_version and obj.get("kind") == self.kind


CONFIG_MAP = Kind("", "v1", "ConfigMap", "configmaps")
SECRET = Kind("", "v1", "Secret", "secrets")
SERVICE = Kind("", "v1", "Service", "services")
SERVICE_ACCOUNT = Kind("", "v1", "ServiceAccount", "serviceaccounts")
PERSISTENT_VOLUME_CLAIM = Kind("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
DEPLOYMENT = Kind("apps", "v1", "Deployment", "deployments")
STATEFUL_SET = Kind("apps", "v1", "StatefulSet", "statefulsets")
DAEMON_SET = Kind("apps", "v1", "DaemonSet", "daemonsets")
JOB = Kind("batch", "v1", "Job", "jobs")
CRON_JOB = Kind("batch", "v1", "CronJob", "cronjobs")
POD_DISRUPTION_BUDGET = Kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets")
INGRESS = Kind("networking.k8s.io", "v1", "Ingress", "ingresses")
NETWORK_POLICY = Kind("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies")
