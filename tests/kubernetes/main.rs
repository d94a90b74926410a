//! `sbx serve --platform kubernetes` against a real kube-apiserver and etcd
//! (`scripts/k8s-testenv`, started by `scripts/test`, which exports SBX_TEST_KUBECONFIG): the
//! service's state lives in the cluster — keys in a Secret, the first admin token in another,
//! tenants as Tenant objects with labelled namespaces, role bindings in a ConfigMap, node
//! dedication as a label and a taint — and survives the daemon. The tests read the cluster
//! directly with kube-rs to check what the daemon wrote.
#[path = "../common/mod.rs"]
mod common;

mod api_server;
mod hardening;
mod identity;
mod install;
mod network;
mod nodes;
mod replicas;
mod sandboxes;
mod snapshots;
mod tenants;

use std::time::{Duration, Instant};

use common::{Daemon, bootstrap_token, call, cluster};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, Node, PersistentVolumeClaim, Pod, PodSpec, ResourceQuota, Secret,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

/// The tests share one API server and its cluster-wide objects: one at a time.
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn tenants(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource {
            group: "sbx.io".into(),
            version: "v1alpha1".into(),
            api_version: "sbx.io/v1alpha1".into(),
            kind: "Tenant".into(),
            plural: "tenants".into(),
        },
    )
}

/// Removes what an earlier run against the same API server left.
async fn reset(client: &kube::Client) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    for name in ["sbx-api-keys", "sbx-bootstrap-admin"] {
        let _ = secrets.delete(name, &DeleteParams::default()).await;
    }
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    for name in ["sbx-role-bindings", "sbx-install"] {
        let _ = maps.delete(name, &DeleteParams::default()).await;
    }
    let _ = tenants(client)
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    // No KWOK node stays dedicated: neither the label nor the taint.
    let nodes: Api<Node> = Api::all(client.clone());
    for name in ["node-1", "node-2"] {
        let Ok(node) = nodes.get(name).await else {
            continue;
        };
        let taints: Vec<_> = node
            .spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.key != "sbx.io/tenant")
            .collect();
        let patch = json!({
            "metadata": {"labels": {"sbx.io/tenant": null, "sbx.io/install": null}},
            "spec": {"taints": taints},
        });
        let _ = nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
    }
}

async fn d_template(deployments: &Api<Deployment>, name: &str) -> PodSpec {
    deployments
        .get(name)
        .await
        .unwrap()
        .spec
        .template
        .spec
        .unwrap()
}

/// Deletes a namespace and waits until it is gone (the namespace controller empties it).
async fn drop_namespace(client: &kube::Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(name, &DeleteParams::default()).await;
    let started = Instant::now();
    while namespaces.get_opt(name).await.unwrap().is_some() {
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "namespace {name} still there"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What an earlier test or run left: sbx's cluster-wide objects and these namespaces.
async fn clean(client: &kube::Client, namespaces: &[&str]) {
    reset(client).await;
    for namespace in namespaces {
        drop_namespace(client, namespace).await;
    }
}

/// A test's hold on the shared cluster: one test at a time. Taking it removes what an earlier
/// test left; dropping it removes what this test made (sbx's cluster-wide objects and the
/// test's namespaces), also when an assertion failed. Declare it first, so that the test's
/// daemons are stopped before it cleans.
struct Cluster {
    client: kube::Client,
    namespaces: Vec<&'static str>,
    _one: tokio::sync::MutexGuard<'static, ()>,
}

impl Cluster {
    async fn take(namespaces: &[&'static str]) -> Cluster {
        let one = CLUSTER.lock().await;
        let client = cluster().await;
        clean(&client, namespaces).await;
        Cluster {
            client,
            namespaces: namespaces.to_vec(),
            _one: one,
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Drop cannot await, and the test's runtime is the thread being dropped on: the
        // clean-up runs on a thread and runtime of its own, with a client of its own.
        let namespaces = std::mem::take(&mut self.namespaces);
        let cleaned = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the clean-up")
                .block_on(async { clean(&cluster().await, &namespaces).await })
        })
        .join();
        if cleaned.is_err() && !std::thread::panicking() {
            panic!("cleaning the test cluster failed");
        }
    }
}

fn start() -> Daemon {
    Daemon::start_on_kubernetes("")
}

fn volume_snapshots(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource {
            group: "snapshot.storage.k8s.io".into(),
            version: "v1".into(),
            api_version: "snapshot.storage.k8s.io/v1".into(),
            kind: "VolumeSnapshot".into(),
            plural: "volumesnapshots".into(),
        },
    )
}

async fn get_status(daemon: &Daemon, token: &str, path: &str) -> u16 {
    call(daemon, token, reqwest::Method::GET, path, None)
        .await
        .0
}

/// Polls `status` until it answers `want` (at most 10 s).
async fn eventually<F, Fut>(status: F, want: u16, what: &str)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = u16>,
{
    let started = Instant::now();
    loop {
        let got = status().await;
        if got == want {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{what}: {got}, not {want}, after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
