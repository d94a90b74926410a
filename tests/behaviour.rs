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
#[path = "behaviour/fields.rs"]
mod fields;
#[path = "behaviour/files.rs"]
mod files;
#[path = "behaviour/lifetimes.rs"]
mod lifetimes;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::sbxd::{self, TestNet};
use common::{Daemon, bootstrap_token, call_at, cluster, in_cluster};
use reqwest::Method as M;
use sbx::cli::client::{ApiClient, ClientError};
use sbx::shared::exec_stream::{ExecSession, ExecStatus, ExecStreamQuery, Frame, TermSize};
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
                // The two in-cluster backends run the same scenarios one after the other:
                // each has namespaces of its own.
                let namespace = match platform {
                    Platform::InCluster => format!("bh-ic-{suffix}"),
                    _ => format!("bh-ics-{suffix}"),
                };
                // The deployment runs in production mode: sandboxes only in a tenant's
                // namespaces (issue 43, 12). One left by an earlier run will do.
                let _ = client
                    .create_tenant(&sbx::shared::models::tenant::CreateTenantRequest {
                        name: Some(namespace.clone()),
                        spec: Some(
                            serde_json::from_value(serde_json::json!({"namespaces": [namespace]}))
                                .unwrap(),
                        ),
                        labels: None,
                    })
                    .await;
                Env {
                    platform,
                    client,
                    token,
                    url: deployed.url.clone(),
                    _daemon: None,
                    namespace,
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

/// Frames of a streamed exec until its status: stdout, stderr (each as received) and the
/// status.
async fn drain(session: &mut ExecSession, what: &str) -> (Vec<String>, String, ExecStatus) {
    let (mut out, mut err) = (Vec::new(), String::new());
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(120), session.output.recv())
            .await
            .unwrap_or_else(|_| panic!("{what}: no status in 2 minutes after {out:?} {err:?}"))
            .expect("a streamed exec sends its status before it ends");
        match frame {
            Frame::Stdout(b) => out.push(String::from_utf8_lossy(&b).into_owned()),
            Frame::Stderr(b) => err.push_str(&String::from_utf8_lossy(&b)),
            Frame::Status(status) => return (out, err, status),
            other => panic!("a server sent {other:?}"),
        }
    }
}

/// Reads a streamed exec's stdout until it contains `wanted`, sending `poke` (if any) every
/// second meanwhile; what was read.
async fn read_until(session: &mut ExecSession, wanted: &str, poke: Option<&[u8]>) -> String {
    let started = Instant::now();
    let mut seen = String::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while !seen.contains(wanted) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no {wanted:?} in a minute of output: {seen:?}"
        );
        tokio::select! {
            frame = session.output.recv() => match frame {
                Some(Frame::Stdout(b)) | Some(Frame::Stderr(b)) => seen.push_str(&String::from_utf8_lossy(&b)),
                other => panic!("waiting for {wanted:?} after {seen:?}: {other:?}"),
            },
            _ = tick.tick() => {
                if let Some(poke) = poke {
                    session.input.send(Frame::Stdin(Bytes::copy_from_slice(poke))).await.unwrap();
                }
            }
        }
    }
    seen
}

