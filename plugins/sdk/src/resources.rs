//! Container compute resources (`core/v1` `ResourceRequirements`) the API server accepts, in
//! the form it stores them.
//!
//! A plugin that copies a user's `resources` into a container must check what the API server
//! checks of a container's resources (`ValidateContainerResourceRequirements` in
//! `k8s.io/kubernetes/pkg/apis/core/validation`), or the child's apply fails with a 422 the user
//! only sees as `ApplyFailed`; and it must write the value the way the API server stores it
//! (no empty maps or lists, quantities in canonical form), or the live child never equals what
//! the plugin applies. [`validate_container_resources`] does both.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::Error;

/// Units of a nano (10^-9): the finest precision a Kubernetes quantity keeps.
const NANO: i128 = 1_000_000_000;
/// The largest magnitude accepted, in nanos: 2^63-1 units, what a Kubernetes quantity can hold.
const MAX_NANOS: i128 = i64::MAX as i128 * NANO;
/// Significant digits of a number kept exactly; further digits only round the value up (with
/// a binary suffix and many fractional digits, fewer may be: absurd quantities either way).
const KEPT_DIGITS: usize = 30;

/// Checks `resources`, the compute resources of one container, the way the API server does,
/// and returns them as the API server stores them: empty `claims`, `limits` and `requests`
/// left out, every quantity in canonical form (`1.5` is `1500m`, `1.5Gi` is `1536Mi`).
///
/// `field` is the path of the value under `spec` (e.g. `"resources"`); errors are
/// [`Error::invalid_field`] naming the entry, e.g. `spec.resources.requests["k"]: ...`.
///
/// The rules (those of a container in a pod that declares no resource claims):
/// - a name is `cpu`, `memory`, `ephemeral-storage`, `hugepages-<page size>`, or fully
///   qualified (`example.com/gpu`: a DNS subdomain, `/`, a name of at most 63 letters, digits,
///   `-`, `_`, `.`); names in a `kubernetes.io/` domain are native (no further rules), any
///   other qualified name is an extended resource;
/// - a quantity parses as a Kubernetes quantity, is not negative and at most 2^63-1; an
///   extended resource's is a whole number; a huge page quantity is a multiple of the page size
///   (itself a positive whole number);
/// - a request is at most its limit; for resources that cannot be overcommitted (huge pages
///   and extended resources) a limit must be set and the request must equal it;
/// - huge pages need a `cpu` or `memory` request or limit;
/// - `claims` is empty: they must name the pod's `resourceClaims`, which the plugin's pods
///   do not declare.
pub fn validate_container_resources(
    field: &str,
    resources: &ResourceRequirements,
) -> Result<ResourceRequirements, Error> {
    if let Some(claims) = resources.claims.as_ref().filter(|c| !c.is_empty()) {
        return Err(Error::invalid_field(
            &format!("{field}.claims"),
            format!(
                "must be empty: a claim must name one of the pod's resourceClaims, and the pod declares none (got {:?})",
                claims.iter().map(|c| c.name.as_str()).collect::<Vec<_>>()
            ),
        ));
    }
    let limits = parse_list(&format!("{field}.limits"), resources.limits.as_ref())?;
    let requests = parse_list(&format!("{field}.requests"), resources.requests.as_ref())?;
    for (name, request) in &requests {
        let at = format!("{field}.requests[{name:?}]");
        match limits.get(name) {
            Some(limit) if !overcommit_allowed(name) && request.nanos != limit.nanos => {
                return Err(Error::invalid_field(
                    &at,
                    format!(
                        "must equal the limit of {name} ({}): {name} cannot be overcommitted, got {}",
                        limit.canonical(),
                        request.canonical()
                    ),
                ));
            }
            Some(limit) if request.nanos > limit.nanos => {
                return Err(Error::invalid_field(
                    &at,
                    format!(
                        "must be at most the limit of {name} ({}), got {}",
                        limit.canonical(),
                        request.canonical()
                    ),
                ));
            }
            None if !overcommit_allowed(name) => {
                return Err(Error::invalid_field(
                    &format!("{field}.limits[{name:?}]"),
                    format!(
                        "must be set (to the request, {}): {name} cannot be overcommitted, so a request needs an equal limit",
                        request.canonical()
                    ),
                ));
            }
            _ => {}
        }
    }
    let names = || limits.keys().chain(requests.keys());
    if names().any(|n| is_huge_pages(n)) && !names().any(|n| n == "cpu" || n == "memory") {
        return Err(Error::invalid_field(
            field,
            "huge pages require a cpu or memory request or limit",
        ));
    }
    let canonical = |list: BTreeMap<String, Parsed>| {
        (!list.is_empty()).then(|| {
            list.into_iter()
                .map(|(name, q)| (name, Quantity(q.canonical())))
                .collect()
        })
    };
    Ok(ResourceRequirements {
        claims: None,
        limits: canonical(limits),
        requests: canonical(requests),
    })
}

