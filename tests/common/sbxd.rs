//! Harness for tests with real sandboxes: a router network namespace of the test's own (the
//! daemon's "host side" for veths, forwarding, NAT and nftables — the root namespace is never
//! touched), an "ext" namespace with servers to reach, the loopback test registry, and a
//! daemon configured for them.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use super::Daemon;

static NEXT: AtomicU32 = AtomicU32::new(0);

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {args:?} failed");
}

/// The loopback registry holding the test images (started by scripts/test).
pub fn registry() -> String {
    std::env::var("SBX_TEST_REGISTRY").unwrap_or_else(|_| {
        panic!("SBX_TEST_REGISTRY is not set: run scripts/test, or `eval \"$(scripts/registry start)\"` first")
    })
}

/// The busybox test image in the loopback registry.
pub fn busybox() -> String {
    format!("{}/sbx-test/busybox:latest", registry())
}

/// Allowed and denied test servers in the ext namespace.
pub const ALLOWED_ADDR: &str = "198.51.100.10";
/// A server no allow-list in the tests includes.
pub const DENIED_ADDR: &str = "203.0.113.10";
/// Port of both servers.
pub const SERVER_PORT: u16 = 8080;

/// A router namespace (the daemon's host side) and an "ext" namespace behind it with two
/// HTTP servers; everything is removed on drop.
pub struct TestNet {
    /// Router namespace name.
    pub router: String,
    /// External namespace name.
    pub ext: String,
    servers: Vec<Child>,
    www: tempfile::TempDir,
}

