//! An API server that is unreachable at start-up, or lost and back later.
use super::*;

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
            // The API server is what this cluster is for: no real node.
            .env("SBX_K8S_REAL_NODE", "0")
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
    let (status, body) = call(&daemon, "", reqwest::Method::GET, "/readyz", None).await;
    assert_eq!((status, &body), (200, &json!({"status": "ready"})));
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
    // Gone once its leader is a zombie and no other thread is left: the leader turns zombie
    // while its other threads still exit, and the last of them closes the listening socket.
    let threads = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && (!std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
            || threads() > 1)
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
    // The replica says it is not ready (a kubelet takes it out of its Service), and why.
    let (status, body) = call(&daemon, "", reqwest::Method::GET, "/readyz", None).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (503, Some("not ready")),
        "{body}"
    );
    assert!(
        body["reason"].as_str().unwrap().contains("API server"),
        "{body}"
    );
    // It comes back (the same program and flags: same port, certificates and etcd), and so
    // does the daemon, without a restart.
    // Its port free again first (std binds with SO_REUSEADDR, as the API server does).
    let port: u16 = apiserver
        .iter()
        .position(|a| a == "--secure-port")
        .and_then(|i| apiserver.get(i + 1))
        .expect("the API server's --secure-port")
        .parse()
        .unwrap();
    let freed = Instant::now();
    while std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
        assert!(
            freed.elapsed() < Duration::from_secs(30),
            "port {port} of the killed API server still in use after 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
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
    let started = Instant::now();
    let ready = loop {
        let (status, body) = call(&daemon, "", reqwest::Method::GET, "/readyz", None).await;
        if status == 200 || started.elapsed() > Duration::from_secs(30) {
            break (status, body);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(ready.0, 200, "{}", ready.1);
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
    let stderr = failed_start(&config);
    assert!(
        stderr.contains("Kubernetes API server is unreachable"),
        "{stderr}"
    );
}

/// A daemon whose identity lacks permissions (a ServiceAccount with no RBAC) does not start,
/// and says which verb on which resource it was denied and what to apply.
#[tokio::test]
async fn a_missing_permission_at_start_is_named() {
    // The namespace deploy/ makes (applied by the daemons' own kubeconfig).
    common::daemon_kubeconfig();
    let config = common::service_account_kubeconfig_of("sbx-system", "sbx-unbound").await;
    let stderr = failed_start(&config);
    for expected in [
        "this cluster is not ready for sbx (apply deploy/",
        "permission denied: `get` deployments (apps) in every namespace",
        "permission denied: `update` leases (coordination.k8s.io) in namespace kube-system",
        // The rules it binds per namespace are read from their ClusterRole.
        "cannot read the ClusterRole `sbx-tenant`",
    ] {
        assert!(stderr.contains(expected), "{expected} not in: {stderr}");
    }
}

/// Runs `sbx serve --platform kubernetes` with `kubeconfig`, which must fail to start; its
/// stderr.
fn failed_start(kubeconfig: impl AsRef<std::ffi::OsStr>) -> String {
    let dir = tempfile::tempdir().unwrap();
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
        .env("KUBECONFIG", kubeconfig)
        .output()
        .unwrap();
    assert!(!output.status.success());
    String::from_utf8_lossy(&output.stderr).into_owned()
}