/// The canonical form of the quantity `quantity` (what the API server stores for it), or why
/// it is not a Kubernetes quantity.
///
/// The grammar: an optional sign, digits with an optional decimal point (`1`, `1.5`, `.5`,
/// `1.`), then a binary suffix (`Ki` `Mi` `Gi` `Ti` `Pi` `Ei`), a decimal one (`n` `u` `m`
/// `k` `M` `G` `T` `P` `E`), an exponent (`e` or `E` and a signed integer) or nothing. Values
/// are kept to the nano, rounded up; magnitudes above 2^63-1 are refused.
pub fn canonical_quantity(quantity: &str) -> Result<String, String> {
    parse_quantity(quantity).map(|q| q.canonical())
}

fn parse_list(
    field: &str,
    list: Option<&BTreeMap<String, Quantity>>,
) -> Result<BTreeMap<String, Parsed>, Error> {
    let mut parsed = BTreeMap::new();
    for (name, quantity) in list.into_iter().flatten() {
        let at = format!("{field}[{name:?}]");
        check_name(name).map_err(|why| Error::invalid_field(&at, why))?;
        let value = parse_quantity(&quantity.0)
            .map_err(|why| Error::invalid_field(&at, format!("{why}, got {:?}", quantity.0)))?;
        check_value(name, &value).map_err(|why| Error::invalid_field(&at, why))?;
        parsed.insert(name.clone(), value);
    }
    Ok(parsed)
}

const STANDARD: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];
const HUGE_PAGES_PREFIX: &str = "hugepages-";

fn is_huge_pages(name: &str) -> bool {
    name.starts_with(HUGE_PAGES_PREFIX)
}

/// A resource in the `kubernetes.io` namespace: unqualified, or with `kubernetes.io/` in it.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// A request may be below its limit: native resources except huge pages.
fn overcommit_allowed(name: &str) -> bool {
    is_native(name) && !is_huge_pages(name)
}

/// A qualified name outside `kubernetes.io` (e.g. `example.com/gpu`), which the API server
/// checks again as the quota name `requests.<name>`.
fn is_extended(name: &str) -> bool {
    !is_native(name)
        && !name.starts_with("requests.")
        && is_qualified_name(&format!("requests.{name}"))
}

fn check_name(name: &str) -> Result<(), String> {
    if !is_qualified_name(name) {
        return Err(format!(
            "{name:?} is not a resource name: an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit"
        ));
    }
    if !name.contains('/') {
        if !(STANDARD.contains(&name) || is_huge_pages(name)) {
            return Err(format!(
                "{name:?} must be a standard resource for containers (cpu, memory, ephemeral-storage, hugepages-<size>) or fully qualified (e.g. example.com/gpu)"
            ));
        }
    } else if !is_native(name) && !is_extended(name) {
        return Err(format!(
            "{name:?} does not follow the extended resource name standard (a domain of at most 244 characters, not starting with \"requests.\", '/', a name)"
        ));
    }
    Ok(())
}

fn check_value(name: &str, value: &Parsed) -> Result<(), String> {
    if value.nanos < 0 {
        return Err(format!(
            "must be greater than or equal to 0, got {}",
            value.canonical()
        ));
    }
    if is_extended(name) && value.nanos % NANO != 0 {
        return Err(format!(
            "{name} is counted in whole units, got {}",
            value.canonical()
        ));
    }
    if let Some(size) = name.strip_prefix(HUGE_PAGES_PREFIX) {
        let page = parse_quantity(size)
            .ok()
            .filter(|p| p.nanos > 0 && p.nanos % NANO == 0)
            .ok_or_else(|| {
                format!(
                    "{name:?}: the page size {size:?} must be a positive whole quantity such as 2Mi"
                )
            })?;
        // The API server compares whole units, the quantity's rounded up.
        if (value.nanos + NANO - 1) / NANO % (page.nanos / NANO) != 0 {
            return Err(format!(
                "must be a whole multiple of the page size {}, got {}",
                page.canonical(),
                value.canonical()
            ));
        }
    }
    Ok(())
}

