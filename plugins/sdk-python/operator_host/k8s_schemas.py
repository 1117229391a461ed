"""CRD schemas of Kubernetes types a spec embeds, as k8s-openapi's schemars gives them (without their descriptions)."""

from __future__ import annotations

#: A `resource.Quantity`: a string or a number (`500m`, `1.5Gi`, `2`).
QUANTITY = {"x-kubernetes-int-or-string": True}

#: A `core/v1` `ResourceRequirements`: a container's compute resources.
RESOURCE_REQUIREMENTS = {
    "type": "object",
    "properties": {
        "claims": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "request": {"type": "string"}},
                "required": ["name"],
            },
        },
        "limits": {"type": "object", "additionalProperties": QUANTITY},
        "requests": {"type": "object", "additionalProperties": QUANTITY},
    },
}
