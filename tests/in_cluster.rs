//! sbx as an operator runs it on Kubernetes: deployed with `kubectl apply -k deploy/` into the
//! test cluster (`tests/common/in_cluster.rs`), two replicas under the RBAC of `deploy/` on
//! the cluster's real node (a kubelet with containerd and runc, `scripts/k8s-testenv`), its
//! sandboxes real containers there. What KWOK cannot show: before_script gating readiness, a
//! crash loop, an unpullable image and a Pod that cannot start as a user sees them, pause
//! removing the container, a replica killed during creates, and the CLI's quick start through
//! the Service. The behavioural suite's lifecycle also runs here (`tests/behaviour.rs`).
mod common;

use std::time::{Duration, Instant};

use common::in_cluster::{self, Deployed, Replicas, kubectl};
use common::{cluster, test_registry};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use sbx::cli::client::{ApiClient, ClientError};
use sbx::shared::models::sandbox::{
    CreateSandboxRequest, ExecRequest, PauseRequest, ResourceLimits, ResumeRequest, Sandbox,
    SandboxStatus,
};
use sbx::shared::models::tenant::{CreateTenantRequest, TenantSpec};

/// One scenario at a time: they share the deployment and the node.
static NODE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The deployed service up, an admin client of it, and a namespace of the scenario's own
/// (its sandboxes deleted at the end, whether the scenario passes or not).
struct Scenario {
    deployed: &'static Deployed,
    client: ApiClient,
    token: String,
    namespace: String,
    _replicas: Replicas,
    _node: tokio::sync::MutexGuard<'static, ()>,
}

impl Scenario {
    /// A scenario whose namespace a tenant of the same name owns: the deployment runs in
    /// production mode, where sandboxes live only in a tenant's namespaces (issue 43, 12).
    async fn new(name: &str) -> Scenario {
        let s = Scenario::untenanted(name).await;
        s.client
            .create_tenant(&CreateTenantRequest {
                name: Some(s.namespace.clone()),
                spec: Some(
                    serde_json::from_value(serde_json::json!({"namespaces": [s.namespace]}))
                        .unwrap(),
                ),
                labels: None,
            })
            .await
            .unwrap();
        s
    }

    /// A scenario whose namespace no tenant owns yet (the scenario makes its own).
    async fn untenanted(name: &str) -> Scenario {
        let node = NODE.lock().await;
        let deployed = in_cluster::deployed().await;
        let replicas = deployed.up().await;
        let (token, client) = in_cluster::admin(deployed).await;
        Scenario {
            deployed,
            client,
            token,
            namespace: format!("ic-{name}-{}", std::process::id() % 100_000),
            _replicas: replicas,
            _node: node,
        }
    }

