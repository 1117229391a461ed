//! Which children's pods each selector of a plan selects: a Service, a PodDisruptionBudget or
//! a workload whose selector also takes in another child's pods is a mistake only the cluster
//! would otherwise reveal.
//!
//! The classic one: a migration Job's pods carry the app's labels, so the app's Service
//! routes traffic to them and its PodDisruptionBudget covers them (the disruption controller
//! then reports `jobs.batch does not implement the scale subresource`). `render`,
//! `conformance` and the authors' testing crate print these warnings; nothing is refused, as a
//! Service over two workloads can be meant (the message says how to tell them apart).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};
use serde_json::Value;

/// The labels of the pods `child` makes (`Kind "name"`, labels), if it makes pods.
fn pod_labels(child: &Value) -> Option<BTreeMap<String, String>> {
    let template = match child["kind"].as_str()? {
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
            &child["spec"]["template"]
        }
        "CronJob" => &child["spec"]["jobTemplate"]["spec"]["template"],
        "Pod" => child,
        _ => return None,
    };
    Some(crate::labels::of_object(template))
}

/// The pod selector of `child`, if it has one: a Service's `spec.selector` (a map; a Service
/// without one selects no pods), a LabelSelector's for the others. A selector that does not
/// parse is the API server's to refuse, not this check's.
fn pod_selector(child: &Value) -> Option<Selector> {
    let selector = &child["spec"]["selector"];
    match child["kind"].as_str()? {
        "Service" => {
            let labels = selector.as_object().filter(|labels| !labels.is_empty())?;
            Some(
                labels
                    .iter()
                    .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_string())))
                    .collect(),
            )
        }
        "PodDisruptionBudget" | "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => {
            let selector: LabelSelector = serde_json::from_value(selector.clone()).ok()?;
            Selector::try_from(selector).ok()
        }
        _ => None,
    }
}

fn describe(child: &Value) -> String {
    format!(
        "{} {:?}",
        child["kind"].as_str().unwrap_or(""),
        child["metadata"]["name"].as_str().unwrap_or("")
    )
}

/// A warning for each child of `children` (whole objects, as a plan applies them) whose pod
/// selector selects the pods of more than one child, or a workload whose selector selects
/// another child's pods.
pub fn overlaps<'a>(children: impl IntoIterator<Item = &'a Value>) -> Vec<String> {
    let children: Vec<&Value> = children.into_iter().collect();
    let pod_makers: Vec<(&Value, BTreeMap<String, String>)> = children
        .iter()
        .filter_map(|child| Some((*child, pod_labels(child)?)))
        .collect();
    let mut warnings = Vec::new();
    for child in &children {
        let Some(selector) = pod_selector(child) else {
            continue;
        };
        let selected: Vec<&Value> = pod_makers
            .iter()
            .filter(|(_, labels)| selector.matches(labels))
            .map(|(maker, _)| *maker)
            .collect();
        let is_workload = pod_labels(child).is_some();
        let others: Vec<String> = selected
            .iter()
            .filter(|maker| !std::ptr::eq(**maker, *child))
            .map(|maker| describe(maker))
            .collect();
        // A workload's own pods are its to select; anything else's are not. A Service or a
        // budget may select one child's pods, not several.
        let whose: Vec<String> = if is_workload {
            others
        } else if selected.len() > 1 {
            selected.iter().map(|maker| describe(maker)).collect()
        } else {
            Vec::new()
        };
        if !whose.is_empty() {
            let whose = whose.join(", ");
            warnings.push(format!(
                "{}'s selector selects the pods of {whose}: give each child's pods a label the \
                 others' lack (a Job's pods should not carry the labels of the app's Service \
                 or PodDisruptionBudget)",
                describe(child)
            ));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(labels: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"selector": {"matchLabels": labels.clone()},
                        "template": {"metadata": {"labels": labels}}}})
    }

    fn job(labels: Value) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "web-migrate"},
               "spec": {"template": {"metadata": {"labels": labels}}}})
    }

    fn service(selector: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
               "spec": {"selector": selector}})
    }

    fn pdb(selector: Value) -> Value {
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": selector}})
    }

    #[test]
    fn a_job_whose_pods_carry_the_apps_labels_is_selected_by_its_service_and_pdb() {
        let app = json!({"app": "web"});
        let children = [
            deployment(app.clone()),
            job(app.clone()),
            service(app.clone()),
            pdb(json!({"matchLabels": app})),
        ];
        let warnings = overlaps(&children);
        assert_eq!(warnings.len(), 3, "{warnings:#?}");
        assert!(
            warnings[0].starts_with(
                "Deployment \"web\"'s selector selects the pods of Job \"web-migrate\""
            ),
            "{}",
            warnings[0]
        );
        assert!(warnings[1].starts_with("Service \"web\"'s selector selects the pods of Deployment \"web\", Job \"web-migrate\""), "{}", warnings[1]);
        assert!(
            warnings[2].starts_with("PodDisruptionBudget \"web\""),
            "{}",
            warnings[2]
        );
    }

    #[test]
    fn pods_told_apart_by_a_label_are_not_a_warning() {
        let children = [
            deployment(json!({"app": "web", "component": "server"})),
            job(json!({"app": "web", "component": "migration"})),
            service(json!({"app": "web", "component": "server"})),
            pdb(json!({"matchExpressions": [
                {"key": "component", "operator": "In", "values": ["server"]}]})),
        ];
        assert_eq!(overlaps(&children), Vec::<String>::new());
    }

    #[test]
    fn a_service_without_a_selector_selects_no_pods() {
        let children = [
            deployment(json!({"app": "web", "component": "server"})),
            job(json!({"app": "web", "component": "migration"})),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "external"},
                   "spec": {"type": "ExternalName", "externalName": "db.example.com"}}),
        ];
        assert_eq!(overlaps(&children), Vec::<String>::new());
    }
}
