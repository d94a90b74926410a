//! One behavioural suite, two platforms (DESIGN.md §2): the same sandbox and snapshot
//! scenarios run against the embedded default (real sbxd sandboxes: runc, overlayfs, a
//! network namespace of the test's own) and against the Kubernetes platform (a real
//! kube-apiserver, kube-controller-manager and kube-scheduler from `scripts/k8s-testenv`, with
//! KWOK playing the kubelet and the CSI driver: Pods become Running, PVCs Bound and
//! VolumeSnapshots ready through KWOK stages, and exec and logs go through the API server to
//! KWOK, which runs the command on the test host and serves a log file the test writes).
//! Both run a third time against sbx as an operator deploys it (`kubectl apply -k
//! deploy/`, two replicas in the test cluster reached through their Service, sandboxes real
//! containers on the cluster's real node: `tests/common/in_cluster.rs`).
//! Each scenario is written once; the platform only decides how a sandbox's main process
//! writes a log line. Needs root (sbxd) and SBX_TEST_KUBECONFIG (scripts/test sets both up).
mod common;

use std::time::{Duration, Instant};

use common::sbxd::{self, TestNet};
use common::{Daemon, bootstrap_token, call_at, cluster, in_cluster};
use reqwest::Method as M;
use sbx::cli::client::{ApiClient, ClientError};
use sbx::shared::models::sandbox::{
    CreateSandboxRequest, CreateSnapshotRequest, ExecRequest, ForkRequest, LogsQuery, PauseRequest,
    ResourceLimits, ResumeRequest, Sandbox, SandboxStatus,
};
use sbx::shared::models::snapshot::{RestoreRequest, SnapshotKind, SnapshotListQuery};
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Platform {
    Local,
    Kubernetes,
    /// The Kubernetes platform as an operator runs it: `sbx serve` deployed from `deploy/`
    /// in the test cluster, its sandboxes real containers on the real node.
    InCluster,
    /// The same, with the `sbxd` backend: sandboxes run by the agent on the real node.
    InClusterSbxd,
}

/// Kubernetes scenarios share one API server (and its `kube-system` objects): one at a time.
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A daemon on one platform, its admin client and a namespace of the scenario's own.
struct Env {
    platform: Platform,
    /// The daemon of this test's own (none for the deployed service).
    _daemon: Option<Daemon>,
    /// Where the service answers.
    url: String,
    token: String,
    client: ApiClient,
    namespace: String,
    image: String,
    _net: Option<TestNet>,
    _replicas: Option<in_cluster::Replicas>,
    _cluster: Option<tokio::sync::MutexGuard<'static, ()>>,
}

fn api_status<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (u16, String) {
    match r {
        Err(ClientError::Api(e)) => (e.status, e.code),
        other => panic!("expected an API error, got {other:?}"),
    }
}

impl Env {
    async fn new(platform: Platform, scenario: &str) -> Env {
        let suffix = format!("{}-{}", std::process::id() % 100_000, scenario);
        match platform {
            Platform::Local => {
                let net = TestNet::new();
                let daemon = sbxd::daemon(&net, "");
                let token = daemon.admin_token();
                Env {
                    platform,
                    client: daemon.client(&token),
                    token,
                    url: daemon.url.clone(),
                    _daemon: Some(daemon),
                    namespace: format!("bh-{suffix}"),
                    image: sbxd::busybox(),
                    _net: Some(net),
                    _replicas: None,
                    _cluster: None,
                }
            }
            Platform::Kubernetes => {
                let guard = CLUSTER.lock().await;
                let kube = cluster().await;
                // A fresh first admin key: the daemon mints one when the cluster has none.
                let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
                    kube::Api::namespaced(kube.clone(), "kube-system");
                for name in ["sbx-api-keys", "sbx-bootstrap-admin"] {
                    let _ = secrets.delete(name, &Default::default()).await;
                }
                let daemon = Daemon::start_on_kubernetes("[kubernetes]\nforkTimeout = \"20s\"\n");
                let token = bootstrap_token(&kube).await;
                Env {
                    platform,
                    client: daemon.client(&token),
                    token,
                    url: daemon.url.clone(),
                    _daemon: Some(daemon),
                    namespace: format!("bh-{suffix}"),
                    image: "busybox:1.36".into(),
                    _net: None,
                    _replicas: None,
                    _cluster: Some(guard),
                }
            }
            Platform::InCluster | Platform::InClusterSbxd => {
                let guard = CLUSTER.lock().await;
                let deployed = in_cluster::deployed().await;
                let replicas = deployed.up().await;
                let (token, client) = in_cluster::admin(deployed).await;
                Env {
                    platform,
                    client,
                    token,
                    url: deployed.url.clone(),
                    _daemon: None,
                    namespace: format!("bh-ic-{suffix}"),
                    image: format!("{}/sbx-test/busybox:latest", common::test_registry()),
                    _net: None,
                    _replicas: Some(replicas),
                    _cluster: Some(guard),
                }
            }
        }
    }