    fn request(&self, name: &str, image: &str) -> CreateSandboxRequest {
        CreateSandboxRequest {
            name: Some(name.into()),
            namespace: Some(self.namespace.clone()),
            image: Some(image.into()),
            limits: Some(ResourceLimits {
                cpu: Some("250m".into()),
                memory: Some("128Mi".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn busybox(&self) -> String {
        format!("{}/sbx-test/busybox:latest", test_registry())
    }

    async fn get(&self, name: &str) -> Sandbox {
        self.client
            .get_sandbox(name, &self.namespace)
            .await
            .unwrap_or_else(|e| panic!("get {name}: {e}"))
    }

    /// Waits (up to 3 minutes) until `done` holds of the sandbox; the last record.
    async fn until(&self, name: &str, what: &str, done: impl Fn(&Sandbox) -> bool) -> Sandbox {
        let started = Instant::now();
        loop {
            let s = self.get(name).await;
            if done(&s) {
                return s;
            }
            assert!(
                started.elapsed() < Duration::from_secs(180),
                "{name} never {what}: {s:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn running(&self, name: &str) -> Sandbox {
        self.until(name, "Running and ready", |s| {
            s.status == SandboxStatus::Running && s.ready == "True"
        })
        .await
    }

    async fn exec(&self, name: &str, command: &str) -> (i32, String) {
        let r = self
            .client
            .exec_sandbox(
                name,
                &self.namespace,
                &ExecRequest {
                    command: Some(command.into()),
                    timeout_seconds: Some(60),
                },
            )
            .await
            .unwrap_or_else(|e| panic!("exec in {name}: {e}"));
        (r.exit_code, r.stdout)
    }

    /// The network stats the real node's kubelet reports for this scenario's Pods (through
    /// the API server's node proxy, as the test cluster's admin), for a failure's message.
    fn kubelet_network_stats(&self) -> String {
        let node = std::env::var("SBX_TEST_REAL_NODE").unwrap();
        let summary = kubectl(
            &self.deployed.kubectl,
            &[
                "get",
                "--raw",
                &format!("/api/v1/nodes/{node}/proxy/stats/summary"),
            ],
        );
        let summary: serde_json::Value = serde_json::from_str(&summary).unwrap_or_default();
        let pods: Vec<String> = summary["pods"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["podRef"]["namespace"] == self.namespace.as_str())
            .map(|p| format!("{} {}", p["podRef"]["name"], p["network"]))
            .collect();
        pods.join("; ")
    }

    /// The Pods of a sandbox, from the API server.
    async fn pods(&self, name: &str) -> Vec<Pod> {
        let pods: Api<Pod> = Api::namespaced(cluster().await, &self.namespace);
        pods.list(&ListParams::default().labels(&format!("sbx.io/sandbox={name}")))
            .await
            .unwrap()
            .items
    }
}

impl Drop for Scenario {
    fn drop(&mut self) {
        // Its tenant, when it has one of its name, then the namespace with its sandboxes
        // (the Deployments, their Pods on the node).
        drop(TenantGone {
            kubectl: self.deployed.kubectl.clone(),
            name: self.namespace.clone(),
        });
        let _ = std::process::Command::new(&self.deployed.kubectl)
            .arg("--kubeconfig")
            .arg(common::kubeconfig())
            .args([
                "delete",
                "namespace",
                &self.namespace,
                "--wait=true",
                "--timeout=120s",
            ])
            .output();
    }
}

/// Real containers: the limits in their cgroup, before_script gating readiness, pause taking
/// the container away and resume bringing it back.
#[tokio::test]
async fn sandboxes_are_real_containers_on_the_node() {
    let s = Scenario::new("real").await;
    let mut request = s.request("gated", &s.busybox());
    // The script runs as the container starts; the sandbox is Ready only once it passed.
    request.before_script = Some("sleep 3; echo done > /tmp/before-script".into());
    s.client.create_sandbox(&request).await.unwrap();
    let early = s.get("gated").await;
    assert_eq!(early.ready, "False", "{early:?}");
    s.running("gated").await;
    assert_eq!(
        s.exec("gated", "cat /tmp/before-script").await,
        (0, "done\n".into())
    );
    // The Pod runs on the real node, with the requested memory limit in its cgroup.
    let pods = s.pods("gated").await;
    let node = pods[0].spec.as_ref().unwrap().node_name.clone().unwrap();
    assert_eq!(node, std::env::var("SBX_TEST_REAL_NODE").unwrap());
    let (code, limit) = s
        .exec(
            "gated",
            "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes",
        )
        .await;
    assert_eq!((code, limit.trim()), (0, "134217728"));

    // Pause: scaled to 0, the Pod (and so the container) gone; resume: a new one runs.
    s.client
        .pause_sandbox(
            "gated",
            &PauseRequest {
                namespace: Some(s.namespace.clone()),
                snapshot: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(s.get("gated").await.status, SandboxStatus::Paused);
    let started = Instant::now();
    while !s.pods("gated").await.is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the Pod outlived the pause"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    s.client
        .resume_sandbox(
            "gated",
            &ResumeRequest {
                namespace: Some(s.namespace.clone()),
            },
        )
        .await
        .unwrap();
    s.running("gated").await;
    assert_eq!(s.exec("gated", "echo back").await, (0, "back\n".into()));
}

/// The bytes a sandbox sends are metered (issue 14, defect 2): the leader replica reads its
/// Pod's `txBytes` from the node's kubelet (stats summary, as `nodes/stats` under the RBAC
/// of `deploy/`) into `sbx_usage_egress_bytes_total`; the other replica exports no usage.
/// The traffic goes from one sandbox to another on the node.
#[tokio::test]
async fn egress_is_metered_from_the_kubelet() {
    let s = Scenario::new("egress").await;
    for name in ["sink", "sender"] {
        s.client
            .create_sandbox(&s.request(name, &s.busybox()))
            .await
            .unwrap();
    }
    s.running("sink").await;
    s.running("sender").await;
    let sink_ip = s.pods("sink").await[0]
        .status
        .as_ref()
        .and_then(|st| st.pod_ip.clone())
        .unwrap();
    // busybox nc exits when either side closes: the sink's stdin is a pipe that stays open,
    // and it writes down what it received. Everything it holds is redirected, so that the
    // exec ends while it runs.
    let (code, out) = s
        .exec(
            "sink",
            "sh -c 'sleep 300 | nc -l -p 9000 | wc -c > /tmp/got' </dev/null >/dev/null 2>&1 & echo listening",
        )
        .await;
    assert_eq!((code, out.as_str()), (0, "listening\n"));
    // The sender counts what left its eth0 (the listener may take a moment to start).
    let (code, out) = s
        .exec(
            "sender",
            &format!(
                "tx() {{ cat /sys/class/net/eth0/statistics/tx_bytes; }}; before=$(tx); \
                 for i in 1 2 3 4 5 6 7 8 9 10; do \
                 dd if=/dev/zero bs=64k count=64 2>/dev/null | nc -w 5 {sink_ip} 9000 && break; \
                 sleep 1; done; echo $(( $(tx) - before ))"
            ),
        )
        .await;
    assert_eq!(code, 0, "{out}");
    let sent: u64 = out.trim().parse().unwrap_or_else(|_| panic!("{out}"));
    assert!(sent >= 4 << 20, "the sender's eth0 sent {sent} bytes");
    let started = Instant::now();
    loop {
        let (_, got) = s.exec("sink", "cat /tmp/got 2>/dev/null").await;
        if got.trim() == (4 << 20).to_string() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the sink received {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let series = |ip: String, token: String, namespace: String| async move {
        let text = reqwest::Client::new()
            .get(format!("http://{ip}:8080/metrics"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter(|l| {
                l.starts_with("sbx_usage_egress_bytes_total{")
                    && l.contains(&format!("namespace=\"{namespace}\""))
                    && l.contains("sandbox=\"sender\"")
            })
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .collect::<Vec<f64>>()
    };
    // The kubelet's counters are refreshed every 10-15 s (cAdvisor's housekeeping).
    let started = Instant::now();
    loop {
        let mut found = Vec::new();
        for ip in s.deployed.pod_ips() {
            found.push(series(ip, s.token.clone(), s.namespace.clone()).await);
        }
        let metered: Vec<&Vec<f64>> = found.iter().filter(|v| !v.is_empty()).collect();
        assert!(metered.len() <= 1, "both replicas accrue usage: {found:?}");
        if metered.first().is_some_and(|v| v[0] >= (4 << 20) as f64) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "4 MiB sent, never metered: {found:?}; the kubelet's stats of the namespace's Pods: \
             {}; the replicas' logs:\n{}",
            s.kubelet_network_stats(),
            s.deployed.logs()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// kql's root volume carries data through every snapshot path (issue 14): the test cluster's
/// CSI driver (StorageClass and VolumeSnapshotClass `longhorn`: volumes are directories on the
/// node, snapshots copies, `scripts/k8s-testenv`) behind the real external-provisioner,
/// csi-snapshotter and snapshot-controller. A file written before a named snapshot is in its
/// restore and one written after is not; a fork has what its source had, and neither sees
/// the other's later writes; pause with a snapshot then restore keeps the files; GC removes
/// only fork leftovers; snapshotStorage counts the sizes the driver reports.
#[tokio::test]
async fn volumes_carry_data_through_snapshots_forks_and_restores() {
    use reqwest::Method as M;
    let s = Scenario::untenanted("data").await;
    let ns = s.namespace.clone();
    let post = |path: String, body: serde_json::Value| {
        let (url, token) = (s.deployed.url.clone(), s.token.clone());
        async move { common::call_at(&url, &token, M::POST, &path, Some(body)).await }
    };
    let tenant = format!("{ns}-t");
    let (status, body) = post(
        "/api/v1/tenants".into(),
        // 12Mi of snapshots: room for two snapshots of the 8 MiB below (the check is on what
        // is stored before each), not for a third.
        serde_json::json!({"name": tenant, "spec": {"namespaces": [ns],
                           "quotas": {"snapshotStorage": "12Mi"}}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let _tenant = TenantGone {
        kubectl: s.deployed.kubectl.clone(),
        name: tenant.clone(),
    };
    s.client
        .create_sandbox(&s.request("src", &s.busybox()))
        .await
        .unwrap();
    s.running("src").await;
    let write = "echo before > /workspace/a && dd if=/dev/urandom of=/workspace/blob bs=1M count=8 2>/dev/null && md5sum /workspace/blob";
    let (code, sum) = s.exec("src", write).await;
    assert_eq!(code, 0, "{sum}");
    let (status, body) = post(
        "/api/v1/sandboxes/src/snapshot".into(),
        serde_json::json!({"snapshot_name": "snap1", "namespace": ns}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(s.exec("src", "echo after > /workspace/b").await.0, 0);

    // The restore of snap1: the file and the blob from before it, not the one after.
    let (status, body) = post(
        "/api/v1/snapshots/snap1/restore".into(),
        serde_json::json!({"new_sandbox_name": "restored", "namespace": ns}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    s.running("restored").await;
    let files = "cat /workspace/a; md5sum /workspace/blob; ls /workspace";
    let (_, seen) = s.exec("restored", files).await;
    assert_eq!(seen, format!("before\n{sum}a\nblob\n"));

    // A fork has everything written before it; afterwards neither sees the other's writes.
    let (status, body) = post(
        "/api/v1/sandboxes/src/fork".into(),
        serde_json::json!({"new_name": "fork", "namespace": ns}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    s.running("fork").await;
    assert_eq!(
        s.exec("fork", "cat /workspace/a /workspace/b").await,
        (0, "before\nafter\n".into())
    );
    assert_eq!(s.exec("fork", "echo mine > /workspace/c").await.0, 0);
    assert_eq!(s.exec("src", "echo later > /workspace/d").await.0, 0);
    assert_eq!(s.exec("src", "ls /workspace").await.1, "a\nb\nblob\nd\n");
    assert_eq!(s.exec("fork", "ls /workspace").await.1, "a\nb\nblob\nc\n");

    // Pause with a snapshot, then restore it: the files are kept.
    s.client
        .pause_sandbox(
            "src",
            &PauseRequest {
                namespace: Some(ns.clone()),
                snapshot: Some("paused".into()),
            },
        )
        .await
        .unwrap();
    let (status, body) = post(
        "/api/v1/snapshots/paused/restore".into(),
        serde_json::json!({"new_sandbox_name": "resumed", "namespace": ns}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    s.running("resumed").await;
    let (_, seen) = s
        .exec(
            "resumed",
            "cat /workspace/a /workspace/b /workspace/d; md5sum /workspace/blob",
        )
        .await;
    assert_eq!(seen, format!("before\nafter\nlater\n{sum}"));

    // GC: a fork snapshot left behind (as by a fork cut short) goes; named and pause ones stay.
    let leftover = serde_json::json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
        "metadata": {"name": "src-fork-1", "namespace": ns,
                     "labels": {"app.kubernetes.io/managed-by": "sbx", "sbx.io/sandbox": "src"},
                     "annotations": {"sbx.io/kind": "fork", "sbx.io/source-sandbox": "src"}},
        "spec": {"volumeSnapshotClassName": "longhorn",
                 "source": {"persistentVolumeClaimName": "src-root-lh"}}});
    let file = std::env::temp_dir().join(format!("sbx-leftover-{}.json", std::process::id()));
    std::fs::write(&file, leftover.to_string()).unwrap();
    kubectl(
        &s.deployed.kubectl,
        &["apply", "-f", file.to_str().unwrap()],
    );
    let _ = std::fs::remove_file(&file);
    let (status, body) = post(
        "/api/v1/snapshots/gc".into(),
        serde_json::json!({"namespace": ns, "keep_fork_for": "0s"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let deleted: Vec<&str> = body["data"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["deleted"] == true)
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(deleted, ["src-fork-1"], "{body}");
    let (status, body) = common::call_at(
        &s.deployed.url,
        &s.token,
        M::GET,
        &format!("/api/v1/snapshots?namespace={ns}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut names: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["paused", "snap1"], "{body}");

    // snapshotStorage counts the sizes the driver reports: snap1 and paused hold the 8 MiB
    // blob each, above the 12Mi quota, which refuses the next snapshot.
    let size = |name: &str| {
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()["size_bytes"]
            .as_u64()
            .unwrap()
    };
    assert!(size("snap1") >= 8 << 20, "{body}");
    assert!(size("paused") >= 8 << 20, "{body}");
    let (status, body) = post(
        "/api/v1/sandboxes/fork/snapshot".into(),
        serde_json::json!({"snapshot_name": "one-more", "namespace": ns}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("QuotaExceeded")),
        "{body}"
    );
    // The tenant's status says so once a spec change has it rewritten (any replica may
    // answer the read: each shows what the store holds).
    let (status, body) = common::call_at(
        &s.deployed.url,
        &s.token,
        M::PATCH,
        &format!("/api/v1/tenants/{tenant}"),
        Some(serde_json::json!({"spec": {"quotas": {"snapshotStorage": "1Gi"}}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let started = Instant::now();
    loop {
        let status = s.client.get_tenant(&tenant).await.unwrap().status;
        let stored = sbx::shared::quantity::Quantity::parse(&status.usage.snapshot_storage)
            .unwrap()
            .value_ceil();
        if status.observed_generation == 2 && stored >= 16 << 20 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the tenant's status: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What a user sees when a sandbox cannot run: the kubelet's reasons in `error_message`.
#[tokio::test]
async fn failures_say_why() {
    let s = Scenario::new("fail").await;
    // An image that does not exist: Failed, saying the pull failed.
    let missing = format!("{}/sbx-test/no-such-image:latest", test_registry());
    s.client
        .create_sandbox(&s.request("unpullable", &missing))
        .await
        .unwrap();
    let failed = s
        .until("unpullable", "Failed", |x| {
            x.status == SandboxStatus::Failed
        })
        .await;
    assert!(
        failed.error_message.contains("ErrImagePull")
            || failed.error_message.contains("ImagePullBackOff"),
        "{failed:?}"
    );
    assert!(failed.error_message.contains("no-such-image"), "{failed:?}");

    // A container that keeps failing (its before_script fails, so the kubelet kills and
    // restarts it): Failed, in a crash loop.
    let mut request = s.request("crashing", &s.busybox());
    request.before_script = Some("exit 1".into());
    s.client.create_sandbox(&request).await.unwrap();
    let crashing = s
        .until("crashing", "Failed", |x| x.status == SandboxStatus::Failed)
        .await;
    assert!(
        crashing.error_message.contains("CrashLoopBackOff"),
        "{crashing:?}"
    );

    // A Pod the node cannot start at all (its RuntimeClass names a handler the node's
    // containerd lacks): Pending, with the kubelet's reason rather than silence.
    let classes = RuntimeClassSwap::new("kata-fc", "no-such-handler").await;
    let mut request = s.request("nohandler", &s.busybox());
    request.backend = Some("kata-firecracker-devmapper".into());
    s.client.create_sandbox(&request).await.unwrap();
    let pending = s
        .until("nohandler", "Pending with a reason", |x| {
            x.status == SandboxStatus::Pending && !x.error_message.is_empty()
        })
        .await;
    assert!(
        pending.error_message.contains("FailedCreatePodSandBox")
            && pending.error_message.contains("no-such-handler"),
        "{pending:?}"
    );
    drop(classes);
}

/// A RuntimeClass replaced by one with another handler while the value lives (handlers are
/// immutable: delete and create), the original put back when it drops.
struct RuntimeClassSwap {
    original: k8s_openapi::api::node::v1::RuntimeClass,
}

impl RuntimeClassSwap {
    async fn new(name: &str, handler: &str) -> RuntimeClassSwap {
        use k8s_openapi::api::node::v1::RuntimeClass;
        let api: Api<RuntimeClass> = Api::all(cluster().await);
        let original = api.get(name).await.unwrap();
        replace_runtime_class(&api, name, handler).await;
        RuntimeClassSwap { original }
    }
}

async fn replace_runtime_class(
    api: &Api<k8s_openapi::api::node::v1::RuntimeClass>,
    name: &str,
    handler: &str,
) {
    use k8s_openapi::api::node::v1::RuntimeClass;
    let _ = api.delete(name, &Default::default()).await;
    let started = Instant::now();
    while api.get_opt(name).await.unwrap().is_some() {
        assert!(started.elapsed() < Duration::from_secs(30));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let class: RuntimeClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": name}, "handler": handler,
    }))
    .unwrap();
    api.create(&Default::default(), &class).await.unwrap();
}

impl Drop for RuntimeClassSwap {
    fn drop(&mut self) {
        let name = self.original.metadata.name.clone().unwrap();
        let handler = self.original.handler.clone();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async {
                    let api = Api::all(cluster().await);
                    replace_runtime_class(&api, &name, &handler).await;
                })
        })
        .join()
        .unwrap();
    }
}

/// One replica killed while creates go on in a tenant with a quota: the other keeps
/// answering, the quota and leader Leases move to live replicas, and every sandbox asked for
/// exists exactly once (a create cut off by the kill is retried by the client: 201, or 400
/// when the first attempt had made it); the quota still counts right.
#[tokio::test]
async fn a_replica_lost_during_creates_loses_nothing() {
    let s = Scenario::untenanted("kill").await;
    let tenant = s.namespace.clone();
    let spec: TenantSpec = serde_json::from_value(serde_json::json!({
        "namespaces": [s.namespace], "quotas": {"sandboxes": 8},
    }))
    .unwrap();
    s.client
        .create_tenant(&CreateTenantRequest {
            name: Some(tenant.clone()),
            spec: Some(spec),
            labels: None,
        })
        .await
        .unwrap();
    let _tenant = TenantGone {
        kubectl: s.deployed.kubectl.clone(),
        name: tenant.clone(),
    };
    let before = s.deployed.pods();
    assert_eq!(before.len(), 2, "{before:?}");
    let victim = before[0].clone();
    let names: Vec<String> = (0..8).map(|i| format!("k{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        if i == 3 {
            kubectl(
                &s.deployed.kubectl,
                &[
                    "-n",
                    in_cluster::NAMESPACE,
                    "delete",
                    "pod",
                    &victim,
                    "--grace-period=0",
                    "--force",
                ],
            );
        }
        // Small: eight of them and the two replicas share the node's two CPUs.
        let mut request = s.request(name, &s.busybox());
        request.limits = Some(ResourceLimits {
            cpu: Some("50m".into()),
            memory: Some("32Mi".into()),
            ..Default::default()
        });
        let started = Instant::now();
        loop {
            match s.client.create_sandbox(&request).await {
                Ok(_) => break,
                Err(ClientError::Api(e))
                    if e.status == 400 && e.message.contains("already exists") =>
                {
                    break;
                }
                Err(e) => {
                    assert!(
                        started.elapsed() < Duration::from_secs(60),
                        "create {name} kept failing: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
    let mut listed: Vec<String> = s
        .client
        .list_sandboxes(Some(&s.namespace))
        .await
        .unwrap()
        .into_iter()
        .map(|x| x.name)
        .collect();
    listed.sort();
    assert_eq!(listed, names);
    // One Deployment each: nothing made twice.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(cluster().await, &s.namespace);
    assert_eq!(
        deployments
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        names.len()
    );
    for name in &names {
        s.running(name).await;
    }
    // The quota (8) is full: the next create is refused, by whichever replica answers.
    let ninth = s
        .client
        .create_sandbox(&s.request("k8", &s.busybox()))
        .await;
    match ninth {
        Err(ClientError::Api(e)) => {
            assert_eq!((e.status, e.code.as_str()), (403, "QuotaExceeded"), "{e:?}")
        }
        other => panic!("a ninth sandbox in a quota of 8: {other:?}"),
    }
    // The leader Lease is held by a live replica (the survivor, or the victim's replacement).
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(cluster().await, "kube-system");
    let started = Instant::now();
    loop {
        let holder = leases
            .get_opt("sbx-leader")
            .await
            .unwrap()
            .and_then(|l| l.spec?.holder_identity)
            .unwrap_or_default();
        let live = s.deployed.pods();
        if !holder.starts_with(&victim) && live.iter().any(|p| holder.starts_with(p.as_str())) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the leader Lease stays with {holder:?}; live replicas {live:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The replicas reach each other on the Pod network (deploy/ gives them POD_IP): a create
    // on the replica that does not hold the tenant's quota Lease is passed to the one that
    // does (both refused here: the quota is full).
    let started = Instant::now();
    let replicas = loop {
        let addresses = s.deployed.pod_ips();
        let replicas: Vec<String> = addresses
            .iter()
            .map(|ip| format!("http://{ip}:8080"))
            .collect();
        let mut ready = replicas.len() == 2;
        for url in &replicas {
            ready &= common::call_at(url, &s.token, reqwest::Method::GET, "/readyz", None)
                .await
                .0
                == 200;
        }
        if ready {
            break replicas;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the replicas never both ready: {addresses:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let passed = || async {
        let mut n = 0.0;
        for url in &replicas {
            let (status, text) =
                common::call_at(url, &s.token, reqwest::Method::GET, "/metrics", None).await;
            assert_eq!(status, 200);
            for line in text.as_str().unwrap_or_default().lines() {
                if line.starts_with("sbx_quota_checks_total{lease=\"passed\"}") {
                    n += line.rsplit(' ').next().unwrap().parse::<f64>().unwrap();
                }
            }
        }
        n
    };
    let before = passed().await;
    let started = Instant::now();
    while passed().await == before {
        for (i, url) in replicas.iter().enumerate() {
            let body = serde_json::json!({"name": format!("over{i}"), "namespace": s.namespace,
                "image": s.busybox(), "limits": {"cpu": "50m", "memory": "32Mi"}});
            let (status, body) = common::call_at(
                url,
                &s.token,
                reqwest::Method::POST,
                "/api/v1/sandboxes",
                Some(body),
            )
            .await;
            assert_eq!(
                (status, body["error"]["code"].as_str()),
                (403, Some("QuotaExceeded")),
                "{body}"
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no create was passed between the replicas {replicas:?}"
        );
    }
}

/// Deletes a tenant (as the cluster's admin) when dropped.
struct TenantGone {
    kubectl: String,
    name: String,
}

impl Drop for TenantGone {
    fn drop(&mut self) {
        let _ = std::process::Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(common::kubeconfig())
            .args(["delete", "tenants.sbx.io", &self.name, "--ignore-not-found"])
            .output();
    }
}

/// The README's quick start with the operator's CLI, pointed at the Service with the
/// bootstrap token from its Secret.
#[tokio::test]
async fn the_cli_quick_start_works_through_the_service() {
    let s = Scenario::new("cli").await;
    let home = tempfile::tempdir().unwrap();
    let sbx = |args: &[&str], stdin: Option<&str>| {
        let mut all = vec![common::sbx_bin()];
        all.extend_from_slice(args);
        let mut command = std::process::Command::new(all[0]);
        command
            .args(&all[1..])
            .env("SBX_CONFIG_DIR", home.path())
            .env_remove("SBX_API_KEY")
            .env_remove("SBX_SERVER")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = command.spawn().unwrap();
        {
            use std::io::Write;
            let mut pipe = child.stdin.take().unwrap();
            if let Some(input) = stdin {
                pipe.write_all(input.as_bytes()).unwrap();
            }
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "sbx {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    sbx(
        &["login", "--server", &s.deployed.url],
        Some(&format!("{}\n", s.token)),
    );
    assert!(sbx(&["whoami"], None).contains("admin"));
    let image = s.busybox();
    let ns = s.namespace.as_str();
    sbx(
        &[
            "sandbox",
            "create",
            "demo",
            "-n",
            ns,
            "--image",
            &image,
            "--limit",
            "cpu=250m,memory=128Mi",
        ],
        None,
    );
    assert!(
        sbx(
            &["sandbox", "exec", "demo", "-n", ns, "--", "uname", "-s"],
            None
        )
        .contains("Linux")
    );
    assert!(sbx(&["sandbox", "list", "-n", ns], None).contains("demo"));
    sbx(&["sandbox", "logs", "demo", "-n", ns, "--tail", "20"], None);
    sbx(&["sandbox", "delete", "demo", "-n", ns], None);
}

/// The real node's storage pools, as its agent (the DaemonSet of `deploy/agent.yaml`,
/// privileged, entered into the host's namespaces) reads them and the
/// service asks it with its projected token (issue 15): a real XFS pool on a loop device at
/// the path the overlay gives the agent, a real LVM volume group on another (with the thin
/// pool where the kernel has device-mapper); the KWOK nodes run no agent.
#[tokio::test]
async fn node_storage_comes_from_the_agent_on_the_real_node() {
    use common::pools::{LvmGroup, XfsPool};
    let s = Scenario::new("storage").await;
    let disk_pool = in_cluster::agent_disk_pool();
    let xfs = XfsPool::at(&disk_pool);
    let lvm = LvmGroup::new(&in_cluster::agent_volume_group());
    let (status, body) = common::call_at(
        &s.deployed.url,
        &s.token,
        reqwest::Method::GET,
        "/api/v1/nodes/storage",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let real = &body["data"][std::env::var("SBX_TEST_REAL_NODE").unwrap()];
    let disks = &real["k7d_disks"];
    assert_eq!(disks["path"], disk_pool.display().to_string(), "{body}");
    let size = disks["size_bytes"].as_u64().unwrap_or_default();
    assert!((250 << 20..=320 << 20).contains(&size), "{body}");
    let thin = &real["kata_thinpool"];
    if lvm.has_thin_pool {
        assert_eq!(thin["lv"], "pool", "{body}");
        assert_eq!(thin["vg"], lvm.vg.as_str(), "{body}");
    } else {
        // The host's lvs ran (not "not installed"): no device-mapper in this kernel, so the
        // group has no thin pool.
        assert_eq!(
            thin["error"],
            format!(
                "no kata thin-pool: LVM has no thin pool {}/pool here",
                lvm.vg
            ),
            "{body}"
        );
    }
    for node in ["node-1", "node-2"] {
        assert!(
            body["data"][node]["error"]
                .as_str()
                .is_some_and(|e| e.contains("no sbx agent runs on this node")),
            "{body}"
        );
    }
    drop(xfs);
    let _ = std::fs::remove_dir_all(disk_pool.parent().unwrap());
}

/// Polls an install operation until every node finished (at most 150 s); the last report.
async fn install_finished(s: &Scenario, url: &str, operation: &str) -> serde_json::Value {
    let started = Instant::now();
    loop {
        let (status, body) = common::call_at(
            url,
            &s.token,
            reqwest::Method::GET,
            &format!("/api/v1/install/{operation}"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let done = body["data"]["nodes"]
            .as_object()
            .unwrap()
            .values()
            .all(|n| n["state"] == "succeeded" || n["state"] == "failed");
        if done {
            return body["data"].clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(150),
            "install {operation} unfinished: {body}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Remote install on the real node: the installer DaemonSet (deploy/installer.yaml, its image
/// pinned by digest) runs there once the service labels the node, checks the kernel and host
/// prerequisites and installs sbx under the prefix; the service records `succeeded`, names the
/// operation on the node and puts it in the agents' pool; every replica reads the operation.
/// A node failing a prerequisite reports `failed` with the installer's line, and a DaemonSet
/// whose image drifted from the pinned one is a 500.
#[tokio::test]
async fn remote_install_runs_the_installer_on_the_real_node() {
    use reqwest::Method as M;
    let s = Scenario::new("install").await;
    let url = s.deployed.url.clone();
    let node = std::env::var("SBX_TEST_REAL_NODE").unwrap();
    let prefix = in_cluster::install_prefix();
    let _ = std::fs::remove_dir_all(&prefix);
    let post = |body: serde_json::Value| {
        let (url, token) = (url.clone(), s.token.clone());
        async move { common::call_at(&url, &token, M::POST, "/api/v1/install", Some(body)).await }
    };
    let (status, body) = post(serde_json::json!({"nodes": [node], "inventory": "hosts"})).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = post(serde_json::json!({"nodes": ["no-such-node"]})).await;
    assert_eq!(status, 404, "{body}");

    let (status, body) = post(serde_json::json!({"nodes": [node]})).await;
    assert_eq!(status, 202, "{body}");
    let operation = body["data"]["operation"].as_str().unwrap().to_string();
    let report = install_finished(&s, &url, &operation).await;
    assert_eq!(
        report["nodes"][&node],
        serde_json::json!({"state": "succeeded", "message": null}),
        "{report}"
    );
    // The installer's work, on the host.
    let binary = prefix.join("bin/sbx");
    let version = std::process::Command::new(&binary)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
    assert!(
        String::from_utf8_lossy(&version.stdout).contains(env!("CARGO_PKG_VERSION")),
        "{version:?}"
    );
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(prefix.join("install.json")).unwrap()).unwrap();
    assert_eq!(record["node"], node.as_str(), "{record}");
    // The node left the installer pool, joined the agents', and names the operation.
    let labels = kubectl(
        &s.deployed.kubectl,
        &["get", "node", &node, "-o", "jsonpath={.metadata.labels}"],
    );
    let labels: serde_json::Value = serde_json::from_str(&labels).unwrap();
    assert_eq!(labels["sbx.io/agent"], "true", "{labels}");
    assert!(labels.get("sbx.io/install").is_none(), "{labels}");
    let installed_by = kubectl(
        &s.deployed.kubectl,
        &[
            "get",
            "node",
            &node,
            "-o",
            "jsonpath={.metadata.annotations.sbx\\.io/installed-by}",
        ],
    );
    assert_eq!(installed_by.trim(), operation);
    // Every replica reads the operation (each Pod's own address, not the Service).
    for ip in s.deployed.pod_ips() {
        let report = install_finished(&s, &format!("http://{ip}:8080"), &operation).await;
        assert_eq!(
            report["nodes"][&node]["state"], "succeeded",
            "{ip}: {report}"
        );
    }

    // A prerequisite the node fails: the installer's line is the node's message.
    let min_kernel = r#"[{"op": "add", "path": "/spec/template/spec/initContainers/0/env/-",
        "value": {"name": "SBX_INSTALL_MIN_KERNEL", "value": "99.0"}}]"#;
    let installer = |args: &[&str]| {
        let (verb, rest) = args.split_first().unwrap();
        let all = [
            &["-n", "sbx-agent", verb, "daemonset/sbx-installer"][..],
            rest,
        ]
        .concat();
        kubectl(&s.deployed.kubectl, &all)
    };
    installer(&["patch", "--type", "json", "-p", min_kernel]);
    // Through the CLI, as an operator would: it waits and exits 1.
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(common::sbx_bin())
        .args(["install", "start", &node, "--wait", "--timeout", "150s"])
        .env("SBX_CONFIG_DIR", home.path())
        .env("SBX_SERVER", &url)
        .env("SBX_API_KEY", &s.token)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("NODE") && stdout.contains("failed") && stdout.contains("older than 99.0"),
        "{stdout}"
    );
    let failing = stderr
        .split_whitespace()
        .find(|w| w.starts_with("install-"))
        .unwrap_or_else(|| panic!("no operation in {stderr}"))
        .to_string();
    let report = install_finished(&s, &url, &failing).await;
    let failed = &report["nodes"][&node];
    assert_eq!(failed["state"], "failed", "{report}");
    let message = failed["message"].as_str().unwrap();
    assert!(
        message.starts_with("prerequisite failed: kernel") && message.contains("older than 99.0"),
        "{report}"
    );
    let without = r#"[{"op": "remove", "path": "/spec/template/spec/initContainers/0/env/1"}]"#;
    installer(&["patch", "--type", "json", "-p", without]);

    // The installer's image is no longer the pinned one: 500, nothing labelled.
    let pinned = std::env::var("SBX_TEST_SBX_IMAGE_PINNED").unwrap();
    let tagged = std::env::var("SBX_TEST_SBX_IMAGE").unwrap();
    let set_image = |image: &str| {
        let args = ["-n", "sbx-agent", "set", "image", "daemonset/sbx-installer"];
        kubectl(
            &s.deployed.kubectl,
            &[&args[..], &[&format!("install={image}")]].concat(),
        )
    };
    set_image(&tagged);
    let (status, body) = post(serde_json::json!({"nodes": [node]})).await;
    set_image(&pinned);
    assert_eq!(status, 500, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("drift"),
        "{body}"
    );
    let _ = std::fs::remove_dir_all(&prefix);
}

/// An API call of the scenario's admin: status and body.
async fn call(
    s: &Scenario,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    common::call_at(&s.deployed.url, &s.token, method, path, body).await
}

/// The sandbox directories the agent's sbxd runtime has on the real node (this host).
fn agent_sandbox_dirs() -> Vec<String> {
    common::sbxd::sandbox_ids(&in_cluster::agent_data_dir())
}

/// The `sbxd` backend on Kubernetes (issue 15, part 3): the sandbox is placed on the node whose
/// agent runs (the real node), its record an SbxdSandbox object there, and the agent runs it
/// with the sbxd runtime on the host: a real container under the agent's data dir, exec, logs,
/// pause and resume, metrics, list and delete through either replica; a name taken by an sbxd
/// sandbox is taken for every backend; a tenant limit sbxd cannot enforce is refused.
#[tokio::test]
async fn sbxd_sandboxes_run_through_the_agent_on_the_real_node() {
    let s = Scenario::new("sbxd").await;
    let node = std::env::var("SBX_TEST_REAL_NODE").unwrap();
    let before = agent_sandbox_dirs();
    let mut request = s.request("box", &s.busybox());
    request.backend = Some("sbxd".into());
    request.before_script = Some("echo prepared > /tmp/prepared".into());
    s.client.create_sandbox(&request).await.unwrap();
    let record = s.running("box").await;
    assert_eq!(record.backend, "sbxd", "{record:?}");
    let placed = kubectl(
        &s.deployed.kubectl,
        &[
            "-n",
            &s.namespace,
            "get",
            "sbxdsandbox",
            "box",
            "-o",
            "jsonpath={.spec.node}",
        ],
    );
    assert_eq!(placed, node);
    // A real container of the agent's runtime on this host, its own host name, the script run.
    let made: Vec<String> = agent_sandbox_dirs()
        .into_iter()
        .filter(|d| !before.contains(d))
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(s.exec("box", "hostname").await, (0, "box\n".into()));
    assert_eq!(
        s.exec("box", "cat /tmp/prepared").await,
        (0, "prepared\n".into())
    );
    // Its main process's output is its log.
    s.exec("box", "echo to-the-log > /proc/1/fd/1").await;
    let (status, body) = call(
        &s,
        reqwest::Method::GET,
        &format!("/api/v1/sandboxes/box/logs?namespace={}", s.namespace),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.to_string().contains("to-the-log"), "{body}");
    // Pause freezes it (and reads Paused at once), an exec is refused, resume thaws it.
    s.client
        .pause_sandbox(
            "box",
            &PauseRequest {
                namespace: Some(s.namespace.clone()),
                snapshot: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(s.get("box").await.status, SandboxStatus::Paused);
    let (status, body) = call(
        &s,
        reqwest::Method::POST,
        &format!("/api/v1/sandboxes/box/exec?namespace={}", s.namespace),
        Some(serde_json::json!({"command": "true"})),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    s.client
        .resume_sandbox(
            "box",
            &ResumeRequest {
                namespace: Some(s.namespace.clone()),
            },
        )
        .await
        .unwrap();
    s.running("box").await;
    assert_eq!(s.exec("box", "echo back").await, (0, "back\n".into()));
    // Metrics from the agent's cgroup reading; the list of the namespace.
    let (status, body) = call(
        &s,
        reqwest::Method::GET,
        &format!("/api/v1/sandboxes/metrics?namespace={}", s.namespace),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.to_string().contains("\"box\""), "{body}");
    let list = s.client.list_sandboxes(Some(&s.namespace)).await.unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0].backend, "sbxd");
    // The name is taken for every backend.
    let mut clash = s.request("box", &s.busybox());
    clash.backend = Some("kata-qemu-longhorn".into());
    let error = s.client.create_sandbox(&clash).await.unwrap_err();
    assert!(error.to_string().contains("already exists"), "{error}");
    // Delete: gone from the API, the cluster and the host.
    let (status, body) = call(
        &s,
        reqwest::Method::DELETE,
        &format!("/api/v1/sandboxes/box?namespace={}", s.namespace),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = call(
        &s,
        reqwest::Method::GET,
        &format!("/api/v1/sandboxes/box?namespace={}", s.namespace),
        None,
    )
    .await;
    assert_eq!(status, 404);
    let left = kubectl(
        &s.deployed.kubectl,
        &["-n", &s.namespace, "get", "sbxdsandboxes", "-o", "name"],
    );
    assert_eq!(left.trim(), "");
    assert!(
        !agent_sandbox_dirs().contains(&made[0]),
        "{made:?} left on the host"
    );

    // A tenant limit the sbxd backend cannot enforce (spec, tenant rule 6).
    // (Not the scenario's own tenant, which has the namespace's name.)
    let tenant = format!("{}-l", s.namespace);
    let owned = format!("{}-t", s.namespace);
    let (status, body) = call(
        &s,
        reqwest::Method::POST,
        "/api/v1/tenants",
        Some(serde_json::json!({
            "name": tenant,
            "spec": {"namespaces": [owned], "limits": {"network": {"egressBps": "10M"}}},
        })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let mut refused = s.request("limited", &s.busybox());
    refused.backend = Some("sbxd".into());
    refused.namespace = Some(owned.clone());
    let (status, body) = call(
        &s,
        reqwest::Method::POST,
        "/api/v1/sandboxes",
        Some(serde_json::to_value(&refused).unwrap()),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "LimitNotEnforceable", "{body}");
    // Placement: a tenant whose nodes run no agent (the KWOK nodes) has nowhere to put one.
    let (status, body) = call(
        &s,
        reqwest::Method::PATCH,
        &format!("/api/v1/tenants/{tenant}"),
        Some(serde_json::json!({"spec": {"limits": null, "nodes": ["node-1", "node-2"]}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(
        &s,
        reqwest::Method::POST,
        "/api/v1/sandboxes",
        Some(serde_json::to_value(&refused).unwrap()),
    )
    .await;
    assert_eq!(status, 503, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no node can run this sbxd sandbox") && message.contains(&node),
        "{body}"
    );
    let (status, body) = call(
        &s,
        reqwest::Method::DELETE,
        &format!("/api/v1/tenants/{tenant}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let _ = kubectl(
        &s.deployed.kubectl,
        &[
            "delete",
            "namespace",
            &owned,
            "--ignore-not-found",
            "--wait=false",
        ],
    );
}

/// Puts the agent back on the real node however the test ends.
struct AgentBack {
    kubectl: String,
    node: String,
}

impl Drop for AgentBack {
    fn drop(&mut self) {
        let _ = std::process::Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(common::kubeconfig())
            .args([
                "label",
                "--overwrite",
                "node",
                &self.node,
                "sbx.io/agent=true",
            ])
            .output();
        let _ = std::process::Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(common::kubeconfig())
            .args([
                "-n",
                "sbx-agent",
                "rollout",
                "status",
                "daemonset/sbx-agent",
                "--timeout=120s",
            ])
            .output();
    }
}

/// A node whose agent goes away: calls for its sandboxes answer 503 naming the node at once
/// (never hang), its sandboxes read Failed with the reason after `agentLostAfter` (15 s here)
/// and can be deleted then, and when the agent returns they read Running again — the sandbox
/// kept running meanwhile (the agent's Pod is gone, not its sandboxes) and answers execs as
/// before — and the one deleted meanwhile is removed from the node.
#[tokio::test]
async fn a_lost_agent_fails_its_sandboxes_until_it_returns() {
    let s = Scenario::new("lost").await;
    let node = std::env::var("SBX_TEST_REAL_NODE").unwrap();
    let before = agent_sandbox_dirs();
    for name in ["kept", "dropped"] {
        let mut request = s.request(name, &s.busybox());
        request.backend = Some("sbxd".into());
        s.client.create_sandbox(&request).await.unwrap();
        s.running(name).await;
    }
    s.exec("kept", "echo 42 > /tmp/state").await;
    let made: Vec<String> = agent_sandbox_dirs()
        .into_iter()
        .filter(|d| !before.contains(d))
        .collect();
    assert_eq!(made.len(), 2, "{made:?}");
    let back = AgentBack {
        kubectl: s.deployed.kubectl.clone(),
        node: node.clone(),
    };
    kubectl(
        &s.deployed.kubectl,
        &["label", "node", &node, "sbx.io/agent-"],
    );
    kubectl(
        &s.deployed.kubectl,
        &[
            "-n",
            "sbx-agent",
            "wait",
            "--for=delete",
            "pod",
            "-l",
            "app.kubernetes.io/component=agent",
            "--timeout=60s",
        ],
    );
    let started = Instant::now();
    let (status, body) = call(
        &s,
        reqwest::Method::POST,
        &format!("/api/v1/sandboxes/kept/exec?namespace={}", s.namespace),
        Some(serde_json::json!({"command": "true"})),
    )
    .await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains(&node),
        "{body}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let failed = s
        .until("kept", "Failed for its lost agent", |x| {
            x.status == SandboxStatus::Failed
        })
        .await;
    assert!(
        failed.error_message.contains(&node) && failed.error_message.contains("unreachable"),
        "{failed:?}"
    );
    // A sandbox of a lost node can still be deleted: its record goes now, and the agent
    // removes the sandbox when it returns.
    let (status, body) = call(
        &s,
        reqwest::Method::DELETE,
        &format!("/api/v1/sandboxes/dropped?namespace={}", s.namespace),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    drop(back);
    s.running("kept").await;
    assert_eq!(s.exec("kept", "cat /tmp/state").await, (0, "42\n".into()));
    let started = Instant::now();
    while agent_sandbox_dirs()
        .iter()
        .filter(|d| made.contains(d))
        .count()
        != 1
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the returned agent kept the deleted sandbox: {:?}",
            agent_sandbox_dirs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (status, body) = call(
        &s,
        reqwest::Method::DELETE,
        &format!("/api/v1/sandboxes/kept?namespace={}", s.namespace),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

/// Snapshots of the `sbxd` backend on Kubernetes, through the agent on the real node: a named
/// snapshot (an SbxdSnapshot record naming the node), a cold fork (the files), a warm fork
/// (the running processes too, by CRIU), a restore, a pause with a snapshot, GC of the forks'
/// intermediate snapshots and deletes, every record read back through the API.
#[tokio::test]
async fn sbxd_snapshots_forks_and_restores_run_through_the_agent() {
    let s = Scenario::new("sbxdsnap").await;
    let node = std::env::var("SBX_TEST_REAL_NODE").unwrap();
    let ns = s.namespace.clone();
    let before = agent_sandbox_dirs();
    let mut request = s.request("src", &s.busybox());
    request.backend = Some("sbxd".into());
    s.client.create_sandbox(&request).await.unwrap();
    s.running("src").await;
    s.exec("src", "echo v1 > /data.txt").await;
    // A process whose memory a warm fork keeps: it counts on, in the clone too (each count
    // written whole: a reader never sees a file half written).
    s.exec(
        "src",
        "setsid sh -c 'i=0; while true; do i=$((i+1)); echo $i > /tmp/c.new; mv /tmp/c.new /tmp/counter; sleep 0.1; done' </dev/null >/dev/null 2>&1 &",
    )
    .await;
    let started = Instant::now();
    while s
        .exec("src", "cat /tmp/counter")
        .await
        .1
        .trim()
        .parse::<u64>()
        .unwrap_or(0)
        < 2
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the counter never counted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let (status, body) = call(
        &s,
        reqwest::Method::POST,
        &format!("/api/v1/sandboxes/src/snapshot?namespace={ns}"),
        Some(serde_json::json!({"snapshot_name": "snap1", "namespace": ns})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        &s,
        reqwest::Method::GET,
        &format!("/api/v1/snapshots/snap1?namespace={ns}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["kind"], "named", "{body}");
    assert_eq!(body["data"]["source_sandbox"], "src", "{body}");
    let held = kubectl(
        &s.deployed.kubectl,
        &[
            "-n",
            &ns,
            "get",
            "sbxdsnapshot",
            "snap1",
            "-o",
            "jsonpath={.spec.node}",
        ],
    );
    assert_eq!(held, node);

    // Cold fork: the files.
    let (status, body) = call(
        &s,
        reqwest::Method::POST,
        &format!("/api/v1/sandboxes/src/fork?namespace={ns}"),
        Some(serde_json::json!({"new_name": "cold", "namespace": ns})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    s.running("cold").await;
    assert_eq!(s.exec("cold", "cat /data.txt").await, (0, "v1\n".into()));
    // Warm fork: the processes too.
    let (status, body) = call(
        &s,
        reqwest::Method::POST,
        &format!("/api/v1/sandboxes/src/fork?namespace={ns}"),
        Some(serde_json::json!({"new_name": "warm", "namespace": ns, "warm": true})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    s.running("warm").await;
    let first: u64 = s
        .exec("warm", "cat /tmp/counter")
        .await
        .1
        .trim()
        .parse()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let later: u64 = s
        .exec("warm", "cat /tmp/counter")
        .await
        .1
        .trim()
        .parse()
        .unwrap();
    assert!(
        later > first && first > 1,
        "the clone's counter: {first} then {later}"
    );
    assert_eq!(s.exec("warm", "cat /data.txt").await, (0, "v1\n".into()));

    // Restore the named snapshot.
    let (status, body) = call(
        &s,
        reqwest::Method::POST,
        &format!("/api/v1/snapshots/snap1/restore?namespace={ns}"),
        Some(serde_json::json!({"new_sandbox_name": "restored", "namespace": ns})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    s.running("restored").await;
    assert_eq!(
        s.exec("restored", "cat /data.txt").await,
        (0, "v1\n".into())
    );
    let restored = s.get("restored").await;
    assert_eq!(
        (restored.backend.as_str(), restored.image.as_str()),
        ("sbxd", s.busybox().as_str())
    );

    // Pause with a snapshot.
    let (status, body) = call(
        &s,
        reqwest::Method::POST,
        "/api/v1/sandboxes/cold/pause",
        Some(serde_json::json!({"namespace": ns, "snapshot": "p1"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(s.get("cold").await.status, SandboxStatus::Paused);
    let (status, body) = call(
        &s,
        reqwest::Method::GET,
        &format!("/api/v1/snapshots?namespace={ns}&kind=pause"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"][0]["name"], "p1", "{body}");

    // The forks' intermediate snapshots went inline (nothing for GC); named and pause ones
    // stay through a sweep.
    let (status, body) = call(
        &s,
        reqwest::Method::GET,
        &format!("/api/v1/snapshots?namespace={ns}&kind=fork"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"], serde_json::json!([]), "{body}");
    let (status, body) = call(
        &s,
        reqwest::Method::POST,
        "/api/v1/snapshots/gc",
        Some(serde_json::json!({"namespace": ns, "keep_fork_for": "0s"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (_, body) = call(
        &s,
        reqwest::Method::GET,
        &format!("/api/v1/snapshots?namespace={ns}"),
        None,
    )
    .await;
    let mut names: Vec<String> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(names, vec!["p1".to_string(), "snap1".to_string()], "{body}");

    // Deletes: snapshots and sandboxes, gone from the cluster and the host.
    for snapshot in ["snap1", "p1"] {
        let (status, body) = call(
            &s,
            reqwest::Method::DELETE,
            &format!("/api/v1/snapshots/{snapshot}?namespace={ns}"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    for sandbox in ["src", "cold", "warm", "restored"] {
        let (status, body) = call(
            &s,
            reqwest::Method::DELETE,
            &format!("/api/v1/sandboxes/{sandbox}?namespace={ns}"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    let left = kubectl(
        &s.deployed.kubectl,
        &[
            "-n",
            &ns,
            "get",
            "sbxdsnapshots,sbxdsandboxes",
            "-o",
            "name",
        ],
    );
    assert_eq!(left.trim(), "");
    let made: Vec<String> = agent_sandbox_dirs()
        .into_iter()
        .filter(|d| !before.contains(d))
        .collect();
    assert!(made.is_empty(), "left on the host: {made:?}");
}

/// One side of the agent benchmark: a service, its key, where its sandboxes go.
struct BenchSide {
    http: reqwest::Client,
    url: String,
    token: String,
    namespace: String,
    image: String,
    backend: Option<&'static str>,
}

impl BenchSide {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.url))
            .header("x-api-key", &self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let body = response.json().await.unwrap_or(serde_json::Value::Null);
        (status, body)
    }

    async fn ok(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> serde_json::Value {
        let (status, answer) = self.call(method.clone(), path, body).await;
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {answer}"
        );
        answer
    }

    /// Create → Running and ready (polled every 5 ms), ms.
    async fn create_ready(&self, name: &str) -> f64 {
        let started = Instant::now();
        self.ok(reqwest::Method::POST, "/api/v1/sandboxes", Some(serde_json::json!({
            "name": name, "namespace": self.namespace, "image": self.image, "backend": self.backend,
            "limits": {"cpu": "250m", "memory": "128Mi"},
        }))).await;
        self.wait_ready(name).await;
        started.elapsed().as_secs_f64() * 1000.0
    }

    async fn wait_ready(&self, name: &str) {
        let started = Instant::now();
        loop {
            let s = self
                .ok(
                    reqwest::Method::GET,
                    &format!("/api/v1/sandboxes/{name}?namespace={}", self.namespace),
                    None,
                )
                .await;
            if s["data"]["status"] == "Running" && s["data"]["ready"] == "True" {
                return;
            }
            assert!(s["data"]["status"] != "Failed", "{s}");
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "{name} never ready: {s}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn exec(&self, name: &str, command: &str) -> (f64, serde_json::Value) {
        let started = Instant::now();
        let r = self
            .ok(
                reqwest::Method::POST,
                &format!("/api/v1/sandboxes/{name}/exec?namespace={}", self.namespace),
                Some(serde_json::json!({"command": command})),
            )
            .await;
        (started.elapsed().as_secs_f64() * 1000.0, r)
    }

    async fn delete(&self, name: &str) {
        self.ok(
            reqwest::Method::DELETE,
            &format!("/api/v1/sandboxes/{name}?namespace={}", self.namespace),
            None,
        )
        .await;
    }
}

fn median_p90(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.9))
}

/// Not a test: the benchmark of the `sbxd` backend through the agent on the real node against
/// the embedded default on this host, side by side in one run (`scripts/bench-agent` runs it
/// with `--ignored`; it prints, never asserts a time). Both pull the same image from the test
/// registry; both sandboxes are busybox with 250m CPU and 128 MiB; every client keeps one
/// connection. Create → Ready (POST, then GET every 5 ms until Running and ready), an exec
/// round trip (`true`), and a warm fork of a source holding 50 MiB (POST …/fork with `warm`;
/// it answers when the clone runs).
#[tokio::test]
#[ignore = "a benchmark: scripts/bench-agent runs it"]
async fn bench_sbxd_through_the_agent_against_the_embedded_default() {
    let iterations: usize = std::env::var("SBX_BENCH_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20);
    let s = Scenario::new("bench").await;
    let net = common::sbxd::TestNet::new();
    let daemon = common::sbxd::daemon(&net, "");
    let http = reqwest::Client::new();
    let agent = BenchSide {
        http: http.clone(),
        url: s.deployed.url.clone(),
        token: s.token.clone(),
        namespace: s.namespace.clone(),
        image: s.busybox(),
        backend: Some("sbxd"),
    };
    let embedded = BenchSide {
        http,
        url: daemon.url.clone(),
        token: daemon.admin_token(),
        namespace: "bench".into(),
        image: common::sbxd::busybox(),
        backend: None,
    };
    let sides = [("agent", &agent), ("embedded", &embedded)];
    let mut samples: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    const WARMUPS: usize = 2;
    for i in 0..WARMUPS + iterations {
        for (label, side) in sides {
            let name = format!("c{i}");
            let ms = side.create_ready(&name).await;
            let (first, _) = side.exec(&name, "true").await;
            let (exec, _) = side.exec(&name, "true").await;
            side.delete(&name).await;
            if i >= WARMUPS {
                samples
                    .entry(format!("create {label}"))
                    .or_default()
                    .push(ms);
                samples
                    .entry(format!("first exec {label}"))
                    .or_default()
                    .push(first);
                samples
                    .entry(format!("exec {label}"))
                    .or_default()
                    .push(exec);
            }
        }
    }
    // Warm forks of a source whose process holds 50 MiB.
    let hold = "setsid sh -c 'x=$(head -c 52428800 /dev/zero | tr \"\\\\0\" a); touch /tmp/held; while :; do sleep 3600; done' </dev/null >/dev/null 2>&1 &";
    for (_, side) in sides {
        side.create_ready("src").await;
        side.exec("src", hold).await;
        let started = Instant::now();
        while side.exec("src", "test -e /tmp/held").await.1["data"]["exit_code"] != 0 {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the memory holder never held"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let forks = iterations.min(10);
    for i in 0..WARMUPS + forks {
        for (label, side) in sides {
            let name = format!("w{i}");
            let started = Instant::now();
            side.ok(reqwest::Method::POST, &format!("/api/v1/sandboxes/src/fork?namespace={}", side.namespace), Some(serde_json::json!({"new_name": name, "namespace": side.namespace, "warm": true}))).await;
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            side.wait_ready(&name).await;
            side.delete(&name).await;
            if i >= WARMUPS {
                samples
                    .entry(format!("warm fork {label}"))
                    .or_default()
                    .push(ms);
            }
        }
    }
    for (_, side) in sides {
        side.delete("src").await;
    }
    println!(
        "\nsbx bench-agent: sbxd through the sbx agent on the real node (Kubernetes, 2 replicas) vs the embedded default on this host, {iterations} iterations (+{WARMUPS}), warm fork {forks}"
    );
    println!(
        "{:<40} {:>9} {:>9} {:>9} {:>9}   agent ÷ embedded (median, p90)",
        "operation", "agent", "p90", "embedded", "p90"
    );
    for op in ["create", "first exec", "exec", "warm fork"] {
        let (am, ap) = median_p90(samples[&format!("{op} agent")].clone());
        let (em, ep) = median_p90(samples[&format!("{op} embedded")].clone());
        let what = match op {
            "create" => "create → Ready",
            "first exec" => "first exec after Ready",
            "exec" => "exec round trip (`true`)",
            _ => "warm fork, 50 MiB (until it runs)",
        };
        println!(
            "{what:<40} {am:9.1} {ap:9.1} {em:9.1} {ep:9.1}   {:.2}× , {:.2}×",
            am / em,
            ap / ep
        );
    }
}
