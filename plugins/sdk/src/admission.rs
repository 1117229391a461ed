//! What a plugin answers at admission: field errors and warnings (`validate`), in the API
//! server's own terms, so `kubectl apply` shows them as it shows the API server's.

use std::fmt;

use serde::Serialize;

use crate::Error;

/// Why a field is refused; each prints as the API server prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorType {
    /// `Required value`
    Required,
    /// `Invalid value: <value>`
    Invalid,
    /// `Forbidden`
    Forbidden,
    /// `Unsupported value: <value>`
    NotSupported,
    /// `Duplicate value: <value>`
    Duplicate,
    /// `Too long`
    TooLong,
    /// `Too many`
    TooMany,
    /// `Not found`
    NotFound,
}

impl FieldErrorType {
    fn describe(self) -> &'static str {
        match self {
            FieldErrorType::Required => "Required value",
            FieldErrorType::Invalid => "Invalid value",
            FieldErrorType::Forbidden => "Forbidden",
            FieldErrorType::NotSupported => "Unsupported value",
            FieldErrorType::Duplicate => "Duplicate value",
            FieldErrorType::TooLong => "Too long",
            FieldErrorType::TooMany => "Too many",
            FieldErrorType::NotFound => "Not found",
        }
    }

    fn shows_value(self) -> bool {
        matches!(
            self,
            FieldErrorType::Invalid | FieldErrorType::NotSupported | FieldErrorType::Duplicate
        )
    }
}

/// One refused field.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub reason: FieldErrorType,
    /// The field's path from the top of the object: `spec.size`, `spec.tls.secretName`.
    pub field: String,
    /// The refused value.
    pub value: Option<serde_json::Value>,
    /// What was expected.
    pub detail: String,
}

/// `spec.size: Invalid value: 0: must be between 1 and 10`, as the API server prints it.
impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason.describe())?;
        if let Some(value) = self.value.as_ref().filter(|_| self.reason.shows_value()) {
            write!(f, ": {value}")?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// The answer of [`crate::Reconciler::validate`]: the request is refused when it holds an
/// error; warnings are shown either way.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Validation {
    errors: Vec<FieldError>,
    warnings: Vec<String>,
}

impl Validation {
    /// A validation with nothing refused.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a field error.
    pub fn error(&mut self, error: FieldError) -> &mut Self {
        self.errors.push(error);
        self
    }

    fn push(
        &mut self,
        reason: FieldErrorType,
        field: &str,
        value: Option<serde_json::Value>,
        detail: impl fmt::Display,
    ) -> &mut Self {
        self.error(FieldError {
            reason,
            field: field.to_string(),
            value,
            detail: detail.to_string(),
        })
    }

    /// `field: Invalid value: <value>: <detail>`.
    pub fn invalid(
        &mut self,
        field: &str,
        value: impl Serialize,
        detail: impl fmt::Display,
    ) -> &mut Self {
        self.push(
            FieldErrorType::Invalid,
            field,
            serde_json::to_value(value).ok(),
            detail,
        )
    }

    /// `field: Required value: <detail>`.
    pub fn required(&mut self, field: &str, detail: impl fmt::Display) -> &mut Self {
        self.push(FieldErrorType::Required, field, None, detail)
    }

    /// `field: Forbidden: <detail>`.
    pub fn forbidden(&mut self, field: &str, detail: impl fmt::Display) -> &mut Self {
        self.push(FieldErrorType::Forbidden, field, None, detail)
    }

    /// `field: Unsupported value: <value>: supported values: "a", "b"`.
    pub fn not_supported(
        &mut self,
        field: &str,
        value: impl Serialize,
        supported: &[&str],
    ) -> &mut Self {
        let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        self.push(
            FieldErrorType::NotSupported,
            field,
            serde_json::to_value(value).ok(),
            format!("supported values: {}", supported.join(", ")),
        )
    }

    /// `field: Invalid value: <value>: field is immutable`, the API server's words for a
    /// field an update may not change.
    pub fn immutable(&mut self, field: &str, value: impl Serialize) -> &mut Self {
        self.invalid(field, value, "field is immutable")
    }