impl TestNet {
    /// Creates the namespaces, links and servers.
    pub fn new() -> TestNet {
        let tag = format!(
            "{}x{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let router = format!("sbxt-r{tag}");
        let ext = format!("sbxt-e{tag}");
        ip(&["netns", "add", &router]);
        ip(&["netns", "add", &ext]);
        ip(&["-n", &router, "link", "set", "lo", "up"]);
        ip(&["-n", &ext, "link", "set", "lo", "up"]);
        ip(&[
            "-n", &router, "link", "add", "up0", "type", "veth", "peer", "name", "ext0", "netns",
            &ext,
        ]);
        ip(&["-n", &router, "addr", "add", "100.64.0.1/24", "dev", "up0"]);
        ip(&["-n", &router, "link", "set", "up0", "up"]);
        ip(&["-n", &ext, "addr", "add", "100.64.0.2/24", "dev", "ext0"]);
        ip(&["-n", &ext, "link", "set", "ext0", "up"]);
        ip(&[
            "-n",
            &ext,
            "addr",
            "add",
            &format!("{ALLOWED_ADDR}/32"),
            "dev",
            "lo",
        ]);
        ip(&[
            "-n",
            &ext,
            "addr",
            "add",
            &format!("{DENIED_ADDR}/32"),
            "dev",
            "lo",
        ]);
        // ext knows nothing of the sandbox pool: replies only work through the router's NAT.
        ip(&["-n", &ext, "route", "add", "default", "via", "100.64.0.1"]);
        ip(&[
            "-n",
            &router,
            "route",
            "add",
            "198.51.100.0/24",
            "via",
            "100.64.0.2",
        ]);
        ip(&[
            "-n",
            &router,
            "route",
            "add",
            "203.0.113.0/24",
            "via",
            "100.64.0.2",
        ]);
        let www = tempfile::tempdir().expect("www dir");
        std::fs::write(www.path().join("index.html"), "hello-from-ext\n").expect("index");
        let mut servers = Vec::new();
        for addr in [ALLOWED_ADDR, DENIED_ADDR] {
            let child = Command::new("ip")
                .args(["netns", "exec", &ext, "busybox", "httpd", "-f", "-p"])
                .arg(format!("{addr}:{SERVER_PORT}"))
                .arg("-h")
                .arg(www.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start httpd");
            servers.push(child);
        }
        TestNet {
            router,
            ext,
            servers,
            www,
        }
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        for child in &mut self.servers {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Sandbox namespaces of daemons that used this net (left behind when a test failed).
        let prefix = self.router.replace("sbxt-r", "sbxt-s");
        if let Ok(entries) = std::fs::read_dir("/run/netns") {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(&prefix) {
                    let _ = Command::new("ip").args(["netns", "del", &name]).status();
                }
            }
        }
        for ns in [&self.router, &self.ext] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// A daemon running real sandboxes: registry marked insecure, private and allowed, host side
/// in `net.router`.
pub fn daemon(net: &TestNet, extra_config: &str) -> Daemon {
    daemon_with_env(net, extra_config, &[])
}

/// [`daemon`] with extra environment variables for `sbx serve`.
pub fn daemon_with_env(net: &TestNet, extra_config: &str, env: &[(&str, &str)]) -> Daemon {
    let dir = tempfile::tempdir().expect("config dir");
    let config = dir.path().join("sbx.toml");
    write_config(&config, net, extra_config);
    let daemon = Daemon::start_with_env(&["--config", config.to_str().expect("utf-8 path")], env);
    drop(dir);
    daemon
}

/// A `PATH` for `sbx serve` on which the iptables tools fail as if not installed (they come
/// first and exit 127), as on a host that has only nftables. Keep the dir alive meanwhile.
pub fn path_without_iptables() -> (tempfile::TempDir, String) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    for tool in [
        "iptables",
        "iptables-restore",
        "iptables-legacy-restore",
        "iptables-nft-restore",
        "ip6tables",
        "ip6tables-restore",
        "ip6tables-legacy-restore",
        "ip6tables-nft-restore",
    ] {
        let path = dir.path().join(tool);
        std::fs::write(
            &path,
            format!("#!/bin/sh\necho '{tool}: not installed on this host' >&2\nexit 127\n"),
        )
        .expect("write a stand-in");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (dir, path)
}

/// A config file for daemons on `net` that a test restarts; keep the dir alive meanwhile.
pub fn config_file(net: &TestNet) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("config dir");
    let path = dir.path().join("sbx.toml");
    write_config(&path, net, "");
    let path = path.to_str().expect("utf-8 path").to_string();
    (dir, path)
}

/// The config file of [`daemon`].
pub fn write_config(path: &Path, net: &TestNet, extra: &str) {
    // A netns prefix of this test's own: clean-up of stale namespaces never touches another
    // daemon's sandboxes. The loopback registry is a private one that tenant users may use.
    let registry = registry();
    let text = format!(
        "[images]\ninsecureRegistries = [\"{registry}\"]\nprivateRegistries = [\"{registry}\"]\nallowedRegistries = [\"docker.io\", \"{registry}\"]\n\n[network]\nhostNetns = \"{}\"\nnetnsPrefix = \"{}-\"\ndns = [\"100.64.0.2\"]\n{extra}\n",
        net.router,
        net.router.replace("sbxt-r", "sbxt-s")
    );
    std::fs::write(path, text).expect("write config");
}

/// The ids of the sandboxes under a data dir (the names of their dirs): without the
/// containers the pool prepared ahead of requests, whose dirs carry `pool.json`.
pub fn sandbox_ids(data_dir: &Path) -> Vec<String> {
    // The markers are read after the dirs: a prepared container's dir appears with its marker.
    let dirs = dir_names(&data_dir.join("sandboxes"));
    let prepared = prepared_ids(data_dir);
    dirs.into_iter()
        .filter(|id| !id.starts_with('.') && !prepared.contains(id))
        .collect()
}

/// The ids of the containers the daemon's pool prepared ahead of requests (not started,
/// no sandbox's yet).
pub fn prepared_ids(data_dir: &Path) -> Vec<String> {
    let sandboxes = data_dir.join("sandboxes");
    dir_names(&sandboxes)
        .into_iter()
        .filter(|id| sandboxes.join(id).join("pool.json").is_file())
        .collect()
}

fn dir_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// What a sandbox leaves on the host while it exists; empty after a delete. The pool's
/// prepared containers are no sandbox's: [`prepared_ids`] (and dirs being made for them).
/// They are read after the rest: everything of a prepared container appears after its
/// marker, so that none of it can slip in between.
pub fn leftovers(daemon: &Daemon, id_hint: Option<&str>) -> Vec<String> {
    let mut found: Vec<(String, Option<String>)> = Vec::new();
    let data = daemon.data_dir.display().to_string();
    let sandboxes_dir = daemon.data_dir.join("sandboxes").display().to_string();
    let runtime_dir = daemon.data_dir.join("runtime").display().to_string();
    // The container a mount belongs to: `sandboxes/<id>/…`, or `runtime/<runc|crun>/<id>/…`
    // (the runtime's own mounts while it creates a container).
    let id_under = |path: &str| {
        let first = |rest: &str| {
            rest.trim_start_matches('/')
                .split('/')
                .next()
                .map(str::to_string)
        };
        match path.strip_prefix(&sandboxes_dir) {
            Some(rest) => first(rest),
            None => path
                .strip_prefix(&runtime_dir)
                .and_then(|rest| first(rest.trim_start_matches('/').split_once('/')?.1)),
        }
    };
    if let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") {
        for line in info.lines() {
            if let Some(mp) = line.split(' ').nth(4) {
                // The tmpfs of warm forks' checkpoints is the daemon's, not a sandbox's.
                if mp.starts_with(&data) && !mp.ends_with("/checkpoints") {
                    found.push((format!("mount {mp}"), id_under(mp)));
                }
            }
        }
    }
    for id in dir_names(&daemon.data_dir.join("sandboxes")) {
        let path = daemon.data_dir.join("sandboxes").join(&id);
        found.push((format!("dir {}", path.display()), Some(id)));
    }
    for hierarchy in ["memory", "cpu", "pids", "freezer"] {
        if let Ok(entries) = std::fs::read_dir(format!("/sys/fs/cgroup/{hierarchy}/sbx")) {
            for e in entries.flatten().filter(|e| e.path().is_dir()) {
                let name = e.file_name().to_string_lossy().into_owned();
                if id_hint.is_none_or(|h| h == name) {
                    found.push((format!("cgroup {hierarchy}/sbx/{name}"), Some(name)));
                }
            }
        }
    }
    let prepared = prepared_ids(&daemon.data_dir);
    let mut found: Vec<String> = found
        .into_iter()
        .filter(|(_, id)| {
            id.as_ref()
                .is_none_or(|id| !id.starts_with('.') && !prepared.contains(id))
        })
        .map(|(line, _)| line)
        .collect();
    if let Some(id) = id_hint {
        if let Ok(entries) = std::fs::read_dir("/run/netns") {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.ends_with(id) {
                    found.push(format!("netns {name}"));
                }
            }
        }
    }
    found
}

/// Waits (up to 2 minutes) until the sandbox is Running and Ready; fails on Failed.
pub async fn running(
    client: &sbx::cli::client::ApiClient,
    name: &str,
    namespace: &str,
) -> sbx::shared::models::sandbox::Sandbox {
    use sbx::shared::models::sandbox::SandboxStatus;
    let started = std::time::Instant::now();
    loop {
        let s = client.get_sandbox(name, namespace).await.expect("get");
        if s.status == SandboxStatus::Running && s.ready == "True" {
            return s;
        }
        assert!(s.status != SandboxStatus::Failed, "{s:?}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "{name} never Ready: {s:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Every per-sandbox network piece on the test's host side: nft chains, sets and counters of
/// slots, host veths and sandbox namespaces, one line each, sorted.
pub fn network_objects(net: &TestNet) -> Vec<String> {
    let mut found = Vec::new();
    let table = Command::new("ip")
        .args([
            "netns",
            "exec",
            &net.router,
            "nft",
            "list",
            "table",
            "inet",
            "sbx",
        ])
        .output()
        .expect("nft");
    for line in String::from_utf8_lossy(&table.stdout).lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let ["chain" | "set" | "counter", name, ..] = words.as_slice() {
            if name.starts_with("sb") && name.as_bytes().get(2).is_some_and(u8::is_ascii_digit) {
                found.push(format!("{} {name}", words[0]));
            }
        }
    }
    let links = super::ok(&["ip", "-n", &net.router, "-o", "link"], None);
    for line in links.lines() {
        if let Some(name) = line.split(": ").nth(1).and_then(|n| n.split('@').next()) {
            if name.starts_with("sbxv") {
                found.push(format!("veth {name}"));
            }
        }
    }
    let prefix = net.router.replace("sbxt-r", "sbxt-s");
    for entry in std::fs::read_dir("/run/netns")
        .expect("/run/netns")
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&prefix) {
            found.push(format!("netns {name}"));
        }
    }
    found.sort();
    found
}

/// `POST …/exec` of a shell command (60 s limit): exit code, stdout, stderr.
pub async fn exec(
    client: &sbx::cli::client::ApiClient,
    name: &str,
    namespace: &str,
    command: &str,
) -> (i32, String, String) {
    let r = client
        .exec_sandbox(
            name,
            namespace,
            &sbx::shared::models::sandbox::ExecRequest {
                command: Some(command.into()),
                timeout_seconds: Some(60),
            },
        )
        .await
        .expect("exec");
    (r.exit_code, r.stdout, r.stderr)
}
