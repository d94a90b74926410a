//! `sbx serve --platform kubernetes` against a real kube-apiserver and etcd
//! (`scripts/k8s-testenv`, started by `scripts/test`, which exports SBX_TEST_KUBECONFIG): the
//! service's state lives in the cluster — keys in a Secret, the first admin token in another,
//! tenants as Tenant objects with labelled namespaces, role bindings in a ConfigMap, node
//! dedication as a label and a taint — and survives the daemon. The tests read the cluster
//! directly with kube-rs to check what the daemon wrote.
mod common;

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
    let _ = maps
        .delete("sbx-role-bindings", &DeleteParams::default())
        .await;
    let _ = tenants(client)
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let nodes: Api<Node> = Api::all(client.clone());
    let patch = json!({"metadata": {"labels": {"sbx.io/tenant": null}}});
    let _ = nodes
        .patch("node-1", &PatchParams::default(), &Patch::Merge(&patch))
        .await;
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

#[tokio::test]
async fn identity_and_tenancy_live_in_the_cluster() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&[]).await;
    let client = cluster.client.clone();
    let daemon = start();
    let admin = bootstrap_token(&client).await;
    let (status, body) = call(&daemon, &admin, M::GET, "/api/v1/auth/whoami", None).await;
    assert_eq!(
        (status, &body["data"]["grants"]),
        (200, &json!(["admin"])),
        "{body}"
    );

    // Keys: in the Secret as hashes, never as tokens.
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/keys",
        Some(json!({"name": "ci", "role": "operator", "expires_days": 1})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let token = body["data"]["token"].as_str().unwrap().to_string();
    let id = body["data"]["id"].as_str().unwrap().to_string();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    let stored = secrets.get("sbx-api-keys").await.unwrap().data.unwrap();
    let entry: Value = serde_json::from_slice(&stored[&id].0).unwrap();
    assert_eq!(entry["name"], "ci");
    assert_eq!(entry["secret_sha256"].as_str().unwrap().len(), 64);
    let secret_part = token.split_once('_').unwrap().1;
    assert!(!String::from_utf8_lossy(&stored[&id].0).contains(secret_part));
    assert_eq!(
        call(&daemon, &token, M::GET, "/api/v1/tenants", None)
            .await
            .0,
        200
    );

    // Tenants: Tenant objects; their namespaces created and labelled.
    let (status, body) = call(&daemon, &admin, M::POST, "/api/v1/tenants", Some(json!({"name": "acme", "spec": {"namespaces": ["acme-a", "acme-b"], "quotas": {"sandboxes": 3}}}))).await;
    assert_eq!(status, 201, "{body}");
    let object = tenants(&client).get("acme").await.unwrap();
    assert_eq!(
        object.data["spec"]["namespaces"],
        json!(["acme-a", "acme-b"])
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in ["acme-a", "acme-b"] {
        let labels = namespaces.get(ns).await.unwrap().metadata.labels.unwrap();
        assert_eq!(labels["sbx.io/tenant"], "acme", "{ns}");
    }
    let (status, _) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/tenants",
        Some(json!({"name": "other", "spec": {"namespaces": ["acme-b"]}})),
    )
    .await;
    assert_eq!(status, 400, "a namespace of another tenant");
    // Rule 9: a single-namespace tenant gets the ResourceQuota backstop; several get none.
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/tenants",
        Some(json!({"name": "solo", "spec": {"namespaces": ["solo-ns"], "quotas": {"sandboxes": 4, "memory": "8Gi"}}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "solo-ns");
    let hard = quotas
        .get("sbx-tenant-quota")
        .await
        .unwrap()
        .spec
        .unwrap()
        .hard
        .unwrap();
    assert_eq!(hard["count/deployments.apps"].0, "4");
    assert_eq!(hard["limits.memory"].0, "8Gi");
    let acme_quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "acme-a");
    assert!(
        acme_quotas
            .get_opt("sbx-tenant-quota")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        call(&daemon, &admin, M::DELETE, "/api/v1/tenants/solo", None)
            .await
            .0,
        200
    );
    let (status, body) = call(
        &daemon,
        &admin,
        M::PATCH,
        "/api/v1/tenants/acme",
        Some(json!({"spec": {"quotas": null, "namespaces": ["acme-a", "acme-b", "acme-c"]}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let object = tenants(&client).get("acme").await.unwrap();
    assert!(
        object.data["spec"].get("quotas").is_none(),
        "{:?}",
        object.data
    );
    assert_eq!(object.metadata.generation, Some(2));
    assert!(namespaces.get("acme-c").await.is_ok());

    // Role bindings: the ConfigMap.
    let bindings = json!({"bindings": [{"group": "acme-devs", "role": "user", "tenant": "acme"}], "deny_subjects": ["mallory"]});
    let (status, body) = call(
        &daemon,
        &admin,
        M::PUT,
        "/api/v1/role-bindings",
        Some(bindings.clone()),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let text = maps.get("sbx-role-bindings").await.unwrap().data.unwrap()["bindings.json"].clone();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), bindings);

    // Node dedication: a label and a NoSchedule taint on the Node, and the tenant's nodes.
    let (status, body) = call(
        &daemon,
        &token,
        M::POST,
        "/api/v1/nodes/node-1/dedicate",
        Some(json!({"tenant": "acme"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.get("node-1").await.unwrap();
    assert_eq!(node.metadata.labels.unwrap()["sbx.io/tenant"], "acme");
    assert!(
        node.spec
            .unwrap()
            .taints
            .unwrap()
            .iter()
            .any(|t| t.key == "sbx.io/tenant" && t.effect == "NoSchedule")
    );
    assert_eq!(
        tenants(&client).get("acme").await.unwrap().data["spec"]["nodes"],
        json!(["node-1"])
    );
    assert_eq!(
        call(
            &daemon,
            &token,
            M::POST,
            "/api/v1/nodes/node-9/dedicate",
            Some(json!({"tenant": "acme"}))
        )
        .await
        .0,
        404
    );
    let (status, _) = call(
        &daemon,
        &token,
        M::POST,
        "/api/v1/nodes/node-1/undedicate",
        None,
    )
    .await;
    assert_eq!(status, 200);
    let node = nodes.get("node-1").await.unwrap();
    assert!(!node.metadata.labels.unwrap().contains_key("sbx.io/tenant"));
    assert!(
        !node
            .spec
            .unwrap()
            .taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == "sbx.io/tenant")
    );
    let (status, body) = call(&daemon, &token, M::GET, "/api/v1/nodes/storage", None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["data"]["node-1"]["error"].is_string(), "{body}");

    // A second replica on the same cluster sees the same keys and tenants, and a restart
    // keeps them (no state in the data dir).
    let replica = start();
    let acme = "/api/v1/tenants/acme";
    eventually(
        || get_status(&replica, &token, acme),
        200,
        "the key on the replica",
    )
    .await;
    // Revocation on one replica holds on the other within its refresh interval.
    let (status, _) = call(&daemon, &admin, M::DELETE, "/api/v1/keys/ci", None).await;
    assert_eq!(status, 200);
    assert!(
        !secrets
            .get("sbx-api-keys")
            .await
            .unwrap()
            .data
            .unwrap()
            .contains_key(&id)
    );
    let whoami = "/api/v1/auth/whoami";
    eventually(
        || get_status(&replica, &token, whoami),
        401,
        "the revoked key",
    )
    .await;
    drop(replica);
    let (status, _) = call(&daemon, &admin, M::DELETE, "/api/v1/tenants/acme", None).await;
    assert_eq!(status, 200);
    assert!(tenants(&client).get_opt("acme").await.unwrap().is_none());
}

#[tokio::test]
async fn sandboxes_are_deployments() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&["sb-ns"]).await;
    let client = cluster.client.clone();
    let daemon = start();
    let admin = bootstrap_token(&client).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "sb-ns");
    let create = |body: Value| {
        let (daemon, admin) = (&daemon, admin.clone());
        async move { call(daemon, &admin, M::POST, "/api/v1/sandboxes", Some(body)).await }
    };
    let (status, body) = create(json!({
        "name": "web", "namespace": "sb-ns", "image": "busybox:1.36",
        "limits": {"cpu": "500m", "memory": "256Mi"}, "cap_add": ["NET_BIND_SERVICE"],
    }))
    .await;
    assert_eq!(status, 201, "{body}");
    // The Deployment: the backend's RuntimeClass, the limits, the user and capabilities.
    let d = deployments.get("web").await.unwrap();
    assert_eq!(d.spec.replicas, Some(1));
    let pod = d.spec.template.spec.clone().unwrap();
    assert_eq!(pod.runtime_class_name.as_deref(), Some("kata-qemu"));
    assert_eq!(pod.automount_service_account_token, Some(false));
    let container = &pod.containers[0];
    assert_eq!(container.image.as_deref(), Some("busybox:1.36"));
    let limits = container.resources.clone().unwrap().limits.unwrap();
    assert_eq!(
        (limits["cpu"].0.as_str(), limits["memory"].0.as_str()),
        ("500m", "256Mi")
    );
    let caps = container
        .security_context
        .clone()
        .unwrap()
        .capabilities
        .unwrap();
    assert_eq!(caps.drop.unwrap(), ["ALL"]);
    assert_eq!(caps.add.unwrap(), ["NET_BIND_SERVICE"]);
    assert_eq!(
        d.metadata.annotations.unwrap()["sbx.io/backend"],
        "kata-qemu-longhorn"
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    assert!(
        namespaces.get("sb-ns").await.is_ok(),
        "the namespace was created"
    );

    let get = |name: &'static str| {
        let (daemon, admin) = (&daemon, admin.clone());
        async move {
            call(
                daemon,
                &admin,
                M::GET,
                &format!("/api/v1/sandboxes/{name}?namespace=sb-ns"),
                None,
            )
            .await
        }
    };
    let (status, body) = get("web").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (
            body["data"]["status"].as_str(),
            body["data"]["ready"].as_str()
        ),
        (Some("Pending"), Some("False"))
    );
    assert_eq!(body["data"]["backend"], "kata-qemu-longhorn");
    // The controllers make its ReplicaSet and Pod, the scheduler places it on a KWOK node and
    // KWOK (playing the kubelet) reports it Running and Ready.
    let running = |name: &'static str| {
        let get = &get;
        async move {
            let started = Instant::now();
            loop {
                let (_, body) = get(name).await;
                if body["data"]["status"] == "Running" && body["data"]["ready"] == "True" {
                    return body;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "{name}: {body}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    running("web").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "sb-ns");
    let web_pods = pods
        .list(&ListParams::default().labels("sbx.io/sandbox=web"))
        .await
        .unwrap()
        .items;
    assert_eq!(web_pods.len(), 1);
    assert!(
        web_pods[0]
            .spec
            .as_ref()
            .unwrap()
            .node_name
            .as_deref()
            .is_some_and(|n| n.starts_with("node-")),
        "{:?}",
        web_pods[0].spec
    );
    // kql: the root PVC `<sandbox>-root-lh` (class longhorn), mounted in the container.
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "sb-ns");
    let pvc = pvcs.get("web-root-lh").await.unwrap().spec.unwrap();
    assert_eq!(pvc.storage_class_name.as_deref(), Some("longhorn"));
    assert_eq!(
        pvc.resources.unwrap().requests.unwrap()["storage"].0,
        "10Gi"
    );
    let mounts = d_template(&deployments, "web").await.containers[0]
        .volume_mounts
        .clone()
        .unwrap();
    assert_eq!(mounts[0].mount_path, "/workspace");

    // A container that keeps crashing (KWOK reports the image `sbx-test/crashloop` as the
    // kubelet reports a crash loop): Failed with the kubelet's reason, restarts counted.
    let (status, body) =
        create(json!({"name": "crashy", "namespace": "sb-ns", "image": "sbx-test/crashloop"}))
            .await;
    assert_eq!(status, 201, "{body}");
    let started = Instant::now();
    let body = loop {
        let (_, body) = get("crashy").await;
        if body["data"]["status"] == "Failed" {
            break body;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(body["data"]["restarts"].as_i64().unwrap() >= 3, "{body}");
    assert!(
        body["data"]["error_message"]
            .as_str()
            .unwrap()
            .starts_with("CrashLoopBackOff"),
        "{body}"
    );
    assert_eq!(
        call(
            &daemon,
            &admin,
            M::DELETE,
            "/api/v1/sandboxes/crashy?namespace=sb-ns",
            None
        )
        .await
        .0,
        200
    );

    // The other backend, a non-root sandbox, and what is refused.
    let (status, body) = create(json!({"name": "fc", "namespace": "sb-ns", "image": "busybox", "backend": "kata-firecracker-devmapper", "pod_non_root": true})).await;
    assert_eq!(status, 201, "{body}");
    let pod = deployments
        .get("fc")
        .await
        .unwrap()
        .spec
        .template
        .spec
        .unwrap();
    assert_eq!(pod.runtime_class_name.as_deref(), Some("kata-fc"));
    let security = pod.security_context.unwrap();
    assert_eq!(
        (security.run_as_user, security.fs_group),
        (Some(65532), Some(65532))
    );
    for (body, says) in [
        (
            json!({"name": "web", "namespace": "sb-ns", "image": "busybox"}),
            "already exists",
        ),
        (
            json!({"name": "x", "namespace": "sb-ns", "image": "busybox", "backend": "sbxd"}),
            "kata-qemu-longhorn",
        ),
    ] {
        let (status, response) = create(body.clone()).await;
        assert_eq!(status, 400, "{body} -> {response}");
        assert!(
            response["error"]["message"]
                .as_str()
                .unwrap()
                .contains(says),
            "{response}"
        );
    }
    // env_file -> a Secret the container reads; before_script -> a postStart hook and the
    // readiness probe waiting for it; egress_whitelist -> a NetworkPolicy (+ DNS).
    let env_dir = tempfile::tempdir().unwrap();
    let env_file = env_dir.path().join("app.env");
    std::fs::write(&env_file, "TOKEN=s3cret\nMODE=test\n").unwrap();
    let (status, body) = create(json!({
        "name": "full", "namespace": "sb-ns", "image": "busybox",
        "env_file": env_file.to_str().unwrap(), "before_script": "echo prepared > /tmp/p",
        "egress_whitelist": ["10.20.0.0/16"],
    }))
    .await;
    assert_eq!(status, 201, "{body}");
    let pod = deployments
        .get("full")
        .await
        .unwrap()
        .spec
        .template
        .spec
        .unwrap();
    let container = &pod.containers[0];
    assert_eq!(
        container.env_from.clone().unwrap()[0]
            .secret_ref
            .clone()
            .unwrap()
            .name,
        "full-env"
    );
    let hook = container
        .lifecycle
        .clone()
        .unwrap()
        .post_start
        .unwrap()
        .exec
        .unwrap()
        .command
        .unwrap();
    assert!(hook[2].contains("echo prepared > /tmp/p"), "{hook:?}");
    assert!(container.readiness_probe.is_some());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "sb-ns");
    let env = secrets.get("full-env").await.unwrap().data.unwrap();
    assert_eq!(env["TOKEN"].0, b"s3cret");
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), "sb-ns");
    let policy =
        serde_json::to_value(policies.get("full-egress").await.unwrap().spec.unwrap()).unwrap();
    assert_eq!(policy["policyTypes"], json!(["Egress"]));
    assert_eq!(
        policy["egress"][0]["to"][0]["ipBlock"]["cidr"],
        "10.20.0.0/16"
    );
    assert_eq!(policy["egress"][1]["ports"][0]["port"], 53);
    let (status, _) = create(
        json!({"name": "sealed", "namespace": "sb-ns", "image": "busybox", "egress_whitelist": []}),
    )
    .await;
    assert_eq!(status, 201);
    let sealed =
        serde_json::to_value(policies.get("sealed-egress").await.unwrap().spec.unwrap()).unwrap();
    assert!(
        sealed
            .get("egress")
            .is_none_or(|e| e.as_array().is_some_and(|a| a.is_empty())),
        "{sealed}"
    );
    for name in ["full", "sealed"] {
        let (status, _) = call(
            &daemon,
            &admin,
            M::DELETE,
            &format!("/api/v1/sandboxes/{name}?namespace=sb-ns"),
            None,
        )
        .await;
        assert_eq!(status, 200);
    }
    assert!(secrets.get_opt("full-env").await.unwrap().is_none());
    assert!(policies.get_opt("full-egress").await.unwrap().is_none());
    assert!(policies.get_opt("sealed-egress").await.unwrap().is_none());

    let (status, body) = call(
        &daemon,
        &admin,
        M::GET,
        "/api/v1/sandboxes?all_namespaces=true",
        None,
    )
    .await;
    assert_eq!(status, 200);
    let names: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["namespace"] == "sb-ns")
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fc", "web"], "{body}");

    // Pause scales to zero, resume back to one; pausing a paused sandbox changes nothing.
    let pause = |path: &'static str| {
        let (daemon, admin) = (&daemon, admin.clone());
        async move {
            call(
                daemon,
                &admin,
                M::POST,
                path,
                Some(json!({"namespace": "sb-ns"})),
            )
            .await
        }
    };
    assert_eq!(pause("/api/v1/sandboxes/web/pause").await.0, 200);
    assert_eq!(deployments.get("web").await.unwrap().spec.replicas, Some(0));
    assert_eq!(get("web").await.1["data"]["status"], "Paused");
    assert_eq!(pause("/api/v1/sandboxes/web/pause").await.0, 200);
    assert_eq!(pause("/api/v1/sandboxes/web/resume").await.0, 200);
    assert_eq!(deployments.get("web").await.unwrap().spec.replicas, Some(1));
    // Exec goes through the API server to the node (KWOK runs it on the test host).
    running("web").await;
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/sandboxes/web/exec?namespace=sb-ns",
        Some(json!({"command": "echo through-the-apiserver; exit 7"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["data"]["exit_code"], &body["data"]["stdout"]),
        (&json!(7), &json!("through-the-apiserver\n")),
        "{body}"
    );
    // Delete: the Deployment goes.
    for name in ["web", "fc"] {
        let (status, body) = call(
            &daemon,
            &admin,
            M::DELETE,
            &format!("/api/v1/sandboxes/{name}?namespace=sb-ns"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    assert!(deployments.get_opt("web").await.unwrap().is_none());
    // The root PVC goes too (once its Pod is gone: PVC protection holds it until then).
    let started = Instant::now();
    while pvcs.get_opt("web-root-lh").await.unwrap().is_some() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "web-root-lh stays"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(get("web").await.0, 404);
}

/// A whole test cluster of one test's own (`scripts/k8s-testenv start --dir`), stopped on drop
/// with an API server the test started itself.
struct OwnCluster {
    _dir: tempfile::TempDir,
    state: std::path::PathBuf,
    returned: Option<std::process::Child>,
}

const TESTENV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/k8s-testenv");

impl OwnCluster {
    fn start() -> OwnCluster {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("k8s");
        let own = OwnCluster {
            _dir: dir,
            state,
            returned: None,
        };
        let out = std::process::Command::new(TESTENV)
            .args(["start", "--dir"])
            .arg(&own.state)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        own
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        if let Some(mut child) = self.returned.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::process::Command::new(TESTENV)
            .args(["stop", "--dir"])
            .arg(&self.state)
            .output();
    }
}

#[tokio::test]
async fn losing_the_api_server_later_is_503_in_the_envelope_until_it_returns() {
    // A cluster of this test's own (its own --dir), its API server stopped under a running
    // daemon; stopped when the test ends, whether it passes or not.
    let mut own = OwnCluster::start();
    let state = own.state.clone();
    let kubeconfig = state.join("kubeconfig");
    let daemon = Daemon::start_with_env(
        &["--platform", "kubernetes"],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    );
    let secrets: Api<Secret> = Api::namespaced(
        kube::Client::try_from(
            kube::Config::from_custom_kubeconfig(
                kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
                &Default::default(),
            )
            .await
            .unwrap(),
        )
        .unwrap(),
        "kube-system",
    );
    let token = String::from_utf8(
        secrets
            .get("sbx-bootstrap-admin")
            .await
            .unwrap()
            .data
            .unwrap()["token"]
            .0
            .clone(),
    )
    .unwrap();
    let token = token.trim();
    let (status, _) = call(
        &daemon,
        token,
        reqwest::Method::GET,
        "/api/v1/tenants",
        None,
    )
    .await;
    assert_eq!(status, 200);
    // The API server goes away (killed; the rest of the test environment stays).
    let pid: i32 = std::fs::read_to_string(state.join("kube-apiserver.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let apiserver: Vec<String> = std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Keys are served from the daemon's copy; what needs the cluster answers 503, saying why
    // (as soon as the watch caches have noticed the loss: their reconnect fails at once).
    let started = Instant::now();
    let (status, body) = loop {
        let (status, body) = call(
            &daemon,
            token,
            reqwest::Method::GET,
            "/api/v1/sandboxes?all_namespaces=true",
            None,
        )
        .await;
        if status != 200 || started.elapsed() > Duration::from_secs(10) {
            break (status, body);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (503, Some("ServiceUnavailable")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unreachable"),
        "{body}"
    );
    // It comes back (the same program and flags: same port, certificates and etcd), and so
    // does the daemon, without a restart.
    let returned_log = state.join("kube-apiserver.returned.log");
    own.returned = Some(
        std::process::Command::new(&apiserver[0])
            .args(&apiserver[1..])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&returned_log).unwrap())
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    let recovered = loop {
        let (status, body) = call(
            &daemon,
            token,
            reqwest::Method::GET,
            "/api/v1/sandboxes?all_namespaces=true",
            None,
        )
        .await;
        if status == 200 || started.elapsed() > Duration::from_secs(90) {
            break (status, body);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    if recovered.0 != 200 {
        let log = std::fs::read_to_string(&returned_log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        let exited = own.returned.as_mut().unwrap().try_wait().unwrap();
        panic!(
            "not recovered: {} {}; the restarted API server (exited: {exited:?}) wrote, last \
             lines first:\n{}",
            recovered.0,
            recovered.1,
            tail.join("\n")
        );
    }
}

#[test]
fn an_unreachable_api_server_at_start_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kubeconfig");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        &config,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: x\n"
        ),
    )
    .unwrap();
    let output = std::process::Command::new(common::sbx_bin())
        .args([
            "serve",
            "--platform",
            "kubernetes",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(dir.path().join("data"))
        .env("KUBECONFIG", &config)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Kubernetes API server is unreachable"),
        "{stderr}"
    );
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

/// Snapshots are VolumeSnapshots of the root PVC with the `sbx.io/*` annotations; a fork is a
/// PVC cloned from one (KWOK plays the CSI driver: PVCs bind and snapshots become ready, except
/// a PVC cloned from a snapshot named `never-binds`, which stays Pending); a restore rebuilds
/// the sandbox from the annotations with its overrides; GC deletes leftover fork snapshots;
/// one replica holds the leader Lease.
#[tokio::test]
async fn snapshots_are_volume_snapshots() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&["vs-ns"]).await;
    let client = cluster.client.clone();
    let daemon = Daemon::start_on_kubernetes("[kubernetes]\nforkTimeout = \"4s\"\n");
    let admin = bootstrap_token(&client).await;
    let post = |path: String, body: Value| {
        let (daemon, admin) = (&daemon, admin.clone());
        async move { call(daemon, &admin, M::POST, &path, Some(body)).await }
    };
    let env_dir = tempfile::tempdir().unwrap();
    let env_file = env_dir.path().join("app.env");
    std::fs::write(&env_file, "TOKEN=s3cret\n").unwrap();
    let (status, body) = post(
        "/api/v1/sandboxes".into(),
        json!({"name": "src", "namespace": "vs-ns", "image": "busybox:1.36",
               "limits": {"cpu": "500m", "memory": "256Mi"}, "env_file": env_file.to_str().unwrap()}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let snapshots = volume_snapshots(&client, "vs-ns");
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "vs-ns");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "vs-ns");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "vs-ns");

    // A named snapshot: class longhorn, the root PVC as source, the annotations a restore
    // reads, and a copy of the env Secret.
    let (status, body) = post(
        "/api/v1/sandboxes/src/snapshot".into(),
        json!({"snapshot_name": "s1", "namespace": "vs-ns"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let s1 = snapshots.get("s1").await.unwrap();
    assert_eq!(s1.data["spec"]["volumeSnapshotClassName"], "longhorn");
    assert_eq!(
        s1.data["spec"]["source"]["persistentVolumeClaimName"],
        "src-root-lh"
    );
    let a = s1.metadata.annotations.clone().unwrap();
    for (key, value) in [
        ("sbx.io/kind", "named"),
        ("sbx.io/source-sandbox", "src"),
        ("sbx.io/source-image", "busybox:1.36"),
        ("sbx.io/source-backend", "kata-qemu-longhorn"),
        ("sbx.io/source-cpu", "500m"),
        ("sbx.io/source-memory", "256Mi"),
    ] {
        assert_eq!(a.get(key).map(String::as_str), Some(value), "{key}: {a:?}");
    }
    assert_eq!(
        secrets.get("s1.snapshot-env").await.unwrap().data.unwrap()["TOKEN"].0,
        b"s3cret"
    );

    // Fork: a PVC cloned from a `fork` snapshot, Bound before the clone's Deployment exists;
    // the snapshot deleted once it is; the env Secret copied.
    let (status, body) = post(
        "/api/v1/sandboxes/src/fork".into(),
        json!({"new_name": "cl", "namespace": "vs-ns"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let clone_pvc = pvcs.get("cl-root-lh").await.unwrap();
    let source = clone_pvc.spec.unwrap().data_source.unwrap();
    assert_eq!(source.kind, "VolumeSnapshot");
    assert!(source.name.starts_with("src-fork-"), "{source:?}");
    assert_eq!(clone_pvc.status.unwrap().phase.as_deref(), Some("Bound"));
    assert!(snapshots.get_opt(&source.name).await.unwrap().is_none());
    assert!(deployments.get_opt("cl").await.unwrap().is_some());
    assert_eq!(
        secrets.get("cl-env").await.unwrap().data.unwrap()["TOKEN"].0,
        b"s3cret"
    );
    // A clone whose PVC never binds: 504 after forkTimeout, and nothing of it is left.
    let started = Instant::now();
    let (status, body) = post(
        "/api/v1/sandboxes/src/fork".into(),
        json!({"new_name": "nb", "namespace": "vs-ns", "snapshot": "never-binds"}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (504, Some("GatewayTimeout")),
        "{body}"
    );
    assert!(started.elapsed() >= Duration::from_secs(4));
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nb-root-lh"),
        "{body}"
    );
    assert!(pvcs.get_opt("nb-root-lh").await.unwrap().is_none());
    assert!(deployments.get_opt("nb").await.unwrap().is_none());
    assert!(snapshots.get_opt("never-binds").await.unwrap().is_none());
    // Warm fork is sbxd's.
    let (status, _) = post(
        "/api/v1/sandboxes/src/fork".into(),
        json!({"new_name": "w", "namespace": "vs-ns", "warm": true}),
    )
    .await;
    assert_eq!(status, 400);

    // Restore with overrides: they win over the annotations.
    let (status, body) = post(
        "/api/v1/snapshots/s1/restore".into(),
        json!({"new_sandbox_name": "re", "namespace": "vs-ns", "overrides": {
            "image": "alpine:3.20", "limits": {"cpu": "250m"}, "root_disk_size": "20Gi",
            "sidecar": "docker", "cmd": ["sleep", "1d"]}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let pod = d_template(&deployments, "re").await;
    let main = &pod.containers[0];
    assert_eq!(main.image.as_deref(), Some("alpine:3.20"));
    assert_eq!(main.args.clone().unwrap(), ["sleep", "1d"]);
    let limits = main.resources.clone().unwrap().limits.unwrap();
    assert_eq!(
        (limits["cpu"].0.as_str(), limits["memory"].0.as_str()),
        ("250m", "256Mi")
    );
    assert_eq!(pod.containers[1].name, "dind");
    let re_pvc = pvcs.get("re-root-lh").await.unwrap().spec.unwrap();
    assert_eq!(re_pvc.data_source.unwrap().name, "s1");
    assert_eq!(
        re_pvc.resources.unwrap().requests.unwrap()["storage"].0,
        "20Gi"
    );
    assert_eq!(
        secrets.get("re-env").await.unwrap().data.unwrap()["TOKEN"].0,
        b"s3cret"
    );
    // A snapshot without sbx.io/source-image needs an image override; one taken on kfd
    // cannot be restored.
    for (name, annotations) in [
        (
            "bare",
            json!({"sbx.io/kind": "named", "sbx.io/source-sandbox": "src"}),
        ),
        (
            "fc-snap",
            json!({"sbx.io/kind": "named", "sbx.io/source-sandbox": "src",
                   "sbx.io/source-image": "busybox", "sbx.io/source-backend": "kata-firecracker-devmapper"}),
        ),
    ] {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "sbx"}, "annotations": annotations},
            "spec": {"volumeSnapshotClassName": "longhorn", "source": {"persistentVolumeClaimName": "src-root-lh"}},
        }))
        .unwrap();
        snapshots
            .create(&Default::default(), &object)
            .await
            .unwrap();
        let (status, body) = post(
            format!("/api/v1/snapshots/{name}/restore"),
            json!({"new_sandbox_name": "r2", "namespace": "vs-ns"}),
        )
        .await;
        assert_eq!(status, 400, "{name}: {body}");
    }
    let (status, body) = post(
        "/api/v1/snapshots/bare/restore".into(),
        json!({"new_sandbox_name": "r2", "namespace": "vs-ns", "overrides": {"image": "busybox:1.36"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    // kfd has no root volume: no snapshot, no fork.
    let (status, _) = post(
        "/api/v1/sandboxes".into(),
        json!({"name": "fc", "namespace": "vs-ns", "image": "busybox", "backend": "kata-firecracker-devmapper"}),
    )
    .await;
    assert_eq!(status, 201);
    assert!(pvcs.get_opt("fc-root-lh").await.unwrap().is_none());
    for (path, body) in [
        (
            "/api/v1/sandboxes/fc/snapshot",
            json!({"snapshot_name": "x", "namespace": "vs-ns"}),
        ),
        (
            "/api/v1/sandboxes/fc/fork",
            json!({"new_name": "x", "namespace": "vs-ns"}),
        ),
    ] {
        let (status, response) = post(path.into(), body).await;
        assert_eq!(status, 400, "{path}: {response}");
    }
    // A source whose root PVC is gone: fork is 404.
    pvcs.delete("re-root-lh", &Default::default())
        .await
        .unwrap();
    let (status, body) = post(
        "/api/v1/sandboxes/re/fork".into(),
        json!({"new_name": "x", "namespace": "vs-ns"}),
    )
    .await;
    assert_eq!(status, 404, "{body}");

    // GC: a `fork` snapshot left behind an hour ago goes; named ones stay.
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
        "metadata": {"name": "src-fork-1", "labels": {"app.kubernetes.io/managed-by": "sbx"},
                     "annotations": {"sbx.io/kind": "fork", "sbx.io/source-sandbox": "src"}},
        "spec": {"volumeSnapshotClassName": "longhorn", "source": {"persistentVolumeClaimName": "src-root-lh"}},
    }))
    .unwrap();
    snapshots
        .create(&Default::default(), &object)
        .await
        .unwrap();
    let started = Instant::now();
    while snapshots.get("src-fork-1").await.unwrap().data["status"]["readyToUse"] != json!(true) {
        assert!(started.elapsed() < Duration::from_secs(30));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let hour_ago = json!({"status": {"creationTime": "2020-01-01T00:00:00Z"}});
    snapshots
        .patch_status(
            "src-fork-1",
            &PatchParams::default(),
            &Patch::Merge(&hour_ago),
        )
        .await
        .unwrap();
    let (status, body) = post(
        "/api/v1/snapshots/gc".into(),
        json!({"namespace": "vs-ns", "dry_run": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["results"][0]["name"], "src-fork-1", "{body}");
    assert_eq!(body["data"]["results"][0]["deleted"], false, "{body}");
    assert!(snapshots.get_opt("src-fork-1").await.unwrap().is_some());
    let (_, body) = post("/api/v1/snapshots/gc".into(), json!({"namespace": "vs-ns"})).await;
    assert_eq!(
        body["data"]["results"].as_array().unwrap().len(),
        1,
        "{body}"
    );
    assert_eq!(body["data"]["results"][0]["deleted"], true, "{body}");
    assert!(snapshots.get_opt("src-fork-1").await.unwrap().is_none());
    assert!(snapshots.get_opt("s1").await.unwrap().is_some());

    // Snapshot delete takes its env copy along.
    let (status, _) = call(
        &daemon,
        &admin,
        M::DELETE,
        "/api/v1/snapshots/s1?namespace=vs-ns",
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert!(secrets.get_opt("s1.snapshot-env").await.unwrap().is_none());

    // The leader Lease is this (only) replica's.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "kube-system");
    let started = Instant::now();
    loop {
        let holder = leases
            .get_opt("sbx-leader")
            .await
            .unwrap()
            .and_then(|l| l.spec?.holder_identity);
        if holder.is_some_and(|h| h.contains(&format!("-{}-", daemon.pid()))) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no leader");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, body) = call(
        &daemon,
        &admin,
        M::DELETE,
        "/api/v1/sandboxes?namespace=vs-ns",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

/// Two replicas against one cluster: a tenant's quota holds across them (the per-tenant quota
/// Lease), and a tenant's network limits become the bandwidth annotations of its Pods.
#[tokio::test]
async fn quotas_hold_across_replicas() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&["q-ns", "sq-ns"]).await;
    let client = cluster.client.clone();
    let first = start();
    let admin = bootstrap_token(&client).await;
    let (status, body) = call(
        &first,
        &admin,
        M::POST,
        "/api/v1/tenants",
        Some(
            json!({"name": "quota", "spec": {"namespaces": ["q-ns"], "quotas": {"sandboxes": 5},
            "limits": {"network": {"egressBps": "100M", "ingressBps": "200M"}}}}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // The second replica reads the keys and tenants from the cluster at start.
    let second = start();
    let replicas = [&first, &second];
    let creates = (0..20).map(|i| {
        let (daemon, admin) = (replicas[i % 2], admin.clone());
        async move {
            call(
                daemon,
                &admin,
                M::POST,
                "/api/v1/sandboxes",
                Some(
                    json!({"name": format!("q{i}"), "namespace": "q-ns", "image": "busybox",
                            "backend": "kata-firecracker-devmapper"}),
                ),
            )
            .await
        }
    });
    let outcomes = futures_util::future::join_all(creates).await;
    let made = outcomes.iter().filter(|(s, _)| *s == 201).count();
    let refused = outcomes
        .iter()
        .filter(|(s, b)| *s == 403 && b["error"]["code"] == "QuotaExceeded")
        .count();
    assert_eq!((made, refused), (5, 15), "{outcomes:?}");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "q-ns");
    assert_eq!(
        deployments
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len(),
        5
    );
    // The quota Lease is free again.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "kube-system");
    let lease = leases.get("sbx-quota-quota").await.unwrap();
    assert!(
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .is_none_or(|h| h.is_empty()),
        "the quota Lease is still held"
    );
    // Network limits: the bandwidth annotations on the Pod template.
    let made = outcomes
        .iter()
        .position(|(s, _)| *s == 201)
        .map(|i| format!("q{i}"))
        .unwrap();
    let template = deployments.get(&made).await.unwrap().spec.template;
    let annotations = template.metadata.unwrap().annotations.unwrap();
    assert_eq!(annotations["kubernetes.io/egress-bandwidth"], "100M");
    assert_eq!(annotations["kubernetes.io/ingress-bandwidth"], "200M");

    // snapshotStorage counts the VolumeSnapshots' restoreSize (the 10Gi root PVC here): a
    // second snapshot would be above a 10Gi quota.
    drop_namespace(&client, "sq-ns").await;
    let (status, body) = call(
        &first,
        &admin,
        M::POST,
        "/api/v1/tenants",
        Some(json!({"name": "snapq", "spec": {"namespaces": ["sq-ns"],
                    "quotas": {"snapshotStorage": "10Gi"}}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        &first,
        &admin,
        M::POST,
        "/api/v1/sandboxes",
        Some(json!({"name": "sq", "namespace": "sq-ns", "image": "busybox"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let snapshot = |daemon, name: &str| {
        call(
            daemon,
            &admin,
            M::POST,
            "/api/v1/sandboxes/sq/snapshot",
            Some(json!({"snapshot_name": name, "namespace": "sq-ns"})),
        )
    };
    let (status, body) = snapshot(&first, "sq-1").await;
    assert_eq!(status, 201, "{body}");
    let snapshots = volume_snapshots(&client, "sq-ns");
    let started = Instant::now();
    while snapshots.get("sq-1").await.unwrap().data["status"]["restoreSize"] != json!("10Gi") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "sq-1 never ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // On the other replica, once it has read the new tenant (tenants are re-read every 5 s).
    let snapq = "/api/v1/tenants/snapq";
    eventually(
        || get_status(&second, &admin, snapq),
        200,
        "snapq on the replica",
    )
    .await;
    let (status, body) = snapshot(&second, "sq-2").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("QuotaExceeded")),
        "{body}"
    );
}

/// Reads come from each replica's watch caches (sandbox Deployments, their Pods, sandbox
/// VolumeSnapshots): what one replica writes shows on the other, what is deleted behind sbx's
/// back goes from both, and a VolumeSnapshot that is not sbx's is never listed.
#[tokio::test]
async fn every_replica_reads_what_the_cluster_holds() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&["rd-ns"]).await;
    let client = cluster.client.clone();
    let first = start();
    let admin = bootstrap_token(&client).await;
    let second = start();
    let (status, body) = call(
        &first,
        &admin,
        M::POST,
        "/api/v1/sandboxes",
        Some(json!({"name": "w", "namespace": "rd-ns", "image": "busybox:1.36"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let snapshots = volume_snapshots(&client, "rd-ns");
    let foreign: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
        "metadata": {"name": "foreign", "namespace": "rd-ns"},
        "spec": {"volumeSnapshotClassName": "longhorn",
                 "source": {"persistentVolumeClaimName": "w-root-lh"}}}))
    .unwrap();
    snapshots
        .create(&Default::default(), &foreign)
        .await
        .unwrap();
    let (status, body) = call(
        &first,
        &admin,
        M::POST,
        "/api/v1/sandboxes/w/snapshot",
        Some(json!({"snapshot_name": "s", "namespace": "rd-ns"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // The writer reads its own writes at once; the other replica once its watch shows them.
    let status_of = |daemon, path| get_status(daemon, &admin, path);
    for path in [
        "/api/v1/sandboxes/w?namespace=rd-ns",
        "/api/v1/snapshots/s?namespace=rd-ns",
    ] {
        assert_eq!(status_of(&first, path).await, 200, "{path} on the writer");
        eventually(|| status_of(&second, path), 200, path).await;
    }
    for daemon in [&first, &second] {
        let (status, body) = call(
            daemon,
            &admin,
            M::GET,
            "/api/v1/snapshots?namespace=rd-ns",
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let names: Vec<&str> = body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["s"], "the foreign VolumeSnapshot is not sbx's");
    }
    // Deleted behind sbx's back: gone from both replicas.
    snapshots.delete("s", &Default::default()).await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "rd-ns");
    deployments.delete("w", &Default::default()).await.unwrap();
    for daemon in [&first, &second] {
        for path in [
            "/api/v1/sandboxes/w?namespace=rd-ns",
            "/api/v1/snapshots/s?namespace=rd-ns",
        ] {
            eventually(|| status_of(daemon, path), 404, path).await;
        }
    }
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