/// The streamed exec (`exec/stream`, a WebSocket): output as it comes with the streams apart,
/// stdin and its end, a terminal of a given size that follows resizes, a signal, the time
/// limit, a client that leaves ending the command, the refusals of the contract; then
/// `sbx sandbox exec -it` driven on a real pseudo-terminal.
async fn interactive(platform: Platform) {
    let env = Env::new(platform, "tty").await;
    let ns = env.namespace.clone();
    env.create("tty").await;
    let query = |command: &str| ExecStreamQuery {
        namespace: Some(ns.clone()),
        command: Some(command.to_string()),
        ..Default::default()
    };

    // Output as it comes: the first line arrives on its own, before the command ends.
    let mut s = env
        .client
        .exec_stream(
            "tty",
            &query("echo out; echo err >&2; sleep 2; echo late; exit 3"),
        )
        .await
        .unwrap();
    let (out, err, status) = drain(&mut s, "output").await;
    assert_eq!(out.first().map(String::as_str), Some("out\n"), "{out:?}");
    assert_eq!(
        (out.concat().as_str(), err.as_str()),
        ("out\nlate\n", "err\n")
    );
    assert_eq!(status, ExecStatus::exited(3));

    // Stdin, then its end.
    let mut s = env
        .client
        .exec_stream(
            "tty",
            &ExecStreamQuery {
                stdin: true,
                ..query("cat; echo end")
            },
        )
        .await
        .unwrap();
    s.input
        .send(Frame::Stdin(Bytes::from_static(b"typed\n")))
        .await
        .unwrap();
    s.input.send(Frame::CloseStdin).await.unwrap();
    let (out, _, status) = drain(&mut s, "stdin").await;
    assert_eq!(
        (out.concat().as_str(), status),
        ("typed\nend\n", ExecStatus::exited(0))
    );

    // A terminal: its size at start, then after a resize; the shell's exit status.
    let mut s = env
        .client
        .exec_stream(
            "tty",
            &ExecStreamQuery {
                tty: true,
                stdin: true,
                cols: Some(120),
                rows: Some(40),
                ..query("sh")
            },
        )
        .await
        .unwrap();
    read_until(&mut s, "40 120", Some(b"stty size\n")).await;
    s.input
        .send(Frame::Resize(TermSize {
            cols: 132,
            rows: 50,
        }))
        .await
        .unwrap();
    read_until(&mut s, "50 132", Some(b"stty size\n")).await;
    s.input
        .send(Frame::Stdin(Bytes::from_static(b"exit 4\n")))
        .await
        .unwrap();
    let (_, _, status) = drain(&mut s, "terminal").await;
    assert_eq!(status, ExecStatus::exited(4));

    // A signal reaches the command.
    let mut s = env
        .client
        .exec_stream(
            "tty",
            &query("trap 'echo got-int; exit 5' INT; echo ready; while :; do sleep 1; done"),
        )
        .await
        .unwrap();
    read_until(&mut s, "ready", None).await;
    s.input.send(Frame::Signal("INT".into())).await.unwrap();
    let (out, _, status) = drain(&mut s, "signal").await;
    assert_eq!(
        (out.concat().as_str(), status),
        ("got-int\n", ExecStatus::exited(5))
    );

    // The time limit kills it: 124, timed out.
    let mut s = env
        .client
        .exec_stream(
            "tty",
            &ExecStreamQuery {
                timeout_seconds: Some(1),
                ..query("sleep 60")
            },
        )
        .await
        .unwrap();
    let (_, _, status) = drain(&mut s, "time limit").await;
    assert_eq!((status.exit_code, status.timed_out), (Some(124), true));

    // A client that leaves ends the command.
    let pid_file = format!("/tmp/sbx-leave-{ns}.pid");
    let mut s = env
        .client
        .exec_stream(
            "tty",
            &query(&format!(
                "echo $$ > {pid_file}; echo ready; exec sleep 1000"
            )),
        )
        .await
        .unwrap();
    read_until(&mut s, "ready", None).await;
    drop(s);
    let started = Instant::now();
    loop {
        let r = env
            .exec("tty", &format!("kill -0 $(cat {pid_file}) 2>/dev/null"))
            .await;
        if r.exit_code != 0 {
            break;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let ps = env.exec("tty", "ps -o pid,ppid,stat,args").await.stdout;
            let log = env
                ._daemon
                .as_ref()
                .map(|d| d.log_text())
                .unwrap_or_default();
            panic!("the command of a client that left still runs:\n{ps}\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    env.exec("tty", &format!("rm -f {pid_file}")).await;

    // Logs followed: the last lines, then new ones as they are written, each once; the
    // stream ends when the client leaves.
    env.say("tty", "follow one").await;
    let follow = LogsQuery {
        namespace: Some(ns.clone()),
        tail: 1,
        follow: true,
        ..Default::default()
    };
    let mut chunks = env.client.follow_logs("tty", &follow).await.unwrap();
    let mut text = String::new();
    let mut read_log = async |text: &mut String, wanted: &str| {
        let started = Instant::now();
        while !text.contains(wanted) {
            let chunk = tokio::time::timeout(Duration::from_secs(60), chunks.recv())
                .await
                .unwrap_or_else(|_| panic!("no {wanted:?} in a followed log: {text:?}"))
                .expect("the followed log ended")
                .unwrap();
            text.push_str(&String::from_utf8_lossy(&chunk));
            assert!(started.elapsed() < Duration::from_secs(60), "{text:?}");
        }
    };
    read_log(&mut text, "follow one\n").await;
    env.say("tty", "follow two").await;
    read_log(&mut text, "follow two\n").await;
    assert_eq!(text.matches("follow one").count(), 1, "{text:?}");
    drop(chunks);
    let missing = env.client.follow_logs("nope", &follow).await.map(drop);
    assert_eq!(api_status(missing).0, 404);

    // Refusals before the upgrade: the envelope with the contract's status.
    let refused = |r: Result<ExecSession, ClientError>| match r {
        Err(ClientError::Api(e)) => (e.status, e.code),
        Err(other) => panic!("expected an API error, got {other}"),
        Ok(_) => panic!("expected an API error, got a session"),
    };
    assert_eq!(
        refused(env.client.exec_stream("nope", &query("true")).await),
        (404, "NotFound".to_string())
    );
    assert_eq!(
        refused(
            env.client
                .exec_stream(
                    "tty",
                    &ExecStreamQuery {
                        command: None,
                        ..query("")
                    }
                )
                .await
        ),
        (400, "BadRequest".to_string())
    );
    let (status, body) = call_at(
        &env.url,
        &env.token,
        M::GET,
        &format!("/api/v1/sandboxes/tty/exec/stream?namespace={ns}&command=true"),
        None,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("WebSocket"),
        "{body}"
    );
    let pause = PauseRequest {
        namespace: Some(ns.clone()),
        snapshot: None,
    };
    env.client.pause_sandbox("tty", &pause).await.unwrap();
    assert_eq!(
        refused(env.client.exec_stream("tty", &query("true")).await),
        (409, "Conflict".to_string())
    );
    env.client
        .resume_sandbox(
            "tty",
            &ResumeRequest {
                namespace: Some(ns.clone()),
            },
        )
        .await
        .unwrap();
    env.running("tty").await;

    // `sbx sandbox exec -it` on a real pseudo-terminal: typed input, the window's size and
    // its change, the exit status, the terminal given back as it was.
    cli_terminal(&env).await;
    env.cleanup().await;
}

/// Drives `sbx sandbox exec -it tty -- sh` on a pseudo-terminal of the test's own.
async fn cli_terminal(env: &Env) {
    use std::os::fd::AsRawFd;
    let winsize = |cols, rows| nix::pty::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&winsize(100, 30)), None).unwrap();
    let before = nix::sys::termios::tcgetattr(&pty.slave).unwrap();
    let stdio = || std::process::Stdio::from(pty.slave.try_clone().unwrap());
    let mut command = tokio::process::Command::new(common::sbx_bin());
    command
        .args([
            "sandbox",
            "exec",
            "-it",
            "tty",
            "-n",
            &env.namespace,
            "--",
            "sh",
        ])
        .env("SBX_SERVER", &env.url)
        .env("SBX_API_KEY", &env.token)
        .env(
            "SBX_CONFIG_DIR",
            std::env::temp_dir().join("sbx-tty-cli-none"),
        )
        .stdin(stdio())
        .stdout(stdio())
        .stderr(stdio())
        .kill_on_drop(true);
    // SAFETY: setsid and ioctl(TIOCSCTTY) take no pointers; called between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let master = std::fs::File::from(pty.master);
    let master_fd = master.as_raw_fd();
    let (tx, mut screen) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut reader = master.try_clone().unwrap();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0
                || tx
                    .send(String::from_utf8_lossy(&buf[..n]).into_owned())
                    .is_err()
            {
                break;
            }
        }
    });
    let mut writer = master.try_clone().unwrap();
    let mut seen = String::new();
    let mut expect = |wanted: &'static str| {
        let started = Instant::now();
        while !seen.contains(wanted) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no {wanted:?} on the terminal: {seen:?}"
            );
            use std::io::Write;
            writer.write_all(b"stty size\r").unwrap();
            std::thread::sleep(Duration::from_millis(500));
            while let Ok(text) = screen.try_recv() {
                seen.push_str(&text);
            }
        }
        seen.clear();
    };
    expect("30 100");
    let size = winsize(140, 45);
    // SAFETY: TIOCSWINSZ reads a winsize from the pointer, which outlives the call.
    assert_eq!(
        unsafe {
            libc::ioctl(
                master_fd,
                libc::TIOCSWINSZ,
                &size as *const nix::pty::Winsize,
            )
        },
        0
    );
    expect("45 140");
    {
        use std::io::Write;
        let mut w = master.try_clone().unwrap();
        w.write_all(b"exit 6\r").unwrap();
    }
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("sbx sandbox exec -it ended after the shell's exit")
        .unwrap();
    assert_eq!(status.code(), Some(6));
    let after = nix::sys::termios::tcgetattr(&pty.slave).unwrap();
    assert_eq!(
        (after.local_flags, after.input_flags),
        (before.local_flags, before.input_flags),
        "sbx left the terminal in raw mode"
    );
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
async fn interactive_on_sbxd() {
    interactive(Platform::Local).await;
}

