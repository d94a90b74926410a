//! Test harness: starts the real `sbx serve` binary on 127.0.0.1:0 with a temporary data dir,
//! and hands out the real client and the real CLI pointed at it.
#![allow(dead_code)]

pub mod in_cluster;
pub mod pools;
pub mod prometheus;
pub mod sbxd;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sbx::cli::client::ApiClient;

/// Path of the binary under test.
pub fn sbx_bin() -> &'static str {
    env!("CARGO_BIN_EXE_sbx")
}

/// A running daemon; stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Daemon {
    child: Option<Child>,
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    /// The data dir (kept across restarts of the same Daemon).
    pub data_dir: PathBuf,
    _tmp: Arc<tempfile::TempDir>,
    /// Every line the daemon wrote to stderr so far.
    pub log: Arc<Mutex<Vec<String>>>,
    /// Whether dropping this value also removes sandboxes its daemon left running.
    reap_on_drop: bool,
}

impl Daemon {
    /// Starts a daemon with a fresh data dir.
    pub fn start() -> Daemon {
        Daemon::start_with(&[])
    }

    /// Like [`Daemon::start_with`], with extra environment variables for `sbx serve`.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let tmp = Arc::new(tempfile::tempdir().expect("tempdir"));
        // Sandbox roots (user namespaces) must be reachable through it.
        std::fs::set_permissions(
            tmp.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o711),
        )
        .expect("chmod tempdir");
        let data_dir = tmp.path().join("data");
        Daemon::spawn_env(tmp, data_dir, args, env)
    }

    /// Starts `sbx serve --platform kubernetes` against the test cluster, as the ServiceAccount
    /// `deploy/` makes (`daemon_kubeconfig`), with this config file text (e.g. a
    /// `[kubernetes]` section).
    pub fn start_on_kubernetes(config: &str) -> Daemon {
        let tmp = Arc::new(tempfile::tempdir().expect("tempdir"));
        let path = tmp.path().join("sbx.toml");
        std::fs::write(&path, config).expect("write the config");
        let data_dir = tmp.path().join("data");
        let path = path.to_str().expect("utf-8 path").to_string();
        Daemon::spawn_env(
            tmp,
            data_dir,
            &["--platform", "kubernetes", "--config", &path],
            &[("KUBECONFIG", daemon_kubeconfig().as_str())],
        )
    }

    /// Starts a daemon with a fresh data dir and extra `serve` arguments.
    pub fn start_with(args: &[&str]) -> Daemon {
        Daemon::start_with_env(args, &[])
    }

    fn spawn(tmp: Arc<tempfile::TempDir>, data_dir: PathBuf, args: &[&str]) -> Daemon {
        Daemon::spawn_env(tmp, data_dir, args, &[])
    }

    fn spawn_env(
        tmp: Arc<tempfile::TempDir>,
        data_dir: PathBuf,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Daemon {
        let mut command = Command::new(sbx_bin());
        // Every test daemon inherits umask 0077, as from a hardened service manager or a CI
        // runner: sandboxes must work whatever umask the daemon was started with.
        // SAFETY: umask(2) is async-signal-safe and touches no memory.
        unsafe {
            command.pre_exec(|| {
                nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
                Ok(())
            });
        }
        let mut child = command
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(&data_dir)
            .args(args)
            .env("SBX_LOG", "info")
            .envs(env.iter().copied())
            .env_remove("SBX_MODE")
            .env_remove("SBX_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sbx serve");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(at) = line.find("listening on http://") {
                    // Text or JSON (`--log-format json`) log lines.
                    let url = line[at + "listening on ".len()..]
                        .split(|c: char| c.is_whitespace() || c == '"')
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(url);
                    }
                }
                sink.lock().unwrap().push(line);
            }
        });
        let url = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "sbx serve did not start; its log:\n{}",
                    log.lock().unwrap().join("\n")
                );
            }
        };
        Daemon {
            child: Some(child),
            url,
            data_dir,
            _tmp: tmp,
            log,
            reap_on_drop: true,
        }
    }

    /// The daemon's PID (0 once stopped).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// The first admin token the daemon minted into its data dir.
    pub fn admin_token(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("admin.token"))
            .expect("admin.token")
            .trim()
            .to_string()
    }

    /// A client with a key.
    pub fn client(&self, key: &str) -> ApiClient {
        ApiClient::new(&self.url, Some(key.to_string())).expect("client")
    }

    /// A client with the admin key.
    pub fn admin(&self) -> ApiClient {
        self.client(&self.admin_token())
    }

    /// A plain HTTP client for requests the typed client cannot make (bad bodies, headers).
    pub fn http(&self) -> reqwest::Client {
        reqwest::Client::new()
    }

    /// The `/metrics` text, scraped with `key`.
    pub async fn scrape(&self, key: &str) -> String {
        self.http()
            .get(format!("{}/metrics", self.url))
            .header("x-api-key", key)
            .send()
            .await
            .expect("scrape /metrics")
            .text()
            .await
            .expect("the /metrics text")
    }

    /// Sends SIGTERM and waits; returns whether the daemon exited successfully.
    pub fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return true;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        for _ in 0..100 {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// Kills the daemon with SIGKILL, as a crash would.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the daemon and starts it again on the same data dir (new port).
    pub fn restart(mut self, args: &[&str]) -> Daemon {
        if self.child.is_some() {
            assert!(self.stop(), "daemon did not stop cleanly");
        }
        self.reap_on_drop = false;
        let tmp = self._tmp.clone();
        let data_dir = self.data_dir.clone();
        Daemon::spawn(tmp, data_dir, args)
    }

    /// The daemon's log so far, joined.
    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
        if self.reap_on_drop {
            reap_sandboxes(&self.data_dir);
        }
        // Every daemon of the suite: no API token (`<16 hex>_<64 hex>`, the bootstrap admin's
        // and every minted one) in its log or its audit trail.
        if std::thread::panicking() {
            // The test failed: what the daemon said went wrong is the first thing to read.
            let log = self.log.lock().unwrap();
            let notable: Vec<&str> = log
                .iter()
                .map(String::as_str)
                .filter(|l| l.contains("WARN") || l.contains("ERROR"))
                .collect();
            if !notable.is_empty() {
                eprintln!("the daemon's warnings and errors:\n{}", notable.join("\n"));
            }
        } else {
            let audit =
                std::fs::read_to_string(self.data_dir.join("audit.jsonl")).unwrap_or_default();
            let log = self.log.lock().unwrap();
            for line in log.iter().map(String::as_str).chain(audit.lines()) {
                if let Some(token) = find_token(line) {
                    panic!("an API token is in the daemon's log or audit trail: {token}\n{line}");
                }
            }
        }
    }
}

