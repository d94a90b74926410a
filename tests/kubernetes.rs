//! `sbx serve --platform kubernetes` against a real kube-apiserver and etcd
//! (`scripts/k8s-testenv`, started by `scripts/test`, which exports SBX_TEST_KUBECONFIG): the
//! service's state lives in the cluster — keys in a Secret, the first admin token in another,
//! tenants as Tenant objects with labelled namespaces, role bindings in a ConfigMap, node
//! dedication as a label and a taint — and survives the daemon. The tests read the cluster
//! directly with kube-rs to check what the daemon wrote.
mod common;

use std::time::{Duration, Instant};

use common::{Daemon, call};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, ResourceQuota, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

/// The tests share one API server and its cluster-wide objects: one at a time.
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn kubeconfig() -> String {
    std::env::var("SBX_TEST_KUBECONFIG").expect(
        "SBX_TEST_KUBECONFIG is not set: run scripts/test, or `eval \"$(scripts/k8s-testenv start)\"` \
         and export SBX_TEST_KUBECONFIG=$KUBECONFIG",
    )
}

async fn cluster() -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig()).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    kube::Client::try_from(config).unwrap()
}

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

async fn bootstrap_token(client: &kube::Client) -> String {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    let secret = secrets.get("sbx-bootstrap-admin").await.unwrap();
    String::from_utf8(secret.data.unwrap()["token"].0.clone())
        .unwrap()
        .trim()
        .to_string()
}

fn start() -> Daemon {
    Daemon::start_with_env(
        &["--platform", "kubernetes"],
        &[("KUBECONFIG", kubeconfig().as_str())],
    )
}

#[tokio::test]
async fn identity_and_tenancy_live_in_the_cluster() {
    use reqwest::Method as M;
    let _one = CLUSTER.lock().await;
    let client = cluster().await;
    reset(&client).await;
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
    let started = Instant::now();
    while call(&replica, &token, M::GET, "/api/v1/tenants/acme", None)
        .await
        .0
        != 200
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the replica never saw the key"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
    let started = Instant::now();
    while call(&replica, &token, M::GET, "/api/v1/auth/whoami", None)
        .await
        .0
        != 401
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the revoked key still works on the replica"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(replica);
    let (status, _) = call(&daemon, &admin, M::DELETE, "/api/v1/tenants/acme", None).await;
    assert_eq!(status, 200);
    assert!(tenants(&client).get_opt("acme").await.unwrap().is_none());
    reset(&client).await;
}

#[tokio::test]
async fn sandboxes_are_deployments() {
    use reqwest::Method as M;
    let _one = CLUSTER.lock().await;
    let client = cluster().await;
    reset(&client).await;
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
    // This test environment has no controllers and no kubelet: the test plays them and marks
    // the Deployment's replica ready, as the ReplicaSet controller would.
    let ready = json!({"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}});
    deployments
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&ready))
        .await
        .unwrap();
    let (_, body) = get("web").await;
    assert_eq!(
        (
            body["data"]["status"].as_str(),
            body["data"]["ready"].as_str()
        ),
        (Some("Running"), Some("True")),
        "{body}"
    );

    // Its Pod, as a kubelet would report it (the test creates and reports it): restarts are
    // counted and a crash loop reads Failed with the kubelet's reason.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "sb-ns");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-abc12", "labels": {"sbx.io/sandbox": "web", "app.kubernetes.io/managed-by": "sbx"}},
        "spec": {"containers": [{"name": "sandbox", "image": "busybox:1.36"}]},
    }))
    .unwrap();
    pods.create(&Default::default(), &pod).await.unwrap();
    let crash = json!({"status": {"phase": "Running", "containerStatuses": [{
        "name": "sandbox", "image": "busybox:1.36", "imageID": "", "ready": false, "restartCount": 2,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container"}},
    }]}});
    pods.patch_status("web-abc12", &PatchParams::default(), &Patch::Merge(&crash))
        .await
        .unwrap();
    let (_, body) = get("web").await;
    assert_eq!(body["data"]["restarts"], 2, "{body}");
    assert_eq!(body["data"]["status"], "Failed", "{body}");
    assert!(
        body["data"]["error_message"]
            .as_str()
            .unwrap()
            .starts_with("CrashLoopBackOff: back-off"),
        "{body}"
    );
    pods.delete("web-abc12", &Default::default()).await.unwrap();
    let (_, body) = get("web").await;
    assert_eq!(
        (
            body["data"]["status"].as_str(),
            body["data"]["restarts"].as_i64()
        ),
        (Some("Running"), Some(0)),
        "{body}"
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
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fc", "web"]);

    // Pause scales to zero, resume back to one; pausing a paused sandbox is 409.
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
    assert_eq!(pause("/api/v1/sandboxes/web/pause").await.0, 409);
    assert_eq!(pause("/api/v1/sandboxes/web/resume").await.0, 200);
    assert_eq!(deployments.get("web").await.unwrap().spec.replicas, Some(1));
    // Exec needs a node: 503 on this platform for now.
    let (status, _) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/sandboxes/web/exec?namespace=sb-ns",
        Some(json!({"command": "true"})),
    )
    .await;
    assert_eq!(status, 503);
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
    assert_eq!(get("web").await.0, 404);
    reset(&client).await;
}

#[tokio::test]
async fn losing_the_api_server_later_is_503_in_the_envelope() {
    // An API server of this test's own (its own --dir), stopped under a running daemon.
    let dir = tempfile::tempdir().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/k8s-testenv");
    let state = dir.path().join("k8s");
    let out = std::process::Command::new(script)
        .args(["start", "--dir"])
        .arg(&state)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
    let stopped = std::process::Command::new(script)
        .args(["stop", "--dir"])
        .arg(&state)
        .output()
        .unwrap();
    assert!(stopped.status.success());
    // Keys are served from the daemon's copy; what needs the cluster answers 503, saying why.
    let (status, body) = call(
        &daemon,
        token,
        reqwest::Method::GET,
        "/api/v1/sandboxes?all_namespaces=true",
        None,
    )
    .await;
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