    /// Adds the field error an [`Error::InvalidSpec`] of the form `path: detail` names (what
    /// [`Error::invalid_field`] and [`Error::invalid_at`] make), so that the checks a
    /// `reconcile` makes can refuse the same spec at admission. Other errors are ignored.
    pub fn check(&mut self, result: Result<impl Sized, Error>) -> &mut Self {
        if let Err(Error::InvalidSpec(message)) = result {
            let (field, detail) = message
                .split_once(": ")
                .unwrap_or(("spec", message.as_str()));
            self.push(FieldErrorType::Invalid, field, None, detail);
        }
        self
    }

    /// Adds a warning, shown by kubectl as `Warning: <message>`.
    pub fn warn(&mut self, message: impl fmt::Display) -> &mut Self {
        self.warnings.push(message.to_string());
        self
    }

    /// Whether nothing is refused.
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    pub fn errors(&self) -> &[FieldError] {
        &self.errors
    }

    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The errors as one invalid-spec error (`spec.a: ..., spec.b: ...`), for a `reconcile`
    /// that checks what `validate` checks; `Ok` when nothing is refused.
    pub fn into_result(self) -> Result<(), Error> {
        if self.errors.is_empty() {
            return Ok(());
        }
        let errors: Vec<String> = self.errors.iter().map(ToString::to_string).collect();
        Err(Error::InvalidSpec(errors.join(", ")))
    }
}

/// The RFC 7386 merge patch that turns `before` into `after` (`null` removes a key).
pub(crate) fn merge_diff(
    before: &serde_json::Value,
    after: &serde_json::Value,
) -> Option<serde_json::Value> {
    use serde_json::Value;
    match (before, after) {
        (Value::Object(before), Value::Object(after)) => {
            let mut patch = serde_json::Map::new();
            for (key, new) in after {
                match before.get(key) {
                    Some(old) => {
                        if let Some(change) = merge_diff(old, new) {
                            patch.insert(key.clone(), change);
                        }
                    }
                    None => {
                        patch.insert(key.clone(), new.clone());
                    }
                }
            }
            for key in before.keys().filter(|key| !after.contains_key(*key)) {
                patch.insert(key.clone(), Value::Null);
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        _ if before == after => None,
        _ => Some(after.clone()),
    }
}

/// Applies an RFC 7386 merge patch to `target`.
pub(crate) fn merge_apply(target: &mut serde_json::Value, patch: &serde_json::Value) {
    use serde_json::Value;
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge_apply(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_errors_print_as_the_api_server_prints_them() {
        let mut validation = Validation::new();
        validation
            .invalid("spec.size", 0, "must be between 1 and 10")
            .required("spec.image", "a container image")
            .immutable("spec.storage", "2Gi")
            .not_supported("spec.mode", "x", &["a", "b"]);
        let printed: Vec<String> = validation
            .errors()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            printed,
            [
                "spec.size: Invalid value: 0: must be between 1 and 10",
                "spec.image: Required value: a container image",
                "spec.storage: Invalid value: \"2Gi\": field is immutable",
                "spec.mode: Unsupported value: \"x\": supported values: \"a\", \"b\"",
            ]
        );
    }

    #[test]
    fn check_turns_a_reconcile_error_into_a_field_error() {
        let mut validation = Validation::new();
        validation.check(Err::<(), _>(Error::invalid_field(
            "size",
            "must be at most 100",
        )));
        validation.check(Err::<(), _>(Error::Retry("not a spec problem".into())));
        assert_eq!(validation.errors().len(), 1);
        assert_eq!(validation.errors()[0].field, "spec.size");
        assert_eq!(validation.errors()[0].detail, "must be at most 100");
    }

    #[test]
    fn a_merge_diff_applied_gives_the_after_object() {
        let before = json!({"spec": {"a": 1, "b": {"c": 2}, "gone": true}, "status": {}});
        let after = json!({"spec": {"a": 1, "b": {"c": 3, "d": [1]}}, "status": {}});
        let patch = merge_diff(&before, &after).unwrap();
        assert_eq!(
            patch,
            json!({"spec": {"b": {"c": 3, "d": [1]}, "gone": null}})
        );
        let mut target = before.clone();
        merge_apply(&mut target, &patch);
        assert_eq!(target, after);
        assert_eq!(merge_diff(&after, &after), None);
    }
}
