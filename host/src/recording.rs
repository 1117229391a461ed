//! The flight recorder (`run --record DIR`): the inputs of each parent's last reconcile, kept
//! as a file that `operator-host replay` runs a plugin on offline.
//!
//! A recording holds what the plugin was called with (the parent, its observed children, its
//! related objects as the plugin saw them), except Secret data: every Secret's `data` is kept
//! only as the hashes the `data-hash` view shows, whatever the plugin saw. One file per
//! parent, `DIR/<plugin>/<namespace>/<name>.json`, replaced whole at each reconcile.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::diff::ParentInputs;
use crate::runtime::RelatedObjects;

/// Why a recording could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("writing the recording {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading the recording {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{} is not a recording of operator-host run --record (a JSON document with plugin, \
         parent, observed and related): {detail}",
        path.display()
    )]
    Parse { path: PathBuf, detail: String },
}

/// The inputs of one reconcile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recording {
    /// The plugin's name, version and content hash at the time.
    pub plugin: String,
    pub version: String,
    pub sha256: String,
    /// When (RFC 3339): the time replay stamps condition transitions with.
    pub recorded_at: String,
    pub parent: Value,
    pub observed: Vec<Value>,
    /// Each related declaration's objects, by its name.
    pub related: Vec<RelatedRecord>,
}

/// The objects of one related declaration, as the plugin saw them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelatedRecord {
    pub name: String,
    pub objects: Vec<Value>,
}

impl Recording {
    /// The recording of a reconcile of `inputs` by the plugin `decl` at `now`.
    pub fn of(
        decl: &crate::declaration::Declaration,
        inputs: &ParentInputs,
        now: &str,
    ) -> Recording {
        let without_secret_data = |object: &Value| {
            let mut object = object.clone();
            if object["kind"] == "Secret" && object["apiVersion"] == "v1" {
                crate::related::hash_secret_data(&mut object);
            }
            object
        };
        let related = inputs
            .related
            .iter()
            .map(|related| {
                // A Secret the plugin saw as hashes is kept as it saw it.
                let hashed_already = decl.related.iter().any(|d| {
                    d.name == related.name
                        && d.is_secret()
                        && d.secret_view == crate::runtime::SecretView::DataHash
                });
                RelatedRecord {
                    name: related.name.clone(),
                    objects: related
                        .objects
                        .iter()
                        .filter_map(|text| serde_json::from_str(text).ok())
                        .map(|object: Value| match hashed_already {
                            true => object,
                            false => without_secret_data(&object),
                        })
                        .collect(),
                }
            })
            .collect();
        Recording {
            plugin: decl.name.clone(),
            version: decl.version.clone(),
            sha256: decl.content_hash.clone(),
            recorded_at: now.to_string(),
            parent: inputs.parent.clone(),
            observed: inputs.observed.iter().map(without_secret_data).collect(),
            related,
        }
    }

    /// What a plugin is called with on replay.
    pub fn inputs(&self) -> ParentInputs {
        ParentInputs {
            parent: self.parent.clone(),
            observed: self.observed.clone(),
            related: self
                .related
                .iter()
                .map(|related| RelatedObjects {
                    name: related.name.clone(),
                    objects: related.objects.iter().map(Value::to_string).collect(),
                })
                .collect(),
        }
    }

    /// Reads the recording at `path`.
    pub fn read(path: &Path) -> Result<Recording, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| Error::Parse {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })
    }

    /// Reads every recording in `paths`: files, and the `*.json` files under directories.
    pub fn read_all(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Recording)>, Error> {
        let mut files = Vec::new();
        for path in paths {
            collect_json(path, &mut files)?;
        }
        files.sort();
        files
            .into_iter()
            .map(|file| Ok((file.clone(), Recording::read(&file)?)))
            .collect()
    }
}