    fn request(&self, name: &str) -> CreateSandboxRequest {
        CreateSandboxRequest {
            name: Some(name.into()),
            namespace: Some(self.namespace.clone()),
            image: Some(self.image.clone()),
            // The deployed service runs in production mode: every sandbox names its size.
            limits: matches!(self.platform, Platform::InCluster | Platform::InClusterSbxd).then(
                || ResourceLimits {
                    cpu: Some("250m".into()),
                    memory: Some("128Mi".into()),
                    ..Default::default()
                },
            ),
            backend: (self.platform == Platform::InClusterSbxd).then(|| "sbxd".to_string()),
            ..Default::default()
        }
    }

    async fn create(&self, name: &str) -> Sandbox {
        self.client
            .create_sandbox(&self.request(name))
            .await
            .unwrap_or_else(|e| panic!("create {name}: {e}"));
        self.running(name).await
    }

    async fn get(&self, name: &str) -> Result<Sandbox, ClientError> {
        self.client.get_sandbox(name, &self.namespace).await
    }

    /// Waits (up to 2 minutes) until the sandbox reads `status` (and Ready when Running).
    async fn until(&self, name: &str, status: SandboxStatus) -> Sandbox {
        let started = Instant::now();
        loop {
            let s = self.get(name).await.expect("get");
            if s.status == status && (status != SandboxStatus::Running || s.ready == "True") {
                return s;
            }
            assert!(
                status == SandboxStatus::Failed || s.status != SandboxStatus::Failed,
                "{s:?}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "{name} never {status}: {s:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn running(&self, name: &str) -> Sandbox {
        self.until(name, SandboxStatus::Running).await
    }

    async fn exec(&self, name: &str, command: &str) -> sbx::shared::models::sandbox::ExecResponse {
        self.client
            .exec_sandbox(
                name,
                &self.namespace,
                &ExecRequest {
                    command: Some(command.into()),
                    timeout_seconds: Some(60),
                },
            )
            .await
            .unwrap_or_else(|e| panic!("exec in {name}: {e}"))
    }

    /// The sandbox's main process writes `line` to its output (its log). On sbxd a process in
    /// the sandbox writes to the main process's stdout; under KWOK the Pod's log is a file on
    /// the test host that KWOK serves for every Pod (`scripts/k8s-testenv`); the test appends to it.
    async fn say(&self, name: &str, line: &str) {
        match self.platform {
            // A real container (sbxd's, or the real node's): its main process's output.
            Platform::Local | Platform::InCluster | Platform::InClusterSbxd => {
                let r = self
                    .exec(name, &format!("echo '{line}' > /proc/1/fd/1"))
                    .await;
                assert_eq!(r.exit_code, 0, "{r:?}");
            }
            Platform::Kubernetes => {
                // KWOK serves every Pod's log from one file in the CRI log format.
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(kwok_log())
                    .unwrap();
                let now =
                    sbx::shared::timestamp::format_rfc3339_utc(sbx::shared::timestamp::now_unix());
                writeln!(f, "{now} stdout F {line}").unwrap();
            }
        }
    }

    async fn snapshots(&self, kind: Option<&str>) -> Vec<String> {
        self.client
            .list_snapshots(&SnapshotListQuery {
                namespace: Some(self.namespace.clone()),
                kind: kind.map(str::to_string),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect()
    }

    fn backend(&self) -> &'static str {
        match self.platform {
            Platform::Local | Platform::InClusterSbxd => "sbxd",
            Platform::Kubernetes | Platform::InCluster => "kata-qemu-longhorn",
        }
    }

    async fn cleanup(&self) {
        let _ = self.client.delete_all_sandboxes(&self.namespace).await;
        for s in self.snapshots(None).await {
            let _ = self.client.delete_snapshot(&s, &self.namespace).await;
        }
    }
}

/// The file KWOK serves as every Pod's log in the test environment (`scripts/k8s-testenv`).
fn kwok_log() -> String {
    std::env::var("SBX_TEST_KWOK_LOG").expect(
        "SBX_TEST_KWOK_LOG is not set: run scripts/test (the KWOK log file of scripts/k8s-testenv)",
    )
}

/// Create, read, exec, logs, metrics, pause/resume and delete of one sandbox.
async fn lifecycle(platform: Platform) {
    let env = Env::new(platform, "life").await;
    let ns = env.namespace.clone();
    let s = env.create("life").await;
    assert_eq!(
        (
            s.name.as_str(),
            s.namespace.as_str(),
            s.image.as_str(),
            s.backend.as_str()
        ),
        ("life", ns.as_str(), env.image.as_str(), env.backend())
    );
    assert_eq!((s.restarts, s.error_message.as_str()), (0, ""));
    // A second create of the name is 400 (the contract's error table).
    let (status, code) = api_status(env.client.create_sandbox(&env.request("life")).await);
    assert_eq!((status, code.as_str()), (400, "BadRequest"));
    // Lists are per namespace.
    let names: Vec<String> = env
        .client
        .list_sandboxes(Some(&ns))
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["life"]);
    assert!(
        env.client
            .list_sandboxes(Some("bh-elsewhere"))
            .await
            .unwrap()
            .is_empty()
    );

    // Exec: streams apart, the exit code kept, a failing command still a result.
    let r = env.exec("life", "echo out; echo err >&2; exit 3").await;
    assert_eq!(
        (r.exit_code, r.stdout.as_str(), r.stderr.as_str()),
        (3, "out\n", "err\n"),
        "{r:?}"
    );
    assert_eq!(env.exec("life", "true").await.exit_code, 0);
    let missing = env
        .client
        .exec_sandbox(
            "nope",
            &ns,
            &ExecRequest {
                command: Some("true".into()),
                timeout_seconds: None,
            },
        )
        .await;
    assert_eq!(api_status(missing).0, 404);

    // Logs: what the main process wrote, the last `tail` lines.
    env.say("life", "behaviour line one").await;
    env.say("life", "behaviour line two").await;
    let logs = |tail| {
        let client = env.client.clone();
        let ns = ns.clone();
        async move {
            client
                .sandbox_logs(
                    "life",
                    &LogsQuery {
                        namespace: Some(ns),
                        tail,
                        ..Default::default()
                    },
                )
                .await
                .unwrap()
                .logs
        }
    };
    let all = logs(200).await;
    assert!(
        all.contains("behaviour line one\n") && all.contains("behaviour line two\n"),
        "{all:?}"
    );
    assert_eq!(logs(1).await, "behaviour line two\n");
    let missing = env
        .client
        .sandbox_logs(
            "nope",
            &LogsQuery {
                namespace: Some(ns.clone()),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(api_status(missing).0, 404);

    // Metrics: CPU in millicores, memory in Mi, for the sandbox (when the platform has
    // sampled it: metrics-server scrapes on its own period).
    let started = Instant::now();
    let metrics = loop {
        let m = env.client.sandbox_metrics(&ns).await.unwrap();
        if m.iter().any(|m| m.name == "life") || started.elapsed() > Duration::from_secs(60) {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let m = metrics
        .iter()
        .find(|m| m.name == "life")
        .unwrap_or_else(|| panic!("no metrics of life: {metrics:?}"));
    assert!(
        m.cpu_usage.ends_with('m') && m.memory_usage.ends_with("Mi"),
        "{m:?}"
    );

    // Pause and resume.
    let pause = PauseRequest {
        namespace: Some(ns.clone()),
        snapshot: None,
    };
    env.client.pause_sandbox("life", &pause).await.unwrap();
    let paused = env.get("life").await.unwrap();
    assert_eq!(
        (paused.status, paused.ready.as_str()),
        (SandboxStatus::Paused, "False")
    );
    // A second pause is no error: the sandbox stays paused.
    env.client.pause_sandbox("life", &pause).await.unwrap();
    assert_eq!(env.get("life").await.unwrap().status, SandboxStatus::Paused);
    env.client
        .resume_sandbox(
            "life",
            &ResumeRequest {
                namespace: Some(ns.clone()),
            },
        )
        .await
        .unwrap();
    env.running("life").await;

    // Delete: gone, and a second delete is 404.
    env.client.delete_sandbox("life", &ns).await.unwrap();
    assert_eq!(api_status(env.get("life").await).0, 404);
    assert_eq!(
        api_status(env.client.delete_sandbox("life", &ns).await).0,
        404
    );
    env.cleanup().await;
}

/// Named snapshot, fork (generated and named intermediate snapshot), restore (with and
/// without keeping the snapshot), pause with a snapshot, snapshot list/get/delete, and the
/// contract's 400/404/409 answers.
async fn snapshots(platform: Platform) {
    let env = Env::new(platform, "snap").await;
    let ns = env.namespace.clone();
    env.create("src").await;
    let snapshot = |name: Option<&str>| CreateSnapshotRequest {
        snapshot_name: name.map(str::to_string),
        namespace: Some(ns.clone()),
    };

    // Named snapshot: 201; the name again 409; no name 400; of a missing sandbox 404.
    env.client
        .snapshot_sandbox("src", &snapshot(Some("snap1")))
        .await
        .unwrap();
    assert_eq!(
        api_status(
            env.client
                .snapshot_sandbox("src", &snapshot(Some("snap1")))
                .await
        )
        .0,
        409
    );
    assert_eq!(
        api_status(env.client.snapshot_sandbox("src", &snapshot(None)).await).0,
        400
    );
    assert_eq!(
        api_status(
            env.client
                .snapshot_sandbox("nope", &snapshot(Some("snap9")))
                .await
        )
        .0,
        404
    );
    assert_eq!(env.get("src").await.unwrap().status, SandboxStatus::Running);
    let started = Instant::now();
    let record = loop {
        let s = env.client.get_snapshot("snap1", &ns).await.unwrap();
        if s.ready_to_use || started.elapsed() > Duration::from_secs(60) {
            break s;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(record.ready_to_use, "{record:?}");
    assert_eq!(
        (
            record.kind,
            record.source_sandbox.as_str(),
            record.namespace.as_str()
        ),
        (SnapshotKind::Named, "src", ns.as_str())
    );
    assert_eq!(
        api_status(env.client.get_snapshot("nope", &ns).await).0,
        404
    );

    // Fork without a snapshot name: the clone runs, its intermediate `fork` snapshot is gone.
    let fork = |new: Option<&str>, snap: Option<&str>| ForkRequest {
        new_name: new.map(str::to_string),
        namespace: Some(ns.clone()),
        snapshot: snap.map(str::to_string),
        warm: false,
    };
    env.client
        .fork_sandbox("src", &fork(Some("clone"), None))
        .await
        .unwrap();
    env.running("clone").await;
    assert!(env.snapshots(Some("fork")).await.is_empty());
    assert_eq!(
        api_status(
            env.client
                .fork_sandbox("src", &fork(Some("clone"), None))
                .await
        )
        .0,
        409
    );
    assert_eq!(
        api_status(
            env.client
                .fork_sandbox("nope", &fork(Some("x"), None))
                .await
        )
        .0,
        404
    );
    assert_eq!(
        api_status(env.client.fork_sandbox("src", &fork(None, None)).await).0,
        400
    );
    // With a snapshot name, the intermediate snapshot is kept as `named`.
    env.client
        .fork_sandbox("src", &fork(Some("clone2"), Some("forksnap")))
        .await
        .unwrap();
    env.running("clone2").await;
    let forksnap = env.client.get_snapshot("forksnap", &ns).await.unwrap();
    assert_eq!(
        (forksnap.kind, forksnap.source_sandbox.as_str()),
        (SnapshotKind::Named, "src")
    );

    // Restore: a new sandbox of the snapshot's image; 409 on a taken name, 404 without the
    // snapshot, 400 without a name.
    let restore = |new: Option<&str>, keep: Option<bool>| RestoreRequest {
        new_sandbox_name: new.map(str::to_string),
        namespace: Some(ns.clone()),
        keep_snapshot: keep,
        ..Default::default()
    };
    env.client
        .restore_snapshot("snap1", &restore(Some("restored"), None))
        .await
        .unwrap();
    let restored = env.running("restored").await;
    assert_eq!(
        (restored.image.as_str(), restored.backend.as_str()),
        (env.image.as_str(), env.backend())
    );
    assert_eq!(
        api_status(
            env.client
                .restore_snapshot("snap1", &restore(Some("restored"), None))
                .await
        )
        .0,
        409
    );
    assert_eq!(
        api_status(
            env.client
                .restore_snapshot("nope", &restore(Some("r9"), None))
                .await
        )
        .0,
        404
    );
    assert_eq!(
        api_status(
            env.client
                .restore_snapshot("snap1", &restore(None, None))
                .await
        )
        .0,
        400
    );
    // keep_snapshot: false: the snapshot goes once the new sandbox is Ready.
    env.client
        .restore_snapshot("forksnap", &restore(Some("restored2"), Some(false)))
        .await
        .unwrap();
    env.running("restored2").await;
    let started = Instant::now();
    while env.snapshots(None).await.contains(&"forksnap".to_string()) {
        assert!(started.elapsed() < Duration::from_secs(60), "forksnap kept");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Pause with a snapshot: Paused, and a `pause` snapshot of it.
    env.client
        .pause_sandbox(
            "src",
            &PauseRequest {
                namespace: Some(ns.clone()),
                snapshot: Some("src-paused".into()),
            },
        )
        .await
        .unwrap();
    assert_eq!(env.get("src").await.unwrap().status, SandboxStatus::Paused);
    assert_eq!(env.snapshots(Some("pause")).await, ["src-paused"]);
    let paused = env.client.get_snapshot("src-paused", &ns).await.unwrap();
    assert_eq!(paused.source_sandbox, "src");

    // Delete: 200, then 404.
    env.client.delete_snapshot("snap1", &ns).await.unwrap();
    assert_eq!(
        api_status(env.client.delete_snapshot("snap1", &ns).await).0,
        404
    );
    assert_eq!(env.snapshots(Some("named")).await, Vec::<String>::new());

    // Delete all: every sandbox of the namespace, one result each.
    let (status, body) = call_at(
        &env.url,
        &env.token,
        M::DELETE,
        &format!("/api/v1/sandboxes?namespace={ns}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let results = body["data"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 5, "{body}");
    assert!(
        results.iter().all(|r| r["success"] == json!(true)),
        "{body}"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn lifecycle_on_sbxd() {
    lifecycle(Platform::Local).await;
}

#[tokio::test]
async fn lifecycle_on_kubernetes() {
    lifecycle(Platform::Kubernetes).await;
}

#[tokio::test]
async fn lifecycle_in_cluster() {
    lifecycle(Platform::InCluster).await;
}

/// The sbxd backend on Kubernetes: the agent on the real node runs the sandbox.
#[tokio::test]
async fn lifecycle_in_cluster_on_sbxd() {
    lifecycle(Platform::InClusterSbxd).await;
}

#[tokio::test]
async fn snapshots_on_sbxd() {
    snapshots(Platform::Local).await;
}

#[tokio::test]
async fn snapshots_on_kubernetes() {
    snapshots(Platform::Kubernetes).await;
}

#[tokio::test]
async fn snapshots_in_cluster() {
    snapshots(Platform::InCluster).await;
}

#[tokio::test]
async fn snapshots_in_cluster_on_sbxd() {
    snapshots(Platform::InClusterSbxd).await;
}
