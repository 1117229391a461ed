//! Related objects (contract 0.2.0): which objects of a declared kind a parent refers to, and
//! what of them reaches the plugin.
//!
//! `run` and `render` both choose and present related objects through [`objects_for`], from
//! the host's caches or from the documents of `render`'s input; the controller maps a changed
//! object back to the parents that refer to it with the same [`refers_to`].
//!
//! # Guarantees
//! - Only objects in the parent's namespace are related to it.
//! - A Secret under `data-hash` reaches the plugin with each `data` value replaced by the hex
//!   SHA-256 of its bytes (base64-encoded like every `data` value, so a typed client decodes
//!   it to the hex digest), with `stringData` folded into `data` first (as the API server
//!   stores it; `render` may be handed a document that has it), and without the annotation
//!   in which `kubectl apply` keeps the last applied object (the data in clear).

use base64::Engine;
use kube::core::SelectorExt;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::contract::{RelatedObjects, RelatedSelector, SecretView};
use crate::declaration::Related;

/// The annotation in which `kubectl apply` keeps the object it last applied.
const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Puts a sample object without a namespace in `default`, where `kubectl apply` would: how
/// `render`, `conformance` and the authors' testing crate read a parent or a cluster object
/// given without one.
pub fn default_namespace(object: &mut Value) {
    if object["metadata"]["namespace"].as_str().is_none() && object["metadata"].is_object() {
        object["metadata"]["namespace"] = "default".into();
    }
}

/// The related objects of every declaration in `related` for `parent`, the `i`th chosen from
/// `candidates(i)` (objects that may be of its kind), as the plugin sees them.
pub fn objects_for(
    related: &[Related],
    parent: &Value,
    mut candidates: impl FnMut(usize) -> Vec<Value>,
) -> Vec<RelatedObjects> {
    related
        .iter()
        .enumerate()
        .map(|(index, declaration)| {
            let mut chosen: Vec<Value> = candidates(index)
                .iter()
                .filter(|object| declaration.kind.matches(object))
                .filter(|object| refers_to(declaration, parent, object))
                .map(|object| view(declaration, object))
                .collect();
            // The caches' order is not the API server's: the request must not depend on it.
            chosen.sort_by(|a, b| {
                a["metadata"]["name"]
                    .as_str()
                    .cmp(&b["metadata"]["name"].as_str())
            });
            RelatedObjects {
                name: declaration.name.clone(),
                objects: chosen.iter().map(Value::to_string).collect(),
            }
        })
        .collect()
}

