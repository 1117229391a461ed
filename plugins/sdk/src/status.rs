//! Kubernetes-style status conditions, without a clock.

use serde::{Deserialize, Serialize};

/// A status condition in the shape of `metav1.Condition`.
///
/// Plugins have no clock, so they leave `last_transition_time` empty: the host stamps it
/// when it writes status, keeping the previous time while the condition's status is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type, CamelCase (e.g. `Available`).
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase reason for the last transition.
    pub reason: String,
    /// A human-readable message.
    pub message: String,
    /// The parent's `metadata.generation` this condition was computed from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Filled in by the host; plugins leave it empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

impl Condition {
    /// A condition that is `True` when `ok`, `False` otherwise.
    pub fn new(
        type_: &str,
        ok: bool,
        reason: &str,
        message: impl Into<String>,
        observed_generation: Option<i64>,
    ) -> Self {
        Condition {
            type_: type_.to_string(),
            status: if ok { "True" } else { "False" }.to_string(),
            reason: reason.to_string(),
            message: message.into(),
            observed_generation,
            last_transition_time: None,
        }
    }

    /// The `Ready` condition of a parent in `phase`: `True` when `ready`, with the phase as
    /// its reason in the CamelCase a condition reason must be (`ONLINE_PARTIAL` and
    /// `online-partial` give `OnlinePartial`), so a status keeps a `phase` for people and
    /// `kubectl wait --for=condition=Ready` works.
    pub fn ready_from_phase(
        phase: &str,
        ready: bool,
        message: impl Into<String>,
        observed_generation: Option<i64>,
    ) -> Self {
        Condition::new(
            "Ready",
            ready,
            &camel_case_reason(phase),
            message,
            observed_generation,
        )
    }
}

/// `text` as a condition reason (`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`): words split at
/// anything but letters and digits, each capitalised; `Unknown` when nothing is left.
fn camel_case_reason(text: &str) -> String {
    let mut reason = String::new();
    for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            // A word already in CamelCase (`RolloutComplete`) keeps its inner capitals.
            let keep_case = word.chars().any(|c| c.is_ascii_lowercase());
            reason.push(first.to_ascii_uppercase());
            reason.extend(chars.map(|c| if keep_case { c } else { c.to_ascii_lowercase() }));
        }
    }
    match reason.trim_start_matches(|c: char| c.is_ascii_digit()) {
        "" => "Unknown".to_string(),
        trimmed => trimmed.to_string(),
    }
}

/// The CRD schema of a `conditions` status field (`Vec<Condition>`), as Kubernetes lists
/// of conditions are declared: a map keyed by `type`. Use it with
/// `#[schemars(schema_with = "operator_host_sdk::conditions_schema")]`.
pub fn conditions_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status"],
            "properties": {
                "type": {"type": "string"},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "reason": {"type": "string"},
                "message": {"type": "string"},
                "observedGeneration": {"type": "integer", "format": "int64"},
                "lastTransitionTime": {"type": "string", "format": "date-time"}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_from_phase_makes_a_valid_reason() {
        for (phase, reason) in [
            ("ONLINE_PARTIAL", "OnlinePartial"),
            ("online-partial", "OnlinePartial"),
            ("Running", "Running"),
            ("RolloutComplete", "RolloutComplete"),
            ("3 members", "Members"),
            ("", "Unknown"),
        ] {
            let condition = Condition::ready_from_phase(phase, true, "m", Some(2));
            assert_eq!(condition.reason, reason, "{phase:?}");
            assert_eq!(condition.type_, "Ready");
            assert_eq!(condition.status, "True");
        }
        assert_eq!(
            Condition::ready_from_phase("Pending", false, "", None).status,
            "False"
        );
    }
}