fn collect_json(path: &Path, files: &mut Vec<PathBuf>) -> Result<(), Error> {
    if !path.is_dir() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    let read = |source| Error::Read {
        path: path.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(path).map_err(read)? {
        let entry = entry.map_err(read)?.path();
        if entry.is_dir() || entry.extension().is_some_and(|e| e == "json") {
            collect_json(&entry, files)?;
        }
    }
    Ok(())
}

/// Recordings as the inputs of a diff: each parent with the inputs it was recorded with,
/// whichever version runs on them.
#[derive(Debug, Default)]
pub struct Recordings {
    parents: Vec<Value>,
    inputs: Vec<ParentInputs>,
}

impl Recordings {
    pub fn new(recordings: &[Recording]) -> Recordings {
        let inputs: Vec<ParentInputs> = recordings.iter().map(Recording::inputs).collect();
        Recordings {
            parents: inputs.iter().map(|i| i.parent.clone()).collect(),
            inputs,
        }
    }
}

impl crate::diff::Inputs for Recordings {
    fn parents(&self) -> &[Value] {
        &self.parents
    }

    fn children(&self) -> usize {
        self.inputs.iter().map(|i| i.observed.len()).sum()
    }

    fn inputs(&self, _version: &crate::plugin::Plugin, parent: &Value) -> ParentInputs {
        self.inputs
            .iter()
            .find(|inputs| inputs.parent == *parent)
            .cloned()
            .unwrap_or_else(|| ParentInputs {
                parent: parent.clone(),
                observed: Vec::new(),
                related: Vec::new(),
            })
    }
}

/// Where recordings go: a directory of the host's.
#[derive(Debug, Clone)]
pub struct FlightRecorder {
    dir: PathBuf,
}

impl FlightRecorder {
    pub fn new(dir: PathBuf) -> FlightRecorder {
        FlightRecorder { dir }
    }

    /// The file of `recording`'s parent.
    pub fn path_of(&self, recording: &Recording) -> PathBuf {
        let metadata = &recording.parent["metadata"];
        let part = |value: &Value, absent: &str| {
            // A name is a DNS subdomain: no separator can climb out of the directory.
            value.as_str().unwrap_or(absent).replace(['/', '\\'], "_")
        };
        self.dir
            .join(part(&Value::String(recording.plugin.clone()), "_"))
            .join(part(&metadata["namespace"], "_cluster"))
            .join(format!("{}.json", part(&metadata["name"], "_")))
    }

    /// Writes `recording`, replacing the parent's last one whole.
    pub fn record(&self, recording: &Recording) -> Result<PathBuf, Error> {
        let path = self.path_of(recording);
        let write = |source| Error::Write {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(write)?;
        }
        let text = serde_json::to_vec_pretty(recording).unwrap_or_default();
        crate::files::write_whole(&path, &text).map_err(write)?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decl() -> crate::declaration::Declaration {
        crate::test_support::memcached_declaration(Vec::new())
    }

    #[test]
    fn a_recording_keeps_no_secret_data_in_clear_and_reads_back() {
        let inputs = ParentInputs {
            parent: json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                           "metadata": {"name": "m", "namespace": "ns", "uid": "u"}}),
            observed: vec![json!({"apiVersion": "v1", "kind": "Secret",
                                  "metadata": {"name": "s"}, "data": {"password": "aHVudGVyMg=="}})],
            related: vec![],
        };
        let recording = Recording::of(&decl(), &inputs, "2026-12-06T00:00:00Z");
        let kept = recording.observed[0]["data"]["password"].as_str().unwrap();
        assert_ne!(kept, "aHVudGVyMg==");
        let dir = tempfile::tempdir().unwrap();
        let recorder = FlightRecorder::new(dir.path().to_path_buf());
        let path = recorder.record(&recording).unwrap();
        assert!(path.ends_with("memcached/ns/m.json"), "{}", path.display());
        let all = Recording::read_all(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].1, recording);
        assert_eq!(all[0].1.inputs().parent, inputs.parent);
    }

    #[test]
    fn a_file_that_is_not_a_recording_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.json");
        std::fs::write(&file, "{\"kind\": \"Deployment\"}").unwrap();
        let error = Recording::read(&file).unwrap_err().to_string();
        assert!(
            error.contains("x.json") && error.contains("not a recording"),
            "{error}"
        );
    }
}