/// The first API token (`<16 hex>_<64 hex>`) in `text`, if any.
pub fn find_token(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let hex = |range: std::ops::Range<usize>| {
        bytes
            .get(range)
            .is_some_and(|b| b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')))
    };
    (16..bytes.len()).find_map(|at| {
        (bytes[at] == b'_' && hex(at - 16..at) && hex(at + 1..at + 65))
            .then(|| &text[at - 16..at + 65])
    })
}

/// Removes what sandboxes of a stopped daemon left on the host (sandboxes outlive their
/// daemon by design), so that a failing test leaks nothing: containers, their processes,
/// cgroups and mounts. Their network namespaces are removed by `sbxd::TestNet`.
pub fn reap_sandboxes(data_dir: &Path) {
    for runtime in ["runc", "crun"] {
        let root = data_dir.join("runtime").join(runtime);
        if !root.is_dir() {
            continue;
        }
        let listed = Command::new(runtime)
            .arg("--root")
            .arg(&root)
            .args(["list", "-q"])
            .output();
        for id in listed
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
            .lines()
        {
            let _ = Command::new(runtime)
                .arg("--root")
                .arg(&root)
                .args(["delete", "--force", id])
                .stderr(Stdio::null())
                .status();
        }
    }
    let ids: Vec<String> = std::fs::read_dir(data_dir.join("sandboxes"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    for id in &ids {
        if let Ok(procs) =
            std::fs::read_to_string(format!("/sys/fs/cgroup/pids/sbx/{id}/cgroup.procs"))
        {
            for pid in procs.lines() {
                let _ = Command::new("kill").args(["-9", pid]).status();
            }
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    for id in &ids {
        if let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") {
            for h in hierarchies.flatten() {
                let _ = std::fs::remove_dir(h.path().join("sbx").join(id));
            }
        }
    }
    let data = data_dir.display().to_string();
    let mut mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_string))
        .filter(|m| m.starts_with(&data))
        .collect();
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for m in mounts {
        let _ = Command::new("umount").args(["-l", &m]).status();
    }
}

/// The CLI under test with an isolated config dir and no inherited SBX_* settings.
pub fn cli(config_dir: &Path) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::new(sbx_bin());
    for var in [
        "SBX_SERVER",
        "SBX_API_KEY",
        "SBX_PROFILE",
        "SBX_OUTPUT",
        "SBX_DATA_DIR",
        "SBX_LOG",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("SBX_CONFIG_DIR", config_dir);
    cmd
}

/// The loopback test registry (`127.0.0.1:PORT`) that `scripts/registry start` runs and loads
/// with the test images.
pub fn test_registry() -> String {
    match std::env::var("SBX_TEST_REGISTRY") {
        Ok(address) if !address.trim().is_empty() => address.trim().to_string(),
        _ => panic!(
            "SBX_TEST_REGISTRY is not set: run scripts/test or `eval $(scripts/registry start)`"
        ),
    }
}

/// One API call with a key in `X-API-Key`: the status and the body as JSON (the raw text as a
/// JSON string when it is not JSON).
pub async fn call(
    daemon: &Daemon,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    call_at(&daemon.url, token, method, path, body).await
}

/// [`call`] to the service at `url` (a daemon of the test's or a deployed one).
pub async fn call_at(
    url: &str,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{url}{path}"))
        .header("x-api-key", token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

/// Mints a key (one day) with the admin client and returns its token.
pub async fn key(admin: &ApiClient, name: &str, role: &str, tenant: Option<&str>) -> String {
    admin
        .create_key(&sbx::shared::models::identity::CreateKeyRequest {
            name: Some(name.into()),
            role: Some(role.into()),
            tenant: tenant.map(Into::into),
            expires_days: Some(1),
            ..Default::default()
        })
        .await
        .expect("create key")
        .token
        .expect("token")
}

/// The kubeconfig of the simulated cluster `scripts/test` starts (`scripts/k8s-testenv`).
pub fn kubeconfig() -> String {
    std::env::var("SBX_TEST_KUBECONFIG").expect(
        "SBX_TEST_KUBECONFIG is not set: run scripts/test, or `eval \"$(scripts/k8s-testenv start)\"` \
         and export SBX_TEST_KUBECONFIG=$KUBECONFIG",
    )
}

/// A kubeconfig of the test cluster as the daemon's own ServiceAccount (`sbx-system/sbx`)
/// under the RBAC that `deploy/` grants, never as the cluster's admin: every daemon the
/// Kubernetes tests start uses it, so that a permission the manifests lack fails a test.
/// Made once per test process: the ServiceAccount, the roles and bindings applied from
/// `deploy/` (server-side apply, as `kubectl apply` would), a token from the TokenRequest API.
pub fn daemon_kubeconfig() -> String {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        // Its own thread and runtime: callers may be inside a runtime already.
        std::thread::spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(service_account_kubeconfig())
        })
        .join()
        .expect("the daemon's kubeconfig")
    })
    .clone()
}

