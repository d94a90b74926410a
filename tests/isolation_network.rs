//! Network isolation between tenants, attacked from real sandboxes of a real `sbx serve` (sbxd:
//! runc, a netns and veth per sandbox, nftables on the host side). Tenant `red` tries to reach
//! tenant `blue`'s sandbox (TCP and UDP), the host side's own listener (standing for the daemon's
//! port on `0.0.0.0`), a listener on a private LAN address and a stand-in cloud metadata service
//! on 169.254.169.254, with the allow-lists an attacker would pick: the sandbox pool, `0.0.0.0/0`
//! and none at all. Each refusal is checked for its reason: the same client reaches an allowed
//! server, each target answers a client on the host side, and the target's own log shows that the
//! attacker's packets never arrived. Everything runs in namespaces the test makes (see
//! `common::sbxd::TestNet`); the root namespace is not touched. Needs root.
mod common;

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::sbxd::{self, ALLOWED_ADDR, DENIED_ADDR, SERVER_PORT, TestNet};
use common::{Daemon, call, key};
use sbx::cli::client::ApiClient;
use sbx::shared::models::sandbox::{CreateSandboxRequest, ForkRequest};
use serde_json::{Value, json};

/// A private (RFC 1918) address in the test's "ext" namespace: the host's LAN.
const LAN_ADDR: &str = "192.168.77.10";
/// The cloud metadata address, served in the test's "ext" namespace.
const METADATA_ADDR: &str = "169.254.169.254";
/// The host side's own listener (on every address of the router namespace).
const HOST_PORT: u16 = 9091;
/// The router's uplink address (one of the host side's own addresses).
const HOST_UPLINK: &str = "100.64.0.1";
/// The victim sandbox's TCP and UDP ports.
const VICTIM_TCP: u16 = 7000;
const VICTIM_UDP: u16 = 7001;

