//! Records every version of the objects a watch delivers, in order, so that a test reads orders and short-lived states from what the API server stored rather than from polls.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

/// One stored version of an object, as a watch delivered it.
#[derive(Clone, Debug)]
pub struct Seen<K> {
    /// Its `resourceVersion`: the devcluster has one etcd, whose revisions order every write
    /// of every kind.
    pub revision: u64,
    /// Whether this is its deletion.
    pub deleted: bool,
    /// The object.
    pub object: K,
}

/// Every version of the objects of `api` (narrowed by the watch's parameters) the API server
/// stored from the moment [`Recorder::start`] returns, in order.
#[derive(Clone)]
pub struct Recorder<K>(Arc<Mutex<Vec<Seen<K>>>>);

impl<K> Recorder<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    /// Starts watching `api` from its current resource version with `params` (a watch ends
    /// after `params`' timeout, 290 s unless set).
    pub async fn start(api: &Api<K>, params: WatchParams) -> Self {
        let recorder = Recorder(Arc::default());
        let version = api
            .list(&ListParams::default().limit(1))
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap_or_default();
        let params = if params.timeout.is_none() {
            params.timeout(290)
        } else {
            params
        };
        let stream = api.watch(&params, &version).await.unwrap();
        let seen = recorder.0.clone();
        tokio::spawn(async move {
            let mut stream = Box::pin(stream);
            while let Some(Ok(event)) = stream.next().await {
                let (object, deleted) = match event {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) => (o, false),
                    WatchEvent::Deleted(o) => (o, true),
                    _ => continue,
                };
                let revision = object
                    .meta()
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                seen.lock().unwrap().push(Seen {
                    revision,
                    deleted,
                    object,
                });
            }
        });
        recorder
    }

    /// What was recorded so far.
    pub fn seen(&self) -> Vec<Seen<K>> {
        self.0.lock().unwrap().clone()
    }
}
