//! Remote install (issue 15, spec "Remote install") on the simulated cluster: off by default,
//! the body and node rules, the pinned image, operations that every replica reads and that
//! outlive the daemon, and the bound on a node that never reports. The installer DaemonSet
//! here selects no node (KWOK would only pretend to run it); the real installer runs on the
//! real node in tests/in_cluster.rs.
use k8s_openapi::api::apps::v1::DaemonSet;
use kube::api::PostParams;

use super::*;

const NS: &str = "inst-ns";
const PINNED: &str =
    "localhost/sbx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn config(timeout: &str) -> String {
    format!(
        "[kubernetes.install]\nenabled = true\nimage = \"{PINNED}\"\nnamespace = \"{NS}\"\n\
         timeout = \"{timeout}\"\n"
    )
}

/// The installer DaemonSet of deploy/installer.yaml in the test's namespace, with its image,
/// on no node.
fn installer(image: &str) -> DaemonSet {
    let labels =
        json!({"app.kubernetes.io/name": "sbx", "app.kubernetes.io/component": "installer"});
    serde_json::from_value(json!({
        "metadata": {"name": "sbx-installer", "namespace": NS},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"sbx-test/no-such-label": "x"},
                    "initContainers": [{"name": "install", "image": image,
                        "args": ["agent", "install"]}],
                    "containers": [{"name": "installed", "image": image, "args": ["agent", "idle"]}],
                },
            },
        },
    }))
    .unwrap()
}

async fn node_label(client: &kube::Client, node: &str) -> Option<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .get(node)
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap_or_default()
        .get("sbx.io/install")
        .cloned()
}

#[tokio::test]
async fn remote_install_is_off_until_configured_then_labels_nodes_under_recorded_operations() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&[NS]).await;
    let client = cluster.client.clone();

    // Off by default: both routes are 404, for an admin too.
    let off = Daemon::start_on_kubernetes("");
    let admin = bootstrap_token(&client).await;
    let (status, body) = call(
        &off,
        &admin,
        M::POST,
        "/api/v1/install",
        Some(json!({"nodes": ["node-1"]})),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("NotFound")),
        "{body}"
    );
    let (status, _) = call(&off, &admin, M::GET, "/api/v1/install/install-1-abc", None).await;
    assert_eq!(status, 404);
    drop(off);

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap(),
        )
        .await
        .unwrap();
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), NS);
    daemon_sets
        .create(&PostParams::default(), &installer(PINNED))
        .await
        .unwrap();
    // A replica of sbx serve on node-1 (KWOK runs it).
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let server: Pod = serde_json::from_value(json!({
        "metadata": {"name": "sbx-server", "labels": {"app.kubernetes.io/name": "sbx",
            "app.kubernetes.io/component": "api"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "sbx", "image": "localhost/sbx:0.1.0"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &server).await.unwrap();

    let daemon = Daemon::start_on_kubernetes(&config("4s"));
    let post = |body: Value| {
        let (daemon, admin) = (&daemon, admin.clone());
        async move { call(daemon, &admin, M::POST, "/api/v1/install", Some(body)).await }
    };

    // Admin only; the body is exactly {nodes: [...]}.
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/keys",
        Some(json!({"name": "op", "role": "operator", "expires_days": 1})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let operator = body["data"]["token"].as_str().unwrap().to_string();
    let (status, body) = call(
        &daemon,
        &operator,
        M::POST,
        "/api/v1/install",
        Some(json!({"nodes": ["node-2"]})),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    for (bad, word) in [
        (
            json!({"nodes": ["node-2"], "playbook": "site.yml"}),
            "playbook",
        ),
        (
            json!({"nodes": ["node-2"], "image": "evil:latest"}),
            "image",
        ),
        (json!({"nodes": []}), "at least one"),
        (json!({}), "nodes"),
    ] {
        let (status, body) = post(bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(word),
            "{bad}: {body}"
        );
    }
    let (status, body) = post(json!({"nodes": ["node-2", "no-such-node"]})).await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-node"),
        "{body}"
    );
    // node-1 runs sbx serve.
    let (status, body) = post(json!({"nodes": ["node-1"]})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("Conflict")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sbx serve"),
        "{body}"
    );
    // The installer runs another image than the pinned one: 500, and nothing labelled.
    let drifted = json!({"spec": {"template": {"spec": {"initContainers": [
        {"name": "install", "image": "localhost/sbx:0.1.0"}]}}}});
    daemon_sets
        .patch(
            "sbx-installer",
            &PatchParams::default(),
            &Patch::Strategic(&drifted),
        )
        .await
        .unwrap();
    let (status, body) = post(json!({"nodes": ["node-2"]})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (500, Some("InternalServerError")),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("drift") && message.contains(PINNED),
        "{body}"
    );
    assert_eq!(node_label(&client, "node-2").await, None);
    daemon_sets
        .delete("sbx-installer", &DeleteParams::default())
        .await
        .unwrap();
    daemon_sets
        .create(&PostParams::default(), &installer(PINNED))
        .await
        .unwrap();

    // 202 with the operation; the node is in the installer pool, pending.
    let (status, body) = post(json!({"nodes": ["node-2", "node-2"]})).await;
    assert_eq!(status, 202, "{body}");
    let operation = body["data"]["operation"].as_str().unwrap().to_string();
    assert_eq!(body["data"]["nodes"], json!(["node-2"]), "{body}");
    assert_eq!(
        node_label(&client, "node-2").await.as_deref(),
        Some(operation.as_str())
    );
    let (status, body) = post(json!({"nodes": ["node-2"]})).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&operation),
        "{body}"
    );
    let path = format!("/api/v1/install/{operation}");
    let (status, body) = call(&daemon, &admin, M::GET, &path, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["data"],
        json!({"operation": operation, "nodes": {"node-2": {"state": "pending", "message": null}}})
    );
    let (status, _) = call(
        &daemon,
        &admin,
        M::GET,
        "/api/v1/install/install-1-abc",
        None,
    )
    .await;
    assert_eq!(status, 404);

    // Another replica reads it; so does the daemon after a restart. A node that never
    // reports fails after the configured bound and leaves the installer pool.
    let other = Daemon::start_on_kubernetes(&config("4s"));
    let (status, body) = call(&other, &admin, M::GET, &path, None).await;
    assert_eq!(
        (status, &body["data"]["nodes"]["node-2"]["state"]),
        (200, &json!("pending")),
        "{body}"
    );
    drop(daemon);
    drop(other);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let restarted = Daemon::start_on_kubernetes(&config("4s"));
    let (status, body) = call(&restarted, &admin, M::GET, &path, None).await;
    assert_eq!(status, 200, "{body}");
    let node = &body["data"]["nodes"]["node-2"];
    assert_eq!(node["state"], "failed", "{body}");
    assert!(
        node["message"]
            .as_str()
            .unwrap()
            .contains("did not finish within 4 s"),
        "{body}"
    );
    assert_eq!(node_label(&client, "node-2").await, None);
    drop(restarted);
    drop(cluster);
}