#[tokio::test]
async fn interactive_on_kubernetes() {
    interactive(Platform::Kubernetes).await;
}

#[tokio::test]
async fn interactive_in_cluster() {
    interactive(Platform::InCluster).await;
}

#[tokio::test]
async fn interactive_in_cluster_on_sbxd() {
    interactive(Platform::InClusterSbxd).await;
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

#[tokio::test]
async fn files_on_sbxd() {
    files::files(Platform::Local).await;
}

#[tokio::test]
async fn files_on_kubernetes() {
    files::files(Platform::Kubernetes).await;
}

#[tokio::test]
async fn files_in_cluster() {
    files::files(Platform::InCluster).await;
}

#[tokio::test]
async fn files_in_cluster_on_sbxd() {
    files::files(Platform::InClusterSbxd).await;
}

#[tokio::test]
async fn fields_on_sbxd() {
    fields::fields(Platform::Local).await;
}

#[tokio::test]
async fn fields_on_kubernetes() {
    fields::fields(Platform::Kubernetes).await;
}

#[tokio::test]
async fn fields_in_cluster() {
    fields::fields(Platform::InCluster).await;
}

#[tokio::test]
async fn fields_in_cluster_on_sbxd() {
    fields::fields(Platform::InClusterSbxd).await;
}

#[tokio::test]
async fn lifetimes_on_sbxd() {
    lifetimes::lifetimes(Platform::Local).await;
}

#[tokio::test]
async fn lifetimes_on_kubernetes() {
    lifetimes::lifetimes(Platform::Kubernetes).await;
}

#[tokio::test]
async fn lifetimes_in_cluster() {
    lifetimes::lifetimes(Platform::InCluster).await;
}

#[tokio::test]
async fn lifetimes_in_cluster_on_sbxd() {
    lifetimes::lifetimes(Platform::InClusterSbxd).await;
}