/// `IsQualifiedName`: `[prefix/]name`, the prefix a DNS-1123 subdomain, the name at most 63
/// of `[A-Za-z0-9_.-]`, alphanumeric at both ends.
fn is_qualified_name(value: &str) -> bool {
    let (prefix, name) = match value.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    let bytes = name.as_bytes();
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    name_ok && prefix.is_none_or(crate::is_dns_subdomain)
}

/// How a quantity is written, which its canonical form keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// `Ki` ... `Ei`.
    BinarySi,
    /// `n` ... `E`, or no suffix.
    DecimalSi,
    /// `e<n>`/`E<n>`.
    DecimalExponent,
}

/// A parsed quantity: its value in nanos (exact, rounded up to the nano) and its format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Parsed {
    nanos: i128,
    format: Format,
}

const NOT_A_QUANTITY: &str = "must be a quantity: a number with an optional suffix (Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E) or exponent (e3), such as 500m, 2 or 1.5Gi";

fn parse_quantity(text: &str) -> Result<Parsed, String> {
    let bad = || NOT_A_QUANTITY.to_string();
    let bytes = text.as_bytes();
    let mut i = 0;
    let negative = match bytes.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    // The number: digits, an optional point and digits, at least one digit in all.
    let mut mantissa: i128 = 0;
    let mut significant = 0usize;
    let mut scale: i64 = 0; // value = mantissa * 10^scale
    let mut sticky = false; // a non-zero digit beyond KEPT_DIGITS was dropped
    let mut digits = 0usize;
    let mut point = false;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'0'..=b'9' => {
                digits += 1;
                let d = i128::from(b - b'0');
                if significant < KEPT_DIGITS {
                    mantissa = mantissa * 10 + d;
                    if mantissa != 0 {
                        significant += 1;
                    }
                    if point {
                        scale -= 1;
                    }
                } else {
                    sticky |= d != 0;
                    if !point {
                        scale += 1;
                    }
                }
            }
            b'.' if !point => point = true,
            _ => break,
        }
        i += 1;
    }
    if digits == 0 {
        return Err(bad());
    }
    let suffix = &text[i..];
    let (format, binary, exponent): (Format, u32, i64) = match suffix {
        "Ki" => (Format::BinarySi, 10, 0),
        "Mi" => (Format::BinarySi, 20, 0),
        "Gi" => (Format::BinarySi, 30, 0),
        "Ti" => (Format::BinarySi, 40, 0),
        "Pi" => (Format::BinarySi, 50, 0),
        "Ei" => (Format::BinarySi, 60, 0),
        "n" => (Format::DecimalSi, 0, -9),
        "u" => (Format::DecimalSi, 0, -6),
        "m" => (Format::DecimalSi, 0, -3),
        "" => (Format::DecimalSi, 0, 0),
        "k" => (Format::DecimalSi, 0, 3),
        "M" => (Format::DecimalSi, 0, 6),
        "G" => (Format::DecimalSi, 0, 9),
        "T" => (Format::DecimalSi, 0, 12),
        "P" => (Format::DecimalSi, 0, 15),
        "E" => (Format::DecimalSi, 0, 18),
        _ => {
            let rest = suffix.strip_prefix(['e', 'E']).ok_or_else(bad)?;
            let (sign, number) = match rest.as_bytes().first() {
                Some(b'-') => (-1, &rest[1..]),
                Some(b'+') => (1, &rest[1..]),
                _ => (1, rest),
            };
            if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            // Any exponent beyond ±1000 is out of range either way; only zeros (`1e0`) is 0.
            let digits = number.trim_start_matches('0');
            let magnitude = match digits {
                "" => 0,
                _ => digits.parse::<i64>().unwrap_or(i64::MAX).min(1000),
            };
            (Format::DecimalExponent, 0, sign * magnitude.max(0))
        }
    };
    let too_large = || "must be at most 2^63-1 (9223372036854775807)".to_string();
    // nanos = mantissa * 2^binary * 10^(scale + exponent + 9), rounded up.
    let mut shift = scale + exponent + 9;
    let mut value = mantissa;
    if binary > 0 {
        let factor = 1i128 << binary;
        // Make room by dropping digits that the division below would drop anyway.
        while value.checked_mul(factor).is_none() && shift < 0 {
            sticky |= value % 10 != 0;
            value /= 10;
            shift += 1;
        }
        value = value.checked_mul(factor).ok_or_else(too_large)?;
    }
    if shift >= 0 {
        if value != 0 {
            let factor = u32::try_from(shift)
                .ok()
                .and_then(|s| 10i128.checked_pow(s))
                .ok_or_else(too_large)?;
            value = value.checked_mul(factor).ok_or_else(too_large)?;
        }
    } else {
        match u32::try_from(-shift)
            .ok()
            .and_then(|s| 10i128.checked_pow(s))
        {
            Some(divisor) => {
                sticky |= value % divisor != 0;
                value /= divisor;
            }
            None => {
                sticky |= value != 0;
                value = 0;
            }
        }
    }
    if sticky {
        value += 1;
    }
    if value > MAX_NANOS {
        return Err(too_large());
    }
    Ok(Parsed {
        nanos: if negative { -value } else { value },
        format,
    })
}

