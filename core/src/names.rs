//! The names Kubernetes accepts (DNS-1123 labels and subdomains), as the API server checks them.

/// A DNS-1123 subdomain: what most kinds require of `metadata.name`.
pub fn check_dns_subdomain(name: &str) -> Result<(), String> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !name.is_empty() && name.len() <= 253 && name.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a valid name (lower-case letters, digits, '-' and '.', at most 253)"
        ))
    }
}

/// A DNS-1123 label: lower-case alphanumerics and `-`, at most 63 characters.
pub fn check_dns_label(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a DNS-1123 label (lower-case letters, digits and '-', at most 63)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels() {
        assert!(check_dns_label("memcached").is_ok());
        assert!(check_dns_label("my-op-2").is_ok());
        assert!(check_dns_label("My").is_err());
        assert!(check_dns_label("-a").is_err());
        assert!(check_dns_label("").is_err());
        assert!(check_dns_label(&"a".repeat(64)).is_err());
    }
}