async fn service_account_kubeconfig() -> String {
    for file in ["namespace.yaml", "serviceaccount.yaml", "rbac.yaml"] {
        apply_deploy_file(file, &[]).await;
    }
    service_account_kubeconfig_of("sbx-system", "sbx").await
}

/// Grants the daemon's ServiceAccount in `namespace` what `deploy/rbac.yaml` grants it in the
/// agents' namespace `sbx-agent` (its Role and RoleBinding there, copied), for a test that
/// runs its agents in a namespace of its own (`[kubernetes] agentNamespace`).
pub async fn grant_agents_role_in(namespace: &str) {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    use serde::Deserialize;

    let client = cluster().await;
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/rbac.yaml"))
            .unwrap();
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let mut object = DynamicObject::deserialize(document).unwrap();
        let types = object.types.clone().expect("apiVersion and kind");
        if object.metadata.namespace.as_deref() != Some("sbx-agent")
            || !["Role", "RoleBinding"].contains(&types.kind.as_str())
        {
            continue;
        }
        object.metadata.namespace = Some(namespace.to_string());
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            &types.kind,
        ));
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
        let name = object.metadata.name.clone().unwrap();
        api.patch(
            &name,
            &PatchParams::apply("sbx-tests").force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap();
    }
}

/// Applies the objects of `deploy/<file>` (server-side apply, as `kubectl apply` would),
/// except those of the kinds in `skip`.
pub async fn apply_deploy_file(file: &str, skip: &[&str]) {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    use serde::Deserialize;

    let client = cluster().await;
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let text = std::fs::read_to_string(deploy.join(file)).unwrap();
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let object = DynamicObject::deserialize(document).unwrap();
        let types = object.types.clone().expect("apiVersion and kind");
        if skip.contains(&types.kind.as_str()) {
            continue;
        }
        let (group, version) = types
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", &types.api_version));
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &types.kind));
        let api: Api<DynamicObject> = match &object.metadata.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let name = object.metadata.name.clone().unwrap();
        api.patch(
            &name,
            &PatchParams::apply("sbx-tests").force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("apply {} {name} from deploy/{file}: {e}", types.kind));
    }
}