impl Parsed {
    /// The API server's canonical form: no precision lost, no fractional digits, the largest
    /// suffix of the quantity's format that allows that (a binary quantity below 1024 or with
    /// a fraction is written decimal).
    fn canonical(&self) -> String {
        if self.nanos == 0 {
            return "0".to_string();
        }
        let sign = if self.nanos < 0 { "-" } else { "" };
        let magnitude = self.nanos.unsigned_abs();
        let nano = NANO.unsigned_abs();
        if self.format == Format::BinarySi
            && magnitude >= 1024 * nano
            && magnitude.is_multiple_of(nano)
        {
            let mut units = magnitude / nano;
            let mut power = 0;
            while units.is_multiple_of(1024) && power < 6 {
                units /= 1024;
                power += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
            return format!("{sign}{units}{suffix}");
        }
        // Decimal: strip the factors of 10, then lower the exponent to a multiple of 3.
        let mut mantissa = magnitude;
        let mut exponent: i32 = -9;
        while mantissa.is_multiple_of(10) {
            mantissa /= 10;
            exponent += 1;
        }
        while exponent.rem_euclid(3) != 0 {
            mantissa *= 10;
            exponent -= 1;
        }
        let suffix = match self.format {
            Format::DecimalExponent if exponent == 0 => String::new(),
            Format::DecimalExponent => format!("e{exponent}"),
            // At most 2^63-1 units and at least a nano: -9 <= exponent <= 18.
            _ => ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"][(exponent + 9) as usize / 3]
                .to_string(),
        };
        format!("{sign}{mantissa}{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ResourceClaim;

    fn list(entries: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
        Some(
            entries
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect(),
        )
    }

    fn resources(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> ResourceRequirements {
        ResourceRequirements {
            requests: list(requests),
            limits: list(limits),
            claims: None,
        }
    }

    fn check(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Result<(), String> {
        validate_container_resources("resources", &resources(requests, limits))
            .map(|_| ())
            .map_err(|e| e.message().to_string())
    }

    #[track_caller]
    fn rejected(requests: &[(&str, &str)], limits: &[(&str, &str)], field: &str, why: &str) {
        let message = check(requests, limits).expect_err("accepted");
        assert!(
            message.starts_with(&format!("spec.resources{field}: ")) && message.contains(why),
            "{message:?} does not name {field:?} with {why:?}"
        );
    }

    #[test]
    fn quantities_in_every_form_of_the_grammar_are_canonicalized() {
        for (quantity, canonical) in [
            ("1", "1"),
            ("+1", "1"),
            ("1.", "1"),
            (".5", "500m"),
            ("0.1", "100m"),
            ("1.5", "1500m"),
            ("1000m", "1"),
            ("2000", "2k"),
            ("1024", "1024"),
            ("0.1n", "1n"),
            ("1.0000000001", "1000000001n"),
            ("100u", "100u"),
            ("5M", "5M"),
            ("9E", "9E"),
            ("1.5Gi", "1536Mi"),
            ("2048Ki", "2Mi"),
            ("1000Ki", "1000Ki"),
            ("0.5Ki", "512"),
            ("1Ei", "1Ei"),
            ("0Gi", "0"),
            ("-0", "0"),
            ("-1.5", "-1500m"),
            ("1e3", "1e3"),
            ("1000E-3", "1"),
            ("1500e-3", "1500e-3"),
            ("1e+3", "1e3"),
            ("1e0", "1"),
            ("1e-0", "1"),
            ("2E00", "2"),
            ("1e-1000", "1e-9"),
            ("00012", "12"),
            ("0.000000000000000000000000000000000000000001", "1n"),
        ] {
            assert_eq!(
                canonical_quantity(quantity).as_deref(),
                Ok(canonical),
                "{quantity}"
            );
        }
    }

    #[test]
    fn text_outside_the_grammar_is_not_a_quantity() {
        for quantity in [
            "",
            "not-a-quantity",
            ".",
            "-",
            "1.2.3",
            "1e",
            "1e+",
            "1e1.5",
            "1Ki3",
            "1i",
            "1 ",
            " 1",
            "--1",
            "1KI",
            "1K",
            "0x10",
            "1mi",
        ] {
            let why = canonical_quantity(quantity).expect_err(quantity);
            assert!(why.contains("must be a quantity"), "{quantity}: {why}");
        }
        for quantity in ["10E", "9223372036854775808", "8Ei", "1e19", "1e1000"] {
            let why = canonical_quantity(quantity).expect_err(quantity);
            assert!(why.contains("at most 2^63-1"), "{quantity}: {why}");
        }
        assert_eq!(
            canonical_quantity("9223372036854775807").as_deref(),
            Ok("9223372036854775807")
        );
    }

    #[test]
    fn names_are_standard_or_fully_qualified() {
        for name in [
            "cpu",
            "memory",
            "ephemeral-storage",
            "example.com/gpu",
            "kubernetes.io/x",
        ] {
            assert_eq!(check(&[], &[(name, "1")]), Ok(()), "{name}");
        }
        assert_eq!(
            check(&[], &[("hugepages-2Mi", "2Mi"), ("memory", "1Gi")]),
            Ok(())
        );
        for name in ["k", "pods", "requests.cpu", "gpu"] {
            let field = format!(".limits[{name:?}]");
            rejected(
                &[],
                &[(name, "1")],
                &field,
                "must be a standard resource for containers",
            );
        }
        for name in [
            "bad key",
            "-k-",
            "k-",
            "example.com/",
            "Example.com/gpu",
            "a/b/c",
            "/gpu",
        ] {
            rejected(
                &[(name, "1")],
                &[],
                &format!(".requests[{name:?}]"),
                "not a resource name",
            );
        }
        let long = format!("{}com/gpu", "a.".repeat(121));
        assert!(is_qualified_name(&long) && long.len() > 244 + 4);
        for name in ["requests.example.com/gpu", long.as_str()] {
            let field = format!(".limits[{name:?}]");
            rejected(
                &[],
                &[(name, "1")],
                &field,
                "extended resource name standard",
            );
        }
    }

    #[test]
    fn quantities_must_parse_and_not_be_negative() {
        rejected(
            &[],
            &[("k", "not-a-quantity")],
            r#".limits["k"]"#,
            "standard resource",
        );
        rejected(
            &[],
            &[("cpu", "not-a-quantity")],
            r#".limits["cpu"]"#,
            "must be a quantity",
        );
        rejected(
            &[("memory", "-1")],
            &[],
            r#".requests["memory"]"#,
            "greater than or equal to 0",
        );
        rejected(
            &[("memory", "10E")],
            &[],
            r#".requests["memory"]"#,
            "at most 2^63-1",
        );
    }

    #[test]
    fn extended_resources_are_whole_and_need_an_equal_limit() {
        let gpu = "example.com/gpu";
        rejected(
            &[],
            &[(gpu, "500m")],
            r#".limits["example.com/gpu"]"#,
            "whole units",
        );
        rejected(
            &[(gpu, "1")],
            &[],
            r#".limits["example.com/gpu"]"#,
            "must be set",
        );
        rejected(
            &[(gpu, "1")],
            &[(gpu, "2")],
            r#".requests["example.com/gpu"]"#,
            "must equal",
        );
        assert_eq!(check(&[(gpu, "2")], &[(gpu, "2")]), Ok(()));
        assert_eq!(check(&[(gpu, "1k")], &[(gpu, "1000")]), Ok(()));
        // Native resources may be overcommitted, with or without a limit.
        assert_eq!(check(&[("cpu", "1")], &[("cpu", "2")]), Ok(()));
        assert_eq!(
            check(&[("cpu", "1"), ("kubernetes.io/x", "1")], &[]),
            Ok(())
        );
    }

    #[test]
    fn a_request_is_at_most_its_limit() {
        rejected(
            &[("cpu", "2")],
            &[("cpu", "1")],
            r#".requests["cpu"]"#,
            "at most the limit",
        );
        rejected(
            &[("cpu", "1001m")],
            &[("cpu", "1")],
            r#".requests["cpu"]"#,
            "(1), got 1001m",
        );
        assert_eq!(check(&[("cpu", "1000m")], &[("cpu", "1")]), Ok(()));
        assert_eq!(
            check(&[("memory", "1Gi")], &[("memory", "1073741824")]),
            Ok(())
        );
    }

    #[test]
    fn huge_pages_are_whole_pages_with_an_equal_limit_and_cpu_or_memory() {
        let memory = ("memory", "1Gi");
        rejected(
            &[],
            &[("hugepages-x", "1")],
            r#".limits["hugepages-x"]"#,
            "page size",
        );
        rejected(
            &[],
            &[("hugepages-0", "1")],
            r#".limits["hugepages-0"]"#,
            "page size",
        );
        rejected(
            &[],
            &[("hugepages-1.5", "3")],
            r#".limits["hugepages-1.5"]"#,
            "page size",
        );
        let field = r#".limits["hugepages-2Mi"]"#;
        rejected(
            &[],
            &[("hugepages-2Mi", "3Mi"), memory],
            field,
            "multiple of the page size 2Mi",
        );
        let huge = ("hugepages-2Mi", "4Mi");
        rejected(&[huge], &[memory], field, "must be set");
        rejected(
            &[("hugepages-2Mi", "2Mi")],
            &[huge, memory],
            r#".requests["hugepages-2Mi"]"#,
            "must equal",
        );
        rejected(&[huge], &[huge], "", "huge pages require a cpu or memory");
        assert_eq!(check(&[huge, ("cpu", "1")], &[huge]), Ok(()));
        assert_eq!(check(&[huge], &[huge, memory]), Ok(()));
    }

    #[test]
    fn claims_are_refused_the_pod_declares_none() {
        let claims = ResourceRequirements {
            claims: Some(vec![ResourceClaim {
                name: "gpu".into(),
                request: None,
            }]),
            ..ResourceRequirements::default()
        };
        let message = validate_container_resources("resources", &claims).unwrap_err();
        assert!(
            message
                .message()
                .starts_with("spec.resources.claims: must be empty")
        );
    }

    #[test]
    fn the_value_is_what_the_api_server_stores() {
        let empty = ResourceRequirements {
            claims: Some(vec![]),
            limits: Some(BTreeMap::new()),
            requests: Some(BTreeMap::new()),
        };
        assert_eq!(
            validate_container_resources("resources", &empty),
            Ok(ResourceRequirements::default())
        );
        let given = resources(&[("cpu", "0.5"), ("memory", "1.5Gi")], &[("cpu", "1000m")]);
        assert_eq!(
            validate_container_resources("resources", &given),
            Ok(resources(
                &[("cpu", "500m"), ("memory", "1536Mi")],
                &[("cpu", "1")]
            ))
        );
        // The field path is the caller's.
        let message = validate_container_resources("x.res", &resources(&[("k", "1")], &[]));
        assert!(
            message
                .unwrap_err()
                .message()
                .starts_with(r#"spec.x.res.requests["k"]: "#)
        );
    }
}
