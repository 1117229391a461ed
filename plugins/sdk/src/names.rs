//! Kubernetes' name rules (apimachinery's `IsDNS1123Label` and `IsDNS1123Subdomain`), for a spec's checks that the CRD schema cannot express.

/// An RFC 1123 label: at most 63 lower-case letters, digits and `-`, starting and ending with
/// a letter or digit (the names of Services, namespaces, and of pods a StatefulSet makes).
pub fn is_dns_label(name: &str) -> bool {
    name.len() <= 63 && is_label_shaped(name)
}

/// An RFC 1123 subdomain: at most 253 characters of labels joined by `.` (the names of most
/// objects: Secrets, ConfigMaps, Deployments). As in Kubernetes, a part is not held to 63.
pub fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty() && name.len() <= 253 && name.split('.').all(is_label_shaped)
}

fn is_label_shaped(part: &str) -> bool {
    !part.is_empty()
        && part
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !part.starts_with('-')
        && !part.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_short_lower_case_and_start_and_end_alphanumeric() {
        for good in ["a", "a-1", "0a", &"a".repeat(63)] {
            assert!(is_dns_label(good), "{good:?}");
        }
        for bad in ["", "-a", "a-", "A", "a.b", "a_b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad:?}");
        }
    }

    #[test]
    fn subdomains_are_labels_joined_by_dots_within_253() {
        for good in ["a", "a.b-c", &format!("{}.b", "a".repeat(70))] {
            assert!(is_dns_subdomain(good), "{good:?}");
        }
        for bad in ["", ".a", "a.", "a..b", "Not_A_Name", &"a".repeat(254)] {
            assert!(!is_dns_subdomain(bad), "{bad:?}");
        }
    }
}