/// A token of the ServiceAccount `namespace/name` (made when missing) from the TokenRequest
/// API, for `audiences` (none: the API server's).
pub async fn service_account_token(namespace: &str, name: &str, audiences: &[&str]) -> String {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    use kube::api::{Api, Patch, PatchParams, PostParams};

    let accounts: Api<ServiceAccount> = Api::namespaced(cluster().await, namespace);
    let account = serde_json::json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace},
    });
    accounts
        .patch(
            name,
            &PatchParams::apply("sbx-tests"),
            &Patch::Apply(&account),
        )
        .await
        .unwrap_or_else(|e| panic!("ServiceAccount {namespace}/{name}: {e}"));
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: (!audiences.is_empty())
                .then(|| audiences.iter().map(|a| a.to_string()).collect()),
            // A test process lasts minutes: two hours is plenty, and the token dies sooner
            // with its cluster anyway.
            expiration_seconds: Some(2 * 3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token: TokenRequest = accounts
        .create_subresource("token", name, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("a token of {namespace}/{name}: {e}"));
    token
        .status
        .and_then(|s| s.token)
        .expect("a token in the TokenRequest's status")
}

/// A kubeconfig of the test cluster as the ServiceAccount `namespace/name` (made when
/// missing, with whatever RBAC it has), by a token from the TokenRequest API.
pub async fn service_account_kubeconfig_of(namespace: &str, name: &str) -> String {
    let token = service_account_token(namespace, name, &[]).await;
    let mut config: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(kubeconfig()).unwrap()).unwrap();
    config["users"] =
        serde_yaml_ng::from_str(&format!("[{{name: {name}, user: {{token: {token}}}}}]")).unwrap();
    config["contexts"][0]["context"]["user"] = name.into();
    // Beside the cluster's own kubeconfig, in its state dir: `scripts/k8s-testenv stop`
    // removes the tokens with the cluster they are valid for.
    let dir = std::path::Path::new(&kubeconfig())
        .parent()
        .expect("the kubeconfig's directory")
        .join(format!("test-tokens/{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{namespace}-{name}.kubeconfig"));
    std::fs::write(&path, serde_yaml_ng::to_string(&config).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

/// A kube-rs client of that cluster (as its admin), to check what the daemon wrote.
pub async fn cluster() -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig()).expect("read the kubeconfig"),
        &Default::default(),
    )
    .await
    .expect("kubeconfig");
    kube::Client::try_from(config).expect("kube client")
}

/// The first admin token a daemon on the test cluster stored in `kube-system`.
pub async fn bootstrap_token(client: &kube::Client) -> String {
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), "kube-system");
    let secret = secrets
        .get("sbx-bootstrap-admin")
        .await
        .expect("the bootstrap Secret");
    String::from_utf8(secret.data.expect("data")["token"].0.clone())
        .expect("utf-8 token")
        .trim()
        .to_string()
}

/// Runs a command with `stdin` as its input (nothing when `None`); its output.
pub fn cmd(args: &[&str], stdin: Option<&str>) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {args:?}: {e}"));
    let mut pipe = child.stdin.take().unwrap();
    if let Some(input) = stdin {
        pipe.write_all(input.as_bytes()).unwrap();
    }
    drop(pipe);
    child.wait_with_output().unwrap()
}

/// Runs a command that must succeed; returns its stdout.
pub fn ok(args: &[&str], stdin: Option<&str>) -> String {
    let out = cmd(args, stdin);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `sbx serve ARGS --data-dir DATA_DIR` (no `SBX_MODE`/`SBX_CONFIG` from the caller's
/// environment) and asserts that it refuses to start: it must exit non-zero within 30 s (else
/// it is killed, what it mounted is removed, and the test fails). Returns its standard error.
pub fn serve_refused(args: &[&str], data_dir: &Path) -> String {
    use std::io::Read;
    let mut child = Command::new(sbx_bin())
        .arg("serve")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("SBX_MODE")
        .env_remove("SBX_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sbx serve");
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            reap_sandboxes(data_dir);
            panic!("sbx serve {args:?} started, where it should have refused to");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    assert!(!status.success(), "{stderr}");
    stderr
}
