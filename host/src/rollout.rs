//! The rollout gate: a new plugin version is planned on every parent the host caches, beside
//! the serving one, before it serves; a version whose plans would delete too much is held.
//!
//! The plans are [`diff`](crate::diff)'s, made from the controller's caches instead of lists
//! of the API server: what `operator-host diff` prints is what the gate decides on. A held
//! version serves nothing (no parent's children or status are written by it) until someone
//! approves that content; the approval also lets its deletions past the prune guard, which
//! would otherwise hold them one reconcile later.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::diff::Report;
use crate::policy::{Effective, PluginMode, RolloutStrategy};

/// Kinds whose deletion stops a workload: any of them held by `holdWorkloadDeletes`.
const WORKLOAD_KINDS: [(&str, &str); 7] = [
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("apps", "ReplicaSet"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("", "Pod"),
];

/// Why a new version is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// Children its plans would delete, of the plugin's `children`.
    pub deleted: usize,
    pub children: usize,
    /// Of them, by kind.
    pub by_kind: BTreeMap<String, usize>,
    /// Parents whose children would be deleted.
    pub parents: usize,
    /// Which rule holds it.
    pub rule: String,
}

impl std::fmt::Display for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<String> = self
            .by_kind
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        write!(
            f,
            "its plans would delete {} of the plugin's {} children ({}) on {} parents: {}",
            self.deleted,
            self.children,
            kinds.join(", "),
            self.parents,
            self.rule
        )
    }
}

/// Whether the gate plans a new version served under `rules` at all: not with `Immediate`,
/// nor in observe mode (which writes nothing, so there is nothing to hold).
pub fn gates(rules: &Effective) -> bool {
    rules.rollout_strategy != RolloutStrategy::Immediate && rules.mode == PluginMode::Reconcile
}

/// The gate's verdict on `report` (the new version against the serving one) under `rules`:
/// `None` lets it serve.
pub fn decide(report: &Report, rules: &Effective) -> Option<Hold> {
    if !gates(rules) {
        return None;
    }
    let mut hold = Hold {
        deleted: 0,
        children: report.summary.children,
        by_kind: BTreeMap::new(),
        parents: 0,
        rule: String::new(),
    };
    let mut workloads = 0;
    for parent in &report.parents {
        let deleted: Vec<_> = parent.deleted.iter().filter(|d| !d.orphaned).collect();
        hold.parents += usize::from(!deleted.is_empty());
        for removed in deleted {
            let child = &removed.child;
            hold.deleted += 1;
            *hold.by_kind.entry(child.kind.clone()).or_default() += 1;
            let group = child.api_version.rsplit_once('/').map_or("", |(g, _)| g);
            workloads += usize::from(WORKLOAD_KINDS.contains(&(group, child.kind.as_str())));
        }
    }
    let limit = hold.children * rules.rollout_delete_percent as usize / 100;
    hold.rule = if rules.rollout_holds_workload_deletes && workloads > 0 {
        format!("{workloads} of them of a workload kind (rollout.holdWorkloadDeletes)")
    } else if hold.deleted > limit && rules.rollout_delete_percent < 100 {
        format!(
            "more than {}% of them (rollout.maxDeletePercent)",
            rules.rollout_delete_percent
        )
    } else {
        return None;
    };
    Some(hold)
}

/// The file whose content approves a held version of the plugin file `plugin`:
/// `memcached.wasm.approved` beside `memcached.wasm`.
pub fn approval_file(plugin: &Path) -> PathBuf {
    let mut name = plugin.as_os_str().to_owned();
    name.push(".approved");
    PathBuf::from(name)
}

/// Whether `approval` (a file's content or an annotation's value) approves the content of
/// sha256 `content_hash`, or the artifact of manifest digest `digest`.
pub fn approves(approval: Option<&str>, content_hash: &str, digest: Option<&str>) -> bool {
    let Some(approval) = approval.map(str::trim).filter(|a| !a.is_empty()) else {
        return false;
    };
    approval.trim_start_matches("sha256:") == content_hash
        || digest.is_some_and(|digest| digest == approval)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::{ChildName, ParentDiff, Removed, Summary, Version};
    use crate::policy::Policy;

    fn removed(api_version: &str, kind: &str, name: &str) -> Removed {
        Removed {
            child: ChildName {
                api_version: api_version.into(),
                kind: kind.into(),
                name: name.into(),
            },
            orphaned: false,
        }
    }

    fn report(children: usize, deleted: Vec<Vec<Removed>>) -> Report {
        let version = Version {
            plugin: "p".into(),
            version: "1".into(),
            sha256: "h".into(),
            source: "f".into(),
        };
        Report {
            new: version.clone(),
            serving: version,
            parents: deleted
                .into_iter()
                .enumerate()
                .map(|(i, deleted)| ParentDiff {
                    parent: format!("ns/p-{i}"),
                    created: vec![],
                    changed: vec![],
                    deleted,
                    status: None,
                    error: None,
                    serving_error: None,
                })
                .collect(),
            summary: Summary {
                children,
                ..Summary::default()
            },
        }
    }

    #[test]
    fn deleting_a_workload_is_held_and_a_small_share_of_config_is_not() {
        let rules = Policy::default().rules("p").clone();
        let workload = report(100, vec![vec![removed("apps/v1", "Deployment", "a")]]);
        let hold = decide(&workload, &rules).expect("a Deployment deleted is held");
        assert!(hold.rule.contains("workload"), "{hold}");
        let config = report(100, vec![vec![removed("v1", "ConfigMap", "a")]]);
        assert_eq!(decide(&config, &rules), None);
    }

    #[test]
    fn more_than_the_share_is_held_and_immediate_holds_nothing() {
        let rules = Policy::default().rules("p").clone();
        // 20 ConfigMaps of 20 (the release that returns no children).
        let all = report(
            20,
            (0..20)
                .map(|i| vec![removed("v1", "ConfigMap", &format!("c-{i}"))])
                .collect(),
        );
        let hold = decide(&all, &rules).expect("every child deleted is held");
        assert_eq!((hold.deleted, hold.parents), (20, 20));
        assert!(hold.to_string().contains("20 of the plugin's 20 children"));
        let two = report(
            20,
            vec![vec![
                removed("v1", "ConfigMap", "a"),
                removed("v1", "ConfigMap", "b"),
            ]],
        );
        assert_eq!(decide(&two, &rules), None, "10% of 20 may go");
        let mut immediate = rules.clone();
        immediate.rollout_strategy = RolloutStrategy::Immediate;
        assert_eq!(decide(&all, &immediate), None);
    }

    #[test]
    fn an_approval_names_the_content_or_the_artifact() {
        assert!(approves(Some("abc\n"), "abc", None));
        assert!(approves(Some("sha256:abc"), "abc", None));
        assert!(approves(Some("sha256:d1"), "abc", Some("sha256:d1")));
        assert!(!approves(Some("abd"), "abc", Some("sha256:d1")));
        assert!(!approves(Some(""), "", None));
        assert!(!approves(None, "abc", None));
        assert_eq!(
            approval_file(Path::new("/plugins/memcached.wasm")),
            Path::new("/plugins/memcached.wasm.approved")
        );
    }
}