/// `busybox httpd` processes serving one line each, in a namespace; killed on drop.
struct Servers {
    children: Vec<Child>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Servers {
    fn new() -> Servers {
        Servers {
            children: Vec::new(),
            _dirs: Vec::new(),
        }
    }

    /// Serves `body` at `addr:port` inside the named namespace.
    fn httpd(&mut self, netns: &str, addr: &str, port: u16, body: &str) {
        let dir = tempfile::tempdir().expect("www dir");
        std::fs::write(dir.path().join("index.html"), format!("{body}\n")).expect("index");
        let child = Command::new("ip")
            .args(["netns", "exec", netns, "busybox", "httpd", "-f", "-p"])
            .arg(format!("{addr}:{port}"))
            .arg("-h")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start httpd");
        self.children.push(child);
        self._dirs.push(dir);
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A UDP socket bound inside a network namespace (a sandbox's, or the test's own), recording
/// the source address of every datagram it gets; stops when dropped.
struct UdpSink {
    seen: Arc<Mutex<Vec<Ipv4Addr>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl UdpSink {
    fn bind(netns: &Path, addr: SocketAddr) -> UdpSink {
        let (seen, stop) = (
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(AtomicBool::new(false)),
        );
        let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let (path, seen2, stop2) = (netns.to_owned(), seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let ns = std::fs::File::open(&path).expect("open netns");
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            let socket = match UdpSocket::bind(addr) {
                Ok(s) => s,
                Err(e) => return tx.send(Err(format!("bind udp {addr}: {e}"))).unwrap(),
            };
            socket
                .set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
            tx.send(Ok(())).unwrap();
            let mut buf = [0u8; 2048];
            while !stop2.load(Ordering::SeqCst) {
                if let Ok((_, SocketAddr::V4(peer))) = socket.recv_from(&mut buf) {
                    seen2.lock().unwrap().push(*peer.ip());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(5))
            .expect("udp sink did not start")
            .unwrap_or_else(|e| panic!("{e}"));
        UdpSink {
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn seen(&self) -> Vec<Ipv4Addr> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for UdpSink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn ip(args: &[&str]) {
    common::ok(&[&["ip"], args].concat(), None);
}

/// Puts `addr` on the ext namespace's loopback and routes it there from the router (the
/// host side), so that it stands for a machine on the host's network.
fn place_in_ext(net: &TestNet, addr: &str) {
    ip(&[
        "-n",
        &net.ext,
        "addr",
        "add",
        &format!("{addr}/32"),
        "dev",
        "lo",
    ]);
    ip(&[
        "-n",
        &net.router,
        "route",
        "add",
        &format!("{addr}/32"),
        "via",
        "100.64.0.2",
    ]);
}

async fn tenant(daemon: &Daemon, name: &str) {
    let (status, body) = call(
        daemon,
        &daemon.admin_token(),
        reqwest::Method::POST,
        "/api/v1/tenants",
        Some(json!({"name": name, "spec": {"namespaces": [name]}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
}

async fn sandbox(client: &ApiClient, name: &str, namespace: &str, egress: Option<&[&str]>) {
    let req = CreateSandboxRequest {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        image: Some(sbxd::busybox()),
        egress_whitelist: egress.map(|list| list.iter().map(|s| s.to_string()).collect()),
        ..Default::default()
    };
    client.create_sandbox(&req).await.expect("create");
    sbxd::running(client, name, namespace).await;
}

async fn sh(client: &ApiClient, name: &str, namespace: &str, command: &str) -> String {
    let (_, stdout, stderr) = sbxd::exec(client, name, namespace, command).await;
    format!("{stdout}{stderr}")
}

/// A plain HTTP/1.0 GET with busybox nc (busybox-static's wget crashes): the reply, nc's
/// error and its exit status.
fn fetch(addr: &str, port: u16) -> String {
    format!("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 {addr} {port} 2>&1; echo rc=$?")
}

/// The same GET from the router namespace (the host side), where nothing filters.
fn fetch_from_host(net: &TestNet, addr: &str, port: u16) -> String {
    let command = fetch(addr, port).replace("| nc ", "| busybox nc ");
    let out = Command::new("ip")
        .args(["netns", "exec", &net.router, "sh", "-c", &command])
        .output()
        .expect("nc on the host side");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts that the GET from `from` was refused by a firewall answer (a TCP reset: busybox nc
/// says "Connection refused" at once), not answered, and not left to time out.
async fn assert_refused(client: &ApiClient, from: &str, ns: &str, addr: &str, port: u16) {
    let started = Instant::now();
    let out = sh(client, from, ns, &fetch(addr, port)).await;
    assert!(
        !out.contains("rc=0") && !out.contains("hello") && !out.contains("secret"),
        "{from} reached {addr}:{port}: {out}"
    );
    assert!(
        out.contains("refused"),
        "{from} -> {addr}:{port} must be refused by the firewall: {out}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{from} -> {addr}:{port} was not refused at once: {out}"
    );
}

/// The address on a sandbox's eth0.
async fn address_of(client: &ApiClient, name: &str, ns: &str) -> Ipv4Addr {
    let out = sh(client, name, ns, "ip -4 -o addr show dev eth0").await;
    out.split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|cidr| cidr.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {out}"))
}

/// The network namespace (under /run/netns) that holds `addr`, among this test's sandboxes.
fn netns_holding(net: &TestNet, addr: Ipv4Addr) -> PathBuf {
    let prefix = net.router.replace("sbxt-r", "sbxt-s");
    for entry in std::fs::read_dir("/run/netns")
        .expect("/run/netns")
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&prefix) {
            continue;
        }
        let out = common::ok(&["ip", "-n", &name, "-4", "-o", "addr"], None);
        if out.contains(&format!("inet {addr}/")) {
            return entry.path();
        }
    }
    panic!("no sandbox namespace holds {addr}");
}

/// A datagram from the sandbox to `addr:port` with busybox tftp (a read request; busybox nc
/// has no UDP). The tftp client then waits for an answer that never comes: cut at 2 s.
fn udp_probe(addr: impl std::fmt::Display, port: u16) -> String {
    format!("timeout 2 tftp -g -r probe -l /tmp/probe {addr} {port} 2>&1; echo sent")
}

struct Lab {
    net: TestNet,
    _servers: Servers,
}

/// The lab: a LAN server, a metadata stand-in and the host side's own listener.
fn lab() -> Lab {
    let net = TestNet::new();
    place_in_ext(&net, LAN_ADDR);
    place_in_ext(&net, METADATA_ADDR);
    let mut servers = Servers::new();
    servers.httpd(&net.ext, LAN_ADDR, SERVER_PORT, "hello-from-lan");
    servers.httpd(&net.ext, METADATA_ADDR, 80, "metadata-secret");
    servers.httpd(&net.router, "0.0.0.0", HOST_PORT, "hello-from-host");
    // Each target answers the host side: a refusal below is the firewall's, not a dead server.
    for (addr, port, body) in [
        (LAN_ADDR, SERVER_PORT, "hello-from-lan"),
        (METADATA_ADDR, 80, "metadata-secret"),
        (HOST_UPLINK, HOST_PORT, "hello-from-host"),
    ] {
        let started = Instant::now();
        loop {
            let out = fetch_from_host(&net, addr, port);
            if out.contains(body) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{addr}:{port} never served: {out}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Lab {
        net,
        _servers: servers,
    }
}

#[tokio::test]
async fn no_allow_list_reaches_another_tenant_the_host_the_lan_or_metadata() {
    let Lab { net, _servers } = lab();
    let daemon = sbxd::daemon(&net, "");
    let admin = daemon.admin();
    tenant(&daemon, "red").await;
    tenant(&daemon, "blue").await;
    let red = daemon.client(&key(&admin, "red-user", "user", Some("red")).await);
    let blue = daemon.client(&key(&admin, "blue-user", "user", Some("blue")).await);

    // Blue's sandbox: a TCP server that logs each connection, and a UDP socket in its network
    // namespace.
    sandbox(&blue, "victim", "blue", None).await;
    sh(
        &blue,
        "victim",
        "blue",
        &format!(
            "printf '#!/bin/sh\\necho hit >> /tmp/hits\\necho victim-secret\\n' > /tmp/h; \
             chmod +x /tmp/h; nc -ll -p {VICTIM_TCP} -e /tmp/h </dev/null >/dev/null 2>&1 &"
        ),
    )
    .await;
    let victim = address_of(&blue, "victim", "blue").await;
    let udp = UdpSink::bind(
        &netns_holding(&net, victim),
        SocketAddr::from(([0, 0, 0, 0], VICTIM_UDP)),
    );
    // A UDP socket on an allowed server, the control for the attacker's probes.
    let ext_udp = UdpSink::bind(
        &PathBuf::from("/run/netns").join(&net.ext),
        SocketAddr::from((ALLOWED_ADDR.parse::<Ipv4Addr>().unwrap(), VICTIM_UDP)),
    );
    let started = Instant::now();
    while !fetch_from_host(&net, &victim.to_string(), VICTIM_TCP).contains("victim-secret") {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the victim's server never answered the host side"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let hits = || async { sh(&blue, "victim", "blue", "wc -l < /tmp/hits").await };
    let hits_before = hits().await;

    // Red's sandboxes, with the lists an attacker would pick (and one allowed server in each
    // list, to show the same client works).
    let attackers: [(&str, Option<&[&str]>); 3] = [
        ("pool", Some(&["10.88.0.0/16", "198.51.100.0/24"])),
        ("everything", Some(&["0.0.0.0/0"])),
        ("unlisted", None),
    ];
    for (name, egress) in attackers {
        sandbox(&red, name, "red", egress).await;
    }
    for (name, _) in attackers {
        // The control: the same client, from the same sandbox, reaches an allowed server.
        let out = sh(&red, name, "red", &fetch(ALLOWED_ADDR, SERVER_PORT)).await;
        assert!(
            out.contains("hello-from-ext") && out.contains("rc=0"),
            "{name}: {out}"
        );
        let before = ext_udp.seen().len();
        sh(&red, name, "red", &udp_probe(ALLOWED_ADDR, VICTIM_UDP)).await;
        assert!(
            ext_udp.seen().len() > before,
            "{name}: the UDP probe reaches an allowed server"
        );

        // The attacks.
        assert_refused(&red, name, "red", &victim.to_string(), VICTIM_TCP).await;
        sh(&red, name, "red", &udp_probe(victim, VICTIM_UDP)).await;
        assert_refused(&red, name, "red", LAN_ADDR, SERVER_PORT).await;
        assert_refused(&red, name, "red", METADATA_ADDR, 80).await;
        assert_refused(&red, name, "red", HOST_UPLINK, HOST_PORT).await;
        let gateway = {
            let a = address_of(&red, name, "red").await;
            Ipv4Addr::from(u32::from(a) - 1)
        };
        assert_refused(&red, name, "red", &gateway.to_string(), HOST_PORT).await;
        // Blue's sandbox is refused on its gateway's address too (another sandbox's link).
        let blue_gateway = Ipv4Addr::from(u32::from(victim) - 1);
        assert_refused(&red, name, "red", &blue_gateway.to_string(), HOST_PORT).await;
    }

    // The victim saw the host side's connections only, never an attacker's.
    assert_eq!(hits().await, hits_before, "the victim was reached");
    assert!(
        udp.seen().is_empty(),
        "datagrams reached the victim: {:?}",
        udp.seen()
    );
    // And the victim's UDP socket does get a datagram from the host side.
    let router = PathBuf::from("/run/netns").join(&net.router);
    let sent = std::thread::spawn(move || {
        let ns = std::fs::File::open(&router).unwrap();
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        s.send_to(b"control", SocketAddr::from((victim, VICTIM_UDP)))
    })
    .join()
    .unwrap();
    sent.expect("send the control datagram");
    let started = Instant::now();
    while udp.seen().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the victim's UDP socket never got the host side's datagram"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    for (client, ns) in [(&red, "red"), (&blue, "blue")] {
        client.delete_all_sandboxes(ns).await.expect("delete all");
    }
}

#[tokio::test]
async fn the_admins_deny_list_wins_over_every_allow_list() {
    let Lab { net, _servers } = lab();
    // The admin replaces the default list: the allowed test server's network is denied, the
    // private LAN no longer is; the pool and link-local stay refused in any case.
    let daemon = sbxd::daemon(&net, "egressDeny = [\"198.51.100.0/24\"]\n");
    let admin = daemon.admin();
    sandbox(&admin, "open", "default", None).await;
    sandbox(
        &admin,
        "listed",
        "default",
        Some(&["198.51.100.0/24", "203.0.113.0/24"]),
    )
    .await;
    for name in ["open", "listed"] {
        assert_refused(&admin, name, "default", ALLOWED_ADDR, SERVER_PORT).await;
        let out = sh(&admin, name, "default", &fetch(DENIED_ADDR, SERVER_PORT)).await;
        assert!(out.contains("hello-from-ext"), "{name}: {out}");
        assert_refused(&admin, name, "default", METADATA_ADDR, 80).await;
    }
    let out = sh(&admin, "open", "default", &fetch(LAN_ADDR, SERVER_PORT)).await;
    assert!(
        out.contains("hello-from-lan"),
        "the LAN is the admin's to open: {out}"
    );
    let listed = address_of(&admin, "listed", "default").await;
    sh(
        &admin,
        "listed",
        "default",
        &format!(
            "printf '#!/bin/sh\\necho listed-secret\\n' > /tmp/h; chmod +x /tmp/h; \
             nc -ll -p {VICTIM_TCP} -e /tmp/h </dev/null >/dev/null 2>&1 &"
        ),
    )
    .await;
    let started = Instant::now();
    while !fetch_from_host(&net, &listed.to_string(), VICTIM_TCP).contains("listed-secret") {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the listed sandbox's server never answered the host side"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_refused(&admin, "open", "default", &listed.to_string(), VICTIM_TCP).await;
    admin
        .delete_all_sandboxes("default")
        .await
        .expect("delete all");
}

#[tokio::test]
async fn a_tenants_deny_list_holds_for_its_sandboxes_and_follows_its_changes() {
    let Lab { net, _servers } = lab();
    // The config outlives the first start: the daemon is restarted on it.
    let dir = tempfile::tempdir().expect("config dir");
    let config = dir.path().join("sbx.toml");
    sbxd::write_config(&config, &net, "");
    let args = ["--config", config.to_str().expect("utf-8 path")];
    let daemon = Daemon::start_with_env(&args, &[]);
    let admin = daemon.admin();
    let token = daemon.admin_token();
    let patch = |deny: Value| {
        let (daemon, token) = (&daemon, token.clone());
        async move {
            call(
                daemon,
                &token,
                reqwest::Method::PATCH,
                "/api/v1/tenants/red",
                Some(json!({"spec": {"limits": {"egressDeny": deny}}})),
            )
            .await
        }
    };
    tenant(&daemon, "red").await;
    // A bad entry is the admin's 400, naming it; nothing is stored.
    let (status, body) = patch(json!(["10.0.0.1/8"])).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("10.0.0.1/8"), "{body}");
    let (status, body) = patch(json!([format!("{ALLOWED_ADDR}/32")])).await;
    assert_eq!(status, 200, "{body}");
    sandbox(&admin, "open", "red", None).await;
    sandbox(
        &admin,
        "listed",
        "red",
        Some(&["198.51.100.0/24", "203.0.113.0/24"]),
    )
    .await;
    // Neither the internet nor a list that names it reaches what the tenant denies; the
    // rest of each policy still works, and another tenant is not concerned.
    tenant(&daemon, "blue").await;
    sandbox(&admin, "other", "blue", None).await;
    for name in ["open", "listed"] {
        assert_refused(&admin, name, "red", ALLOWED_ADDR, SERVER_PORT).await;
        let out = sh(&admin, name, "red", &fetch(DENIED_ADDR, SERVER_PORT)).await;
        assert!(out.contains("hello-from-ext"), "{name}: {out}");
    }
    let out = sh(&admin, "other", "blue", &fetch(ALLOWED_ADDR, SERVER_PORT)).await;
    assert!(out.contains("hello-from-ext"), "blue is not red: {out}");
    // A fork takes the tenant's list, not a copy of its source's rules.
    admin
        .fork_sandbox(
            "open",
            &ForkRequest {
                new_name: Some("clone".into()),
                namespace: Some("red".into()),
                ..Default::default()
            },
        )
        .await
        .expect("fork");
    sbxd::running(&admin, "clone", "red").await;
    assert_refused(&admin, "clone", "red", ALLOWED_ADDR, SERVER_PORT).await;
    // The admin moves the deny list: running sandboxes follow at once.
    let (status, body) = patch(json!(["203.0.113.0/24"])).await;
    assert_eq!(status, 200, "{body}");
    for name in ["open", "listed", "clone"] {
        let out = sh(&admin, name, "red", &fetch(ALLOWED_ADDR, SERVER_PORT)).await;
        assert!(
            out.contains("hello-from-ext"),
            "{name} after the change: {out}"
        );
        assert_refused(&admin, name, "red", DENIED_ADDR, SERVER_PORT).await;
    }
    // A restart keeps what the tenant says.
    let daemon = daemon.restart(&args);
    let admin = daemon.admin();
    sbxd::running(&admin, "open", "red").await;
    assert_refused(&admin, "open", "red", DENIED_ADDR, SERVER_PORT).await;
    for ns in ["red", "blue"] {
        admin.delete_all_sandboxes(ns).await.expect("delete all");
    }
}

#[test]
fn a_bad_deny_list_stops_the_start_with_the_setting_named() {
    let net = TestNet::new();
    let (dir, path) = sbxd::config_file(&net);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text = text.replace("[network]\n", "[network]\negressDeny = [\"10.0.0.1/8\"]\n");
    std::fs::write(&path, text).unwrap();
    let stderr = common::serve_refused(
        &["--listen", "127.0.0.1:0", "--config", &path],
        &dir.path().join("data"),
    );
    assert!(
        stderr.contains("egressDeny entry \"10.0.0.1/8\""),
        "{stderr}"
    );
}
