//! The host's labels and reserved names, and label selectors as kubectl writes them
//! (`app=web,tier in (a,b),!canary`), parsed into kube's [`Selector`], which matches labels and
//! prints the canonical form the API server takes.

use std::collections::BTreeSet;

use kube::core::{Expression, Selector};

/// The field manager of every write the host makes.
pub const FIELD_MANAGER: &str = "operator-host";
/// Label every managed child carries: who manages it.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "operator-host";
/// Label naming the plugin that produced a child.
pub const PLUGIN_LABEL: &str = "operator-host.dev/plugin";
/// Label with the UID of the parent that owns a child.
pub const PARENT_UID_LABEL: &str = "operator-host.dev/parent-uid";
/// Prefix reserved for the host's labels and annotations: a plugin may not set them on a
/// child, nor on its CRD (the host marks the CRDs it installs with
/// `operator-host.dev/installed-for`, and a plugin must not pre-mark one).
pub const RESERVED_PREFIX: &str = "operator-host.dev/";
/// Annotation the host puts on a child whose delete policy is `orphan`: a child that is no
/// longer returned has no options left, so its own metadata says what to do with it.
pub const ON_PRUNE_ANNOTATION: &str = "operator-host.dev/on-prune";
/// The annotation of an OperatorPlugin that approves a held version: its content's sha256
/// (`inspect` prints it) or its artifact's manifest digest (`status.digest`).
pub const APPROVE_ANNOTATION: &str = "operator-host.dev/approve-rollout";

/// Label selector of the children this host manages for `plugin`.
pub fn managed_children_selector(plugin: &str) -> String {
    format!("{MANAGED_BY_LABEL}={MANAGED_BY},{PLUGIN_LABEL}={plugin}")
}

/// The labels of an object as JSON (values that are not strings left out), as a selector
/// matches them.
pub fn of_object(object: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    object["metadata"]["labels"]
        .as_object()
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Parses the label selector syntax of the Kubernetes API (`k8s.io/apimachinery/pkg/labels`):
/// requirements separated by commas, each `key`, `!key`, `key=value`, `key==value`,
/// `key!=value`, `key in (v1,v2)` or `key notin (v1,v2)`. The numeric `>`/`<` of that syntax
/// are refused. An empty selector is refused too: a related declaration selects something.
pub fn parse(text: &str) -> Result<Selector, String> {
    let invalid = |why: &str| format!("the label selector {text:?} is invalid: {why}");
    let mut expressions = Vec::new();
    for requirement in split_requirements(text).map_err(|e| invalid(&e))? {
        let requirement = requirement.trim();
        if requirement.is_empty() {
            return Err(invalid("a requirement is empty"));
        }
        expressions.push(parse_requirement(requirement).map_err(|e| invalid(&e))?);
    }
    Ok(Selector::from_iter(expressions))
}

/// Splits at the commas that are not inside `( )`.
fn split_requirements(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (index, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1).ok_or("a ')' has no '('")?,
            ',' if depth == 0 => {
                parts.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("a '(' is not closed".into());
    }
    parts.push(&text[start..]);
    Ok(parts)
}

fn parse_requirement(requirement: &str) -> Result<Expression, String> {
    if let Some(key) = requirement.strip_prefix('!') {
        return Ok(Expression::DoesNotExist(key_of(key.trim())?));
    }
    for (operator, build) in [
        (
            "!=",
            Expression::NotEqual as fn(String, String) -> Expression,
        ),
        ("==", Expression::Equal),
        ("=", Expression::Equal),
    ] {
        if let Some((key, value)) = requirement.split_once(operator) {
            return Ok(build(key_of(key.trim())?, value_of(value.trim())?));
        }
    }
    if requirement.contains(['<', '>']) {
        return Err(format!(
            "{requirement:?}: the numeric operators < and > are not supported"
        ));
    }
    let words: Vec<&str> = requirement.splitn(2, char::is_whitespace).collect();
    match words.as_slice() {
        [key] => Ok(Expression::Exists(key_of(key)?)),
        [key, rest] => {
            let rest = rest.trim_start();
            let (set_of, values) = if let Some(values) = rest.strip_prefix("notin") {
                (
                    Expression::NotIn as fn(String, BTreeSet<String>) -> Expression,
                    values,
                )
            } else if let Some(values) = rest.strip_prefix("in") {
                (
                    Expression::In as fn(String, BTreeSet<String>) -> Expression,
                    values,
                )
            } else {
                return Err(format!("{requirement:?}: expected =, ==, !=, in or notin"));
            };
            let values = values
                .trim()
                .strip_prefix('(')
                .and_then(|v| v.strip_suffix(')'))
                .ok_or_else(|| format!("{requirement:?}: the values must be in ( )"))?;
            let values = values
                .split(',')
                .map(|v| value_of(v.trim()))
                .collect::<Result<BTreeSet<_>, _>>()?;
            Ok(set_of(key_of(key)?, values))
        }
        _ => Err(format!("{requirement:?} is empty")),
    }
}

/// A label key: an optional DNS subdomain prefix and `/`, then a name of at most 63
/// alphanumerics, `-`, `_` and `.`, beginning and ending with an alphanumeric.
fn key_of(key: &str) -> Result<String, String> {
    let name = match key.split_once('/') {
        Some((prefix, name)) => {
            crate::names::check_dns_subdomain(prefix)?;
            name
        }
        None => key,
    };
    if name.is_empty() || !is_label_text(name) {
        return Err(format!("{key:?} is not a label key"));
    }
    Ok(key.to_string())
}

/// A label value: empty, or at most 63 alphanumerics, `-`, `_` and `.` beginning and ending
/// with an alphanumeric.
fn value_of(value: &str) -> Result<String, String> {
    if !value.is_empty() && !is_label_text(value) {
        return Err(format!("{value:?} is not a label value"));
    }
    Ok(value.to_string())
}

fn is_label_text(text: &str) -> bool {
    text.len() <= 63
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && text.starts_with(|c: char| c.is_ascii_alphanumeric())
        && text.ends_with(|c: char| c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kube::core::SelectorExt;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_operator_parses_and_matches_as_the_api_server_does() {
        let selector =
            parse("app=web, tier in (a, b),env!=prod,!canary,example.com/team,track notin (x)")
                .unwrap();
        assert_eq!(
            selector.to_string(),
            "app=web,tier in (a,b),env!=prod,!canary,example.com/team,track notin (x)"
        );
        let matching = labels(&[("app", "web"), ("tier", "b"), ("example.com/team", "t")]);
        assert!(selector.matches(&matching));
        let mut canary = matching.clone();
        canary.insert("canary".into(), "yes".into());
        assert!(!selector.matches(&canary));
        let mut other_tier = matching.clone();
        other_tier.insert("tier".into(), "c".into());
        assert!(!selector.matches(&other_tier));
        assert!(
            parse("app==web")
                .unwrap()
                .matches(&labels(&[("app", "web")]))
        );
    }

    #[test]
    fn a_malformed_selector_is_refused_with_the_reason() {
        for (text, reason) in [
            ("", "a requirement is empty"),
            ("app=web,", "a requirement is empty"),
            ("tier in (a,b", "not closed"),
            ("tier in a,b", "must be in ( )"),
            ("replicas>3", "not supported"),
            ("app=we b", "not a label value"),
            ("-app=web", "not a label key"),
            ("tier within (a)", "expected =, ==, !=, in or notin"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(reason), "{text:?}: {err}");
            assert!(err.contains(&format!("{text:?}")), "{err}");
        }
    }
}
