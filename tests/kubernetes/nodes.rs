//! Node storage through the nodes' agents (issue 15): the service finds each node's agent as
//! an agent Pod of its configured namespace and calls it with its token for the agents'
//! audience; a real `sbx agent` process (under the RBAC of `deploy/agent.yaml`) checks that
//! token with a TokenReview and reports a real XFS pool and a real LVM volume group on loop
//! devices. The agent Pod is KWOK's on node-1: it runs in the host network, so its address
//! is node-1's, 127.0.0.1, where the agent process listens.
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use super::*;
use common::pools::{LvmGroup, XfsPool};

const NS: &str = "agent-ns";

/// An `sbx agent` process, killed on drop.
struct AgentProcess(Child);

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn storage(daemon: &Daemon, token: &str) -> (Value, Duration) {
    let started = Instant::now();
    let (status, body) = call(
        daemon,
        token,
        reqwest::Method::GET,
        "/api/v1/nodes/storage",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    (body["data"].clone(), started.elapsed())
}

fn error_of(entry: &Value) -> String {
    entry["error"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn storage_comes_from_each_nodes_agent() {
    let c = Cluster::take(&[NS]).await;
    let namespaces: Api<Namespace> = Api::all(c.client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap(),
        )
        .await
        .unwrap();
    // The service calls with the token of `caller`; `stranger` has a token of the same audience.
    let token = common::service_account_token(NS, "caller", &["sbx-agent"]).await;
    let stranger = common::service_account_token(NS, "stranger", &["sbx-agent"]).await;
    let api_token = common::service_account_token(NS, "caller", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &token).unwrap();

    // node-1's agent Pod (KWOK runs it, in the host network: at 127.0.0.1).
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let pod = json!({
        "metadata": {"name": "sbx-agent-n1", "labels": {
            "app.kubernetes.io/name": "sbx", "app.kubernetes.io/component": "agent"}},
        "spec": {"nodeName": "node-1", "hostNetwork": true,
                 "containers": [{"name": "agent", "image": "localhost/sbx:0.1.0"}]}
    });
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod).unwrap(),
    )
    .await
    .unwrap();
    let started = Instant::now();
    while pods
        .get("sbx-agent-n1")
        .await
        .unwrap()
        .status
        .and_then(|s| s.pod_ip)
        .is_none()
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "KWOK never ran the agent Pod"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // First it does not answer: a listener that accepts and says nothing.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let daemon = Daemon::start_on_kubernetes(&format!(
        "[kubernetes]\nagentNamespace = \"{NS}\"\nagentPort = {port}\nagentTokenFile = \"{}\"\nagentTimeout = \"1s\"\n",
        token_file.display()
    ));
    let admin = bootstrap_token(&c.client).await;
    let (nodes, took) = storage(&daemon, &admin).await;
    assert!(
        error_of(&nodes["node-1"]).contains(&format!("127.0.0.1:{port}: no answer in 1 s")),
        "{nodes}"
    );
    // The others answer at once: no agent there.
    for (node, entry) in nodes.as_object().unwrap() {
        if node != "node-1" {
            assert!(
                error_of(entry).contains("no sbx agent runs on this node"),
                "{nodes}"
            );
        }
    }
    assert!(
        took < Duration::from_secs(10),
        "one silent agent held the answer for {took:?}"
    );
    drop(silent);

    // Then a real agent answers there, under deploy/agent.yaml's RBAC, with real pools.
    common::apply_deploy_file("namespace.yaml", &[]).await;
    common::apply_deploy_file("agent.yaml", &["DaemonSet"]).await;
    let agent_kubeconfig = common::service_account_kubeconfig_of("sbx-agent", "sbx-agent").await;
    let xfs = XfsPool::new();
    let lvm = LvmGroup::new(&format!("sbxtest{}", std::process::id()));
    let thin_pool = format!("{}/pool", lvm.vg);
    let agent = AgentProcess(
        Command::new(common::sbx_bin())
            .args([
                "agent",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--node-name",
                "node-1",
            ])
            .arg("--disk-pool")
            .arg(&xfs.mount_point)
            .args([
                "--thin-pool",
                &thin_pool,
                "--caller",
                &format!("{NS}/caller"),
            ])
            .env("KUBECONFIG", &agent_kubeconfig)
            .spawn()
            .unwrap(),
    );
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/v1/storage");
    let started = Instant::now();
    while http.get(&url).send().await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the agent never listened"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (nodes, _) = storage(&daemon, &admin).await;
    let disks = &nodes["node-1"]["k7d_disks"];
    assert_eq!(
        disks["path"],
        xfs.mount_point.display().to_string(),
        "{nodes}"
    );
    let size = disks["size_bytes"].as_u64().unwrap();
    assert!((250 << 20..=320 << 20).contains(&size), "{disks}");
    let thin = &nodes["node-1"]["kata_thinpool"];
    if lvm.has_thin_pool {
        assert_eq!(
            (thin["vg"].as_str(), thin["lv"].as_str()),
            (Some(lvm.vg.as_str()), Some("pool")),
            "{thin}"
        );
        assert_eq!(thin["size_bytes"], 128 << 20, "{thin}");
    } else {
        // This kernel has no device-mapper: the group has no thin pool, and lvs (which ran:
        // the error is not "not installed") says so.
        assert_eq!(
            error_of(thin),
            format!("no kata thin-pool: LVM has no thin pool {thin_pool} here"),
            "{nodes}"
        );
    }

    // Nobody else gets an answer: no token, another service account's, or the caller's
    // token for the API server instead of the agents.
    for (what, bearer) in [
        ("no token", None),
        ("stranger", Some(&stranger)),
        ("API audience", Some(&api_token)),
    ] {
        let mut request = http.get(&url);
        if let Some(t) = bearer {
            request = request.bearer_auth(t);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{what}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "Unauthorized", "{what}: {body}");
    }
    let response = http.get(&url).bearer_auth(&token).send().await.unwrap();
    assert_eq!(response.status(), 200);
    // Unknown routes need a token too.
    let response = http
        .get(format!("http://127.0.0.1:{port}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);

    // The service re-reads its token (the kubelet rotates it): a refused one is that node's
    // error entry, with the agent's reason.
    std::fs::write(&token_file, &stranger).unwrap();
    let (nodes, _) = storage(&daemon, &admin).await;
    let error = error_of(&nodes["node-1"]);
    assert!(
        error.contains("HTTP 401") && error.contains("may not call this agent"),
        "{nodes}"
    );
    drop(agent);
    drop(daemon);
}

/// Internal TLS (issue 43, point 19): with `internalTls` the service writes the agents'
/// certificate to the agents' namespace and calls agents only over HTTPS with that
/// certificate checked. A real `sbx agent` serving it (the Secret's files as its `--tls-dir`,
/// as `deploy/agent.yaml` mounts them) answers; one serving plain HTTP, or another CA's
/// certificate, is that node's error entry and never sees the token.
#[tokio::test]
async fn the_service_calls_agents_over_tls_only() {
    const TLS_NS: &str = "agent-tls-ns";
    let c = Cluster::take(&[TLS_NS]).await;
    let namespaces: Api<Namespace> = Api::all(c.client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": TLS_NS}})).unwrap(),
        )
        .await
        .unwrap();
    // What deploy/rbac.yaml grants in `sbx-agent`, in this test's agents' namespace.
    common::grant_agents_role_in(TLS_NS).await;
    let token = common::service_account_token(TLS_NS, "caller", &["sbx-agent"]).await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &token).unwrap();
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), TLS_NS);
    let pod = json!({
        "metadata": {"name": "sbx-agent-n1", "labels": {
            "app.kubernetes.io/name": "sbx", "app.kubernetes.io/component": "agent"}},
        "spec": {"nodeName": "node-1", "hostNetwork": true,
                 "containers": [{"name": "agent", "image": "localhost/sbx:0.1.0"}]}
    });
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod).unwrap(),
    )
    .await
    .unwrap();
    let started = Instant::now();
    while pods
        .get("sbx-agent-n1")
        .await
        .unwrap()
        .status
        .and_then(|s| s.pod_ip)
        .is_none()
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "KWOK never ran the agent Pod"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let daemon = Daemon::start_on_kubernetes(&format!(
        "[kubernetes]\ninternalTls = true\ninternalListen = \"127.0.0.1:0\"\nagentNamespace = \"{TLS_NS}\"\nagentPort = {port}\nagentTokenFile = \"{}\"\nagentTimeout = \"2s\"\n",
        token_file.display()
    ));
    let admin = bootstrap_token(&c.client).await;
    // The agents' Secret, as the agent Pods mount it.
    let secrets: Api<Secret> = Api::namespaced(c.client.clone(), TLS_NS);
    let secret = secrets.get("sbx-agent-tls").await.unwrap().data.unwrap();
    let ours = dir.path().join("ours");
    std::fs::create_dir(&ours).unwrap();
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        std::fs::write(ours.join(key), &secret[key].0).unwrap();
    }
    let theirs = dir.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    let other = sbx::shared::tls::generate().unwrap();
    std::fs::write(theirs.join("tls.crt"), &other.agent.cert_pem).unwrap();
    std::fs::write(theirs.join("tls.key"), &other.agent.key_pem).unwrap();
    std::fs::write(theirs.join("ca.crt"), &other.ca_pem).unwrap();
    let agent_kubeconfig = common::service_account_kubeconfig_of(TLS_NS, "agent").await;
    // The agent may review tokens (deploy/agent.yaml's ClusterRole, bound to this account).
    common::apply_deploy_file("namespace.yaml", &[]).await;
    common::apply_deploy_file("agent.yaml", &["DaemonSet"]).await;
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(c.client.clone());
    let binding = json!({
        "metadata": {"name": "sbx-agent-tls-test"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sbx-agent"},
        "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": TLS_NS}]
    });
    let _ = bindings
        .delete("sbx-agent-tls-test", &Default::default())
        .await;
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(binding).unwrap(),
        )
        .await
        .unwrap();
    let run_agent = |tls_dir: Option<&std::path::Path>| {
        let mut command = Command::new(common::sbx_bin());
        command
            .args(["agent", "--listen", &format!("127.0.0.1:{port}")])
            .args([
                "--node-name",
                "node-1",
                "--caller",
                &format!("{TLS_NS}/caller"),
            ])
            .arg("--disk-pool")
            .arg(dir.path().join("no-pool"))
            .env("KUBECONFIG", &agent_kubeconfig);
        if let Some(tls_dir) = tls_dir {
            command.arg("--tls-dir").arg(tls_dir);
        }
        AgentProcess(command.spawn().unwrap())
    };
    let wait_listening = || {
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the agent never listened"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };

    // An agent with the Secret's certificate: answered over TLS.
    let agent = run_agent(Some(&ours));
    wait_listening();
    let (nodes, _) = storage(&daemon, &admin).await;
    assert!(nodes["node-1"].get("error").is_none(), "{nodes}");
    assert!(nodes["node-1"].get("k7d_disks").is_some(), "{nodes}");
    drop(agent);

    // Plain HTTP, or another CA's certificate: the node's error entry.
    for (tls_dir, why) in [
        (None, "sbx agent at"),
        (Some(theirs.as_path()), "UnknownIssuer"),
    ] {
        let agent = run_agent(tls_dir);
        wait_listening();
        let (nodes, _) = storage(&daemon, &admin).await;
        let error = error_of(&nodes["node-1"]);
        assert!(
            error.contains(why) && !error.contains("HTTP 401"),
            "{nodes}"
        );
        drop(agent);
    }
    let _ = bindings
        .delete("sbx-agent-tls-test", &Default::default())
        .await;
    drop(daemon);
}
