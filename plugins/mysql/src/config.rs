//! The server configuration in the `<name>-initconf` ConfigMap, its hash, and the Group Replication group name.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::children::{GR_PORT, MAX_INSTANCES_USIZE, MYSQL_PORT, MYSQLX_PORT, instances_service};

/// Where the ConfigMap is mounted in the MySQL container; `my.cnf` also goes to `/etc/my.cnf`.
pub const INITCONF_DIR: &str = "/etc/mysql-initconf";
/// ConfigMap key of the main option file.
pub const MY_CNF: &str = "my.cnf";
/// ConfigMap key of the Group Replication options.
pub const GROUP_REPLICATION_CNF: &str = "01-group-replication.cnf";
/// ConfigMap key of the user's `spec.mycnf`.
pub const EXTRA_CNF: &str = "99-extra.cnf";

/// The data of the `<name>-initconf` ConfigMap.
///
/// Everything in it is a function of the cluster's identity and `spec.mycnf` only, never of
/// `spec.instances`: a change here rolls every pod, and scaling must not.
pub fn initconf(namespace: &str, name: &str, mycnf: Option<&str>) -> BTreeMap<String, String> {
    let mut main = format!(
        "# Generated for InnoDBCluster {namespace}/{name}; changes are overwritten.\n\
         [mysqld]\n\
         datadir=/var/lib/mysql\n\
         socket=/var/run/mysqld/mysqld.sock\n\
         pid-file=/var/run/mysqld/mysqld.pid\n\
         port={MYSQL_PORT}\n\
         mysqlx-port={MYSQLX_PORT}\n\
         bind-address=*\n\
         gtid_mode=ON\n\
         enforce_gtid_consistency=ON\n\
         log_bin={name}\n\
         relay_log={name}-relay-bin\n\
         disabled_storage_engines=MyISAM,BLACKHOLE,FEDERATED,ARCHIVE,MEMORY\n\
         !include {INITCONF_DIR}/{GROUP_REPLICATION_CNF}\n"
    );
    let mut data = BTreeMap::new();
    if let Some(mycnf) = mycnf {
        // Last, so the user's options win over the generated ones.
        main.push_str(&format!("!include {INITCONF_DIR}/{EXTRA_CNF}\n"));
        let mut extra = mycnf.to_string();
        if !extra.ends_with('\n') {
            extra.push('\n');
        }
        data.insert(EXTRA_CNF.to_string(), extra);
    }
    data.insert(MY_CNF.to_string(), main);
    data.insert(
        GROUP_REPLICATION_CNF.to_string(),
        group_replication(namespace, name),
    );
    data
}

/// Group Replication options. The `loose_` prefix lets the server start even before the
/// plugin is loaded. The seeds name every possible member (at most 9), so they do not change
/// when the cluster is scaled; members that do not exist are skipped by the group.
fn group_replication(namespace: &str, name: &str) -> String {
    let service = instances_service(name);
    let seeds: Vec<String> = (0..MAX_INSTANCES_USIZE)
        .map(|i| format!("{name}-{i}.{service}:{GR_PORT}"))
        .collect();
    format!(
        "[mysqld]\n\
         plugin_load_add=group_replication.so\n\
         loose_group_replication_group_name={}\n\
         loose_group_replication_single_primary_mode=ON\n\
         loose_group_replication_start_on_boot=OFF\n\
         loose_group_replication_communication_stack=XCOM\n\
         loose_group_replication_ssl_mode=REQUIRED\n\
         loose_group_replication_group_seeds={}\n",
        group_name(namespace, name),
        seeds.join(",")
    )
}

/// A UUID (the form `group_replication_group_name` requires) derived from the cluster's
/// namespace and name: stable across reconciles and restarts, and the same for a cluster
/// re-created under the same name, which then finds its retained data directories.
pub fn group_name(namespace: &str, name: &str) -> String {
    let digest = Sha256::digest(format!("mysql.operator-host.dev/{namespace}/{name}"));
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    // RFC 9562 version 8 (custom), variant 10.
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = hex(&bytes);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The SHA-256 of the ConfigMap data, as hex: it changes exactly when the data does.
pub fn config_hash(data: &BTreeMap<String, String>) -> String {
    let mut hasher = Sha256::new();
    // Length-prefixed so that moving text between keys or values changes the hash.
    for (key, value) in data {
        hasher.update((key.len() as u64).to_le_bytes());
        hasher.update(key.as_bytes());
        hasher.update((value.len() as u64).to_le_bytes());
        hasher.update(value.as_bytes());
    }
    hex(&hasher.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