/// Whether `parent` refers to `object` through `related`: the same namespace, and the name
/// at the declared path of the parent, or labels the declared selector matches.
pub fn refers_to(related: &Related, parent: &Value, object: &Value) -> bool {
    let namespace = |o: &Value| {
        o["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string()
    };
    if namespace(parent) != namespace(object) {
        return false;
    }
    match &related.selector {
        RelatedSelector::NameFromPath(path) => {
            let named = path
                .split('.')
                .try_fold(parent, |value, key| value.get(key))
                .and_then(Value::as_str);
            named.is_some_and(|name| !name.is_empty())
                && named == object["metadata"]["name"].as_str()
        }
        RelatedSelector::LabelSelector(text) => {
            let Ok(selector) = crate::labels::parse(text) else {
                return false; // refused at load; nothing is related to a selector that fails
            };
            selector.matches(&crate::labels::of_object(object))
        }
    }
}

/// `object` as the plugin sees it: without `managedFields`, and a Secret under `data-hash`
/// with each value hashed.
pub fn view(related: &Related, object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object["metadata"].as_object_mut() {
        metadata.remove("managedFields");
    }
    if related.is_secret() {
        fold_string_data(&mut object);
    }
    if !related.is_secret() || related.secret_view == SecretView::Full {
        return object;
    }
    hash_secret_data(&mut object);
    object
}

/// A Secret as the `data-hash` view shows it: each `data` value replaced by the hex SHA-256
/// of its bytes (base64-encoded), without the annotation that keeps the data in clear. Also
/// how a flight recording keeps Secrets a plugin saw whole.
pub fn hash_secret_data(object: &mut Value) {
    if let Some(annotations) = object["metadata"]["annotations"].as_object_mut() {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
    if let Some(fields) = object.as_object_mut()
        && let Some(Value::Object(data)) = fields.get("data")
    {
        let hashed: Map<String, Value> = data
            .iter()
            .map(|(key, encoded)| {
                let text = encoded.as_str().unwrap_or_default();
                let base64 = base64::engine::general_purpose::STANDARD;
                // What the API server stores is base64; hash the bytes it stands for.
                let bytes = base64
                    .decode(text)
                    .unwrap_or_else(|_| text.as_bytes().to_vec());
                let digest = hex::encode(Sha256::digest(&bytes));
                (key.clone(), base64.encode(digest).into())
            })
            .collect();
        fields.insert("data".into(), Value::Object(hashed));
    }
}

/// A Secret's `stringData` folded into `data`, as the API server does when it stores one:
/// stored Secrets never carry `stringData`, but a document given to `render` may.
fn fold_string_data(secret: &mut Value) {
    let Some(fields) = secret.as_object_mut() else {
        return;
    };
    let Some(Value::Object(string_data)) = fields.remove("stringData") else {
        return;
    };
    let data = fields
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(data) = data {
        let base64 = base64::engine::general_purpose::STANDARD;
        for (key, value) in string_data {
            data.insert(
                key,
                base64.encode(value.as_str().unwrap_or_default()).into(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kinds::Kind;

    fn secret_kind() -> Kind {
        Kind {
            group: String::new(),
            version: "v1".into(),
            kind: "Secret".into(),
            plural: "secrets".into(),
            namespaced: true,
        }
    }

    fn declaration(selector: RelatedSelector, view: SecretView) -> Related {
        Related {
            name: "tls".into(),
            kind: secret_kind(),
            selector,
            secret_view: view,
        }
    }

    fn parent(secret_name: &str) -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns"},
               "spec": {"tls": {"secretName": secret_name}}})
    }

    fn secret(name: &str, namespace: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": name, "namespace": namespace, "labels": labels,
                            "managedFields": [{"manager": "kubectl"}],
                            "annotations": {LAST_APPLIED_ANNOTATION: "{\"data\":{\"key\":\"c2VjcmV0\"}}",
                                            "note": "kept"}},
               "data": {"key": "c2VjcmV0"}})
    }

    #[test]
    fn a_name_at_the_path_relates_only_that_object_of_the_parents_namespace() {
        let by_name = declaration(
            RelatedSelector::NameFromPath("spec.tls.secretName".into()),
            SecretView::Full,
        );
        let candidates = vec![
            secret("a", "ns", json!({})),
            secret("b", "ns", json!({})),
            secret("a", "other", json!({})),
        ];
        let related = objects_for(std::slice::from_ref(&by_name), &parent("a"), |_| {
            candidates.clone()
        });
        assert_eq!(related[0].name, "tls");
        assert_eq!(related[0].objects.len(), 1);
        let object: Value = serde_json::from_str(&related[0].objects[0]).unwrap();
        assert_eq!(object["metadata"]["namespace"], "ns");
        assert_eq!(object["data"]["key"], "c2VjcmV0", "full: as stored");
        assert!(object["metadata"].get("managedFields").is_none());
        // No name at the path, or an empty one: nothing is related.
        let none = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {}});
        assert!(!refers_to(&by_name, &none, &candidates[0]));
        assert!(!refers_to(&by_name, &parent(""), &candidates[0]));
    }

    #[test]
    fn a_selector_relates_every_matching_object_sorted_by_name() {
        let by_labels = declaration(
            RelatedSelector::LabelSelector("app=web".into()),
            SecretView::Full,
        );
        let candidates = vec![
            secret("z", "ns", json!({"app": "web"})),
            secret("m", "ns", json!({"app": "db"})),
            secret("a", "ns", json!({"app": "web"})),
        ];
        let related = objects_for(std::slice::from_ref(&by_labels), &parent("x"), |_| {
            candidates.clone()
        });
        let names: Vec<String> = related[0]
            .objects
            .iter()
            .map(|o| serde_json::from_str::<Value>(o).unwrap()["metadata"]["name"].to_string())
            .collect();
        assert_eq!(names, ["\"a\"", "\"z\""]);
    }

    #[test]
    fn a_hashed_secret_never_carries_its_data_in_clear() {
        let hashed = declaration(
            RelatedSelector::NameFromPath("spec.tls.secretName".into()),
            SecretView::DataHash,
        );
        let mut stored = secret("a", "ns", json!({}));
        stored["stringData"] = json!({"other": "secret"});
        let seen = view(&hashed, &stored);
        let text = seen.to_string();
        assert!(
            !text.contains("c2VjcmV0") && !text.contains("secret\""),
            "{text}"
        );
        let digest = base64::engine::general_purpose::STANDARD
            .decode(seen["data"]["key"].as_str().unwrap())
            .unwrap();
        assert_eq!(
            String::from_utf8(digest).unwrap(),
            hex::encode(Sha256::digest(b"secret")),
            "the hex SHA-256 of the decoded bytes, base64-encoded"
        );
        assert!(seen.get("stringData").is_none());
        // stringData counts as data (the API server folds it in; `render` may be handed it).
        assert_eq!(seen["data"]["other"], seen["data"]["key"]);
        assert_eq!(seen["metadata"]["annotations"], json!({"note": "kept"}));
    }
}
