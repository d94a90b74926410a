//! Per-sandbox networking with real traffic. Each test builds its own lab out of network
//! namespaces named after the test process's PID: a "router" that plays the host side
//! (`hostNetns`) and an "ext" namespace standing for the outside world, with TCP/UDP servers on
//! distinct addresses. Nothing is configured in the root namespace beyond creating and deleting
//! those named namespaces; every lab removes what it made when dropped, even on failure.
//! The tests need root (they skip with a message otherwise).
mod common;

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{cmd, ok};
use sbx::runtime::network::{
    Attachment, Egress, Ipv4Net, NetworkConfig, NetworkError, NetworkManager,
};

/// Router's address towards ext (the "uplink" address NAT must show).
const ROUTER_UP: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 1);
const EXT_UP: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 2);
/// Two web-ish servers in ext, on distinct networks.
const EXT_A: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 10);
const EXT_B: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 10);
/// A resolver out in ext; ROUTER_UP is a resolver on the host side.
const REMOTE_DNS: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 53);
const METADATA: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 254);
const HTTP: u16 = 8080;
const ECHO: u16 = 7007;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

macro_rules! require_root {
    () => {
        if !is_root() {
            eprintln!("skipped: network tests need root");
            return;
        }
    };
}

/// Joins the network namespace at `path` on the calling thread (a thread of our own).
fn enter(path: &Path) {
    let ns = std::fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
        .unwrap_or_else(|e| panic!("setns {}: {e}", path.display()));
}

fn netns_path(name: &str) -> PathBuf {
    Path::new("/run/netns").join(name)
}

/// A server thread inside a namespace; stops when dropped.
struct Server {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    /// TCP: answers "<peer ip>\n" and closes.
    Whoami,
    /// TCP: echoes until the peer closes.
    Echo,
    /// UDP: echoes each datagram.
    UdpEcho,
}

fn serve(netns: &Path, addr: SocketAddr, kind: Kind) -> Server {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let (flag, path) = (stop.clone(), netns.to_owned());
    let thread = std::thread::spawn(move || {
        enter(&path);
        let tick = Duration::from_millis(5);
        match kind {
            Kind::UdpEcho => {
                let socket = match UdpSocket::bind(addr) {
                    Ok(s) => s,
                    Err(e) => return ready_tx.send(Err(format!("bind udp {addr}: {e}"))).unwrap(),
                };
                socket.set_read_timeout(Some(tick * 4)).unwrap();
                ready_tx.send(Ok(())).unwrap();
                let mut buf = [0u8; 512];
                while !flag.load(Ordering::SeqCst) {
                    if let Ok((n, peer)) = socket.recv_from(&mut buf) {
                        let _ = socket.send_to(&buf[..n], peer);
                    }
                }
            }
            Kind::Whoami | Kind::Echo => {
                let listener = match TcpListener::bind(addr) {
                    Ok(l) => l,
                    Err(e) => return ready_tx.send(Err(format!("bind tcp {addr}: {e}"))).unwrap(),
                };
                listener.set_nonblocking(true).unwrap();
                ready_tx.send(Ok(())).unwrap();
                let mut conns = Vec::new();
                while !flag.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((mut stream, peer)) => {
                            stream.set_nonblocking(false).unwrap();
                            match kind {
                                Kind::Whoami => {
                                    let _ = writeln!(stream, "{}", peer.ip());
                                }
                                _ => {
                                    let stop = flag.clone();
                                    conns.push(std::thread::spawn(move || echo(stream, &stop)));
                                }
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(tick),
                        Err(_) => break,
                    }
                }
                for c in conns {
                    let _ = c.join();
                }
            }
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("server thread did not start")
        .unwrap_or_else(|e| panic!("{e}"));
    Server {
        stop,
        thread: Some(thread),
    }
}

fn echo(mut stream: TcpStream, stop: &AtomicBool) {
    stream
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut buf = [0u8; 512];
    while !stop.load(Ordering::SeqCst) {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if stream.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

/// Runs `f` on a fresh thread inside the namespace at `path`.
fn inside<T: Send + 'static>(path: &Path, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = path.to_owned();
    std::thread::spawn(move || {
        enter(&path);
        f()
    })
    .join()
    .expect("client thread panicked")
}

/// TCP "whoami" fetch from inside a namespace: the reply line, and how long it took.
fn fetch(from: &Path, ip: Ipv4Addr, port: u16) -> (io::Result<String>, Duration) {
    inside(from, move || {
        let start = Instant::now();
        let result = TcpStream::connect_timeout(&SocketAddr::from((ip, port)), CONNECT_TIMEOUT)
            .and_then(|mut s| {
                s.set_read_timeout(Some(CONNECT_TIMEOUT))?;
                let mut reply = String::new();
                s.read_to_string(&mut reply)?;
                Ok(reply.trim().to_owned())
            });
        (result, start.elapsed())
    })
}

fn udp_roundtrip(from: &Path, ip: Ipv4Addr, port: u16) -> io::Result<()> {
    inside(from, move || {
        let socket = UdpSocket::bind("0.0.0.0:0")?;
        socket.set_read_timeout(Some(Duration::from_secs(2)))?;
        socket.connect((ip, port))?;
        socket.send(b"ping")?;
        let mut buf = [0u8; 16];
        let n = socket.recv(&mut buf)?;
        if &buf[..n] == b"ping" {
            Ok(())
        } else {
            Err(io::Error::other("wrong echo"))
        }
    })
}

#[track_caller]
fn assert_reaches(from: &Path, ip: Ipv4Addr, port: u16) -> String {
    match fetch(from, ip, port) {
        (Ok(reply), _) => reply,
        (Err(e), took) => panic!("{ip}:{port} should be reachable, got {e} after {took:?}"),
    }
}

#[track_caller]
fn assert_refused_fast(from: &Path, ip: Ipv4Addr, port: u16) {
    let (result, took) = fetch(from, ip, port);
    match result {
        Ok(reply) => panic!("{ip}:{port} should be refused, but answered {reply:?}"),
        Err(e) => {
            // Refused or unreachable at once, not dropped: a dropped packet would show as a
            // timeout (no clock is read to decide this).
            assert!(
                !matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ),
                "{ip}:{port} should be refused, got {e} after {took:?}"
            );
        }
    }
}

/// One test's namespaces, servers and helper processes, all removed on drop.
struct Lab {
    router: String,
    ext: String,
    prefix: String,
    servers: Vec<Server>,
    children: Vec<Child>,
}

/// Removes namespaces of labs whose test process died without cleaning up (killed), so a
/// shared machine does not collect them. Names are `sbxt<pid><letters>...`.
fn sweep_dead_labs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Ok(entries) = std::fs::read_dir("/run/netns") else {
            return;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix("sbxt") else {
                continue;
            };
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let alive = Path::new("/proc").join(&digits).exists();
            if !digits.is_empty() && !alive {
                let _ = cmd(&["ip", "netns", "del", &name], None);
            }
        }
    });
}

impl Lab {
    /// `name`: short and unique among the tests of this file.
    fn new(name: &str) -> Lab {
        sweep_dead_labs();
        let id = format!("sbxt{}{name}", std::process::id());
        // Built first so that a failing step below still cleans up on unwind.
        let mut lab = Lab {
            router: format!("{id}r"),
            ext: format!("{id}x"),
            prefix: format!("{id}-"),
            servers: Vec::new(),
            children: Vec::new(),
        };
        ok(&["ip", "netns", "add", &lab.router], None);
        ok(&["ip", "netns", "add", &lab.ext], None);
        // The router/ext link is made inside the router namespace: no name ever exists in root.
        ok(
            &["ip", "-n", &lab.router, "-batch", "-"],
            Some(&format!(
                "link add up0 type veth peer name ext0 netns {ext}\n\
                 addr add {ROUTER_UP}/24 dev up0\n\
                 link set up0 up\n\
                 link set lo up\n\
                 route add default via {EXT_UP}\n",
                ext = lab.ext
            )),
        );
        // Ext has no route back to the sandbox pool: replies only arrive if NAT happened.
        ok(
            &["ip", "-n", &lab.ext, "-batch", "-"],
            Some(&format!(
                "addr add {EXT_UP}/24 dev ext0\n\
                 link set ext0 up\n\
                 link set lo up\n\
                 addr add {EXT_A}/32 dev lo\n\
                 addr add {EXT_B}/32 dev lo\n\
                 addr add {REMOTE_DNS}/32 dev lo\n"
            )),
        );
        let (router, ext) = (netns_path(&lab.router), netns_path(&lab.ext));
        for (ns, ip, port, kind) in [
            (&ext, EXT_A, HTTP, Kind::Whoami),
            (&ext, EXT_B, HTTP, Kind::Whoami),
            (&ext, EXT_A, ECHO, Kind::Echo),
            (&ext, REMOTE_DNS, 53, Kind::Whoami),
            (&ext, REMOTE_DNS, 53, Kind::UdpEcho),
            (&router, Ipv4Addr::UNSPECIFIED, HTTP, Kind::Whoami),
            (&router, Ipv4Addr::UNSPECIFIED, 53, Kind::Whoami),
            // Bound to the resolver address so replies come from it (as a real resolver does).
            (&router, ROUTER_UP, 53, Kind::UdpEcho),
        ] {
            let server = serve(ns, SocketAddr::from((ip, port)), kind);
            lab.servers.push(server);
        }
        lab
    }

    fn config(&self) -> NetworkConfig {
        NetworkConfig {
            host_netns: Some(self.router.clone()),
            pool: "10.88.0.0/16".into(),
            uplink: Some("up0".into()),
            dns: Some(vec![ROUTER_UP, REMOTE_DNS]),
            netns_prefix: self.prefix.clone(),
            egress_deny: None,
        }
    }

    /// `nft list table inet sbx` in the router.
    fn ruleset(&self) -> String {
        ok(
            &[
                "ip",
                "netns",
                "exec",
                &self.router,
                "nft",
                "list",
                "table",
                "inet",
                "sbx",
            ],
            None,
        )
    }

    fn router_links(&self) -> String {
        ok(&["ip", "-n", &self.router, "-o", "link", "show"], None)
    }

    /// Sandbox namespaces of this lab still mounted.
    fn sandbox_netns(&self) -> Vec<String> {
        std::fs::read_dir("/run/netns")
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&self.prefix))
            .collect()
    }

    fn serve_in(&mut self, att: &Attachment, port: u16) {
        let server = serve(
            &att.netns_path,
            SocketAddr::from((att.address, port)),
            Kind::Whoami,
        );
        self.servers.push(server);
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.servers.clear();
        for child in &mut self.children {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
        }
        for name in self.sandbox_netns() {
            let _ = cmd(&["ip", "netns", "del", &name], None);
        }
        let _ = cmd(&["ip", "netns", "del", &self.router], None);
        let _ = cmd(&["ip", "netns", "del", &self.ext], None);
    }
}

fn nets(list: &[&str]) -> Egress {
    Egress::Allow(list.iter().map(|s| s.parse::<Ipv4Net>().unwrap()).collect())
}

#[tokio::test]
async fn unrestricted_reaches_the_outside_through_nat_but_not_the_host() {
    require_root!();
    let lab = Lab::new("u");
    let mut config = lab.config();
    config.uplink = None; // masquerade on every non-sandbox interface
    let net = NetworkManager::new(config).await.unwrap();
    let a = net.attach("a", 1, &Egress::Unrestricted).await.unwrap();
    let from = &a.netns_path;

    // Both outside servers; ext sees the router's uplink address (and could not answer
    // the sandbox's own address: it has no route back).
    assert_eq!(assert_reaches(from, EXT_A, HTTP), ROUTER_UP.to_string());
    assert_eq!(assert_reaches(from, EXT_B, HTTP), ROUTER_UP.to_string());
    // DNS to both resolvers, the one on the host side included, over TCP and UDP.
    assert_reaches(from, REMOTE_DNS, 53);
    assert_reaches(from, ROUTER_UP, 53);
    udp_roundtrip(from, REMOTE_DNS, 53).unwrap();
    udp_roundtrip(from, ROUTER_UP, 53).unwrap();
    // The host itself: uplink address, own gateway (even its port 53: not a resolver).
    assert_refused_fast(from, ROUTER_UP, HTTP);
    assert_refused_fast(from, a.gateway, HTTP);
    assert_refused_fast(from, a.gateway, 53);
    // Link-local (metadata services).
    assert_refused_fast(from, METADATA, 80);

    // resolv.conf names both resolvers.
    assert_eq!(
        net.resolv_conf(),
        format!("# Generated by sbx\nnameserver {ROUTER_UP}\nnameserver {REMOTE_DNS}\n")
    );
    assert_eq!(a.dns, vec![ROUTER_UP, REMOTE_DNS]);
    net.detach("a", 1).await.unwrap();
}

#[tokio::test]
async fn allow_list_and_live_policy_changes() {
    require_root!();
    let lab = Lab::new("l");
    let net = NetworkManager::new(lab.config()).await.unwrap();
    let a = net
        .attach("a", 7, &nets(&["198.51.100.0/24"]))
        .await
        .unwrap();
    let from = &a.netns_path;
    assert_eq!(a.address, Ipv4Addr::new(10, 88, 0, 30));
    assert_eq!(a.gateway, Ipv4Addr::new(10, 88, 0, 29));

    assert_eq!(assert_reaches(from, EXT_A, HTTP), ROUTER_UP.to_string());
    assert_refused_fast(from, EXT_B, HTTP);
    // DNS to the configured resolvers stays open with a list.
    assert_reaches(from, REMOTE_DNS, 53);
    assert_reaches(from, ROUTER_UP, 53);
    udp_roundtrip(from, REMOTE_DNS, 53).unwrap();
    assert_refused_fast(from, ROUTER_UP, HTTP);

    // A connection open before a policy change is cut by it.
    let echo = inside(from, || {
        let mut s = TcpStream::connect_timeout(&SocketAddr::from((EXT_A, ECHO)), CONNECT_TIMEOUT)?;
        s.set_read_timeout(Some(Duration::from_secs(1)))?;
        s.write_all(b"one\n")?;
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf)?;
        Ok::<_, io::Error>(s)
    })
    .unwrap();

    net.set_egress("a", 7, &Egress::DenyAll).await.unwrap();
    for ip in [EXT_A, EXT_B, REMOTE_DNS, ROUTER_UP] {
        assert_refused_fast(from, ip, if ip == EXT_A || ip == EXT_B { HTTP } else { 53 });
    }
    assert!(udp_roundtrip(from, REMOTE_DNS, 53).is_err());
    // Refusals stay immediate however often they happen (ICMP errors alone are rate-limited).
    for _ in 0..20 {
        assert_refused_fast(from, EXT_A, HTTP);
    }
    let cut = std::thread::spawn(move || {
        let mut s = echo;
        let _ = s.write_all(b"two\n");
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf)
    })
    .join()
    .unwrap();
    assert!(
        cut.is_err(),
        "the open connection still carried data: {cut:?}"
    );

    net.set_egress("a", 7, &Egress::Unrestricted).await.unwrap();
    assert_reaches(from, EXT_A, HTTP);
    assert_reaches(from, EXT_B, HTTP);

    net.set_egress("a", 7, &nets(&["203.0.113.0/24", "203.0.113.10/32"]))
        .await
        .unwrap();
    assert_refused_fast(from, EXT_A, HTTP);
    assert_reaches(from, EXT_B, HTTP);

    // Adjacent and overlapping entries are accepted by nft once normalized.
    let list: Vec<String> = [
        "198.51.100.0/25",
        "198.51.100.128/25",
        "198.51.100.10",
        "203.0.113.0/24",
    ]
    .map(String::from)
    .to_vec();
    let egress = Egress::from_whitelist(Some(&list)).unwrap();
    net.set_egress("a", 7, &egress).await.unwrap();
    assert_reaches(from, EXT_A, HTTP);
    assert_reaches(from, EXT_B, HTTP);

    net.detach("a", 7).await.unwrap();
    assert!(matches!(
        net.set_egress("a", 7, &Egress::DenyAll).await,
        Err(NetworkError::NotAttached(7))
    ));
}

#[tokio::test]
async fn sandboxes_never_reach_each_other() {
    require_root!();
    let mut lab = Lab::new("p");
    let net = NetworkManager::new(lab.config()).await.unwrap();
    let a = net.attach("a", 1, &Egress::Unrestricted).await.unwrap();
    let b = net.attach("b", 2, &Egress::DenyAll).await.unwrap();
    let c = net
        .attach(
            "c",
            3,
            &Egress::Allow(vec![Ipv4Net::new(b.address, 32).unwrap()]),
        )
        .await
        .unwrap();
    lab.serve_in(&a, HTTP);
    lab.serve_in(&b, HTTP);

    // Unrestricted does not include other sandboxes, nor their gateways (host addresses).
    assert_refused_fast(&a.netns_path, b.address, HTTP);
    assert_refused_fast(&a.netns_path, b.gateway, HTTP);
    // Nor does a list that names another sandbox, or the whole pool: the pool is refused
    // before any sandbox's own list is read, and again on the way in.
    assert_refused_fast(&c.netns_path, b.address, HTTP);
    net.set_egress("c", 3, &nets(&["10.88.0.0/16"]))
        .await
        .unwrap();
    assert_refused_fast(&c.netns_path, b.address, HTTP);
    assert_refused_fast(&c.netns_path, a.address, HTTP);
    net.set_egress("c", 3, &nets(&["0.0.0.0/0"])).await.unwrap();
    assert_refused_fast(&c.netns_path, b.address, HTTP);
    assert_refused_fast(&c.netns_path, METADATA, 80);
    // The host side still reaches every sandbox (the daemon's own path).
    assert_eq!(
        fetch(&netns_path(&lab.router), b.address, HTTP)
            .0
            .expect("host side reaches b"),
        b.gateway.to_string()
    );
    assert_refused_fast(&b.netns_path, a.address, HTTP);
    assert_refused_fast(&b.netns_path, c.address, HTTP);

    for (key, slot) in [("a", 1), ("b", 2), ("c", 3)] {
        net.detach(key, slot).await.unwrap();
    }
}

/// Sends one UDP datagram with a forged IPv4 source from inside a namespace (a raw socket, as
/// a sandbox granted NET_RAW could).
fn send_forged_udp(from: &Path, src: SocketAddrV4, dst: SocketAddrV4, payload: &'static [u8]) {
    inside(from, move || {
        // SAFETY: plain socket syscalls on a descriptor this closure owns and closes.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
        assert!(fd >= 0, "raw socket: {}", io::Error::last_os_error());
        let (total, udp_len) = (28 + payload.len() as u16, 8 + payload.len() as u16);
        let mut packet = vec![0x45, 0];
        packet.extend(total.to_be_bytes());
        // id, flags (DF), ttl 64, UDP, checksum (the kernel fills in the header checksum).
        packet.extend([0, 0, 0x40, 0, 64, 17, 0, 0]);
        packet.extend(src.ip().octets());
        packet.extend(dst.ip().octets());
        packet.extend(src.port().to_be_bytes());
        packet.extend(dst.port().to_be_bytes());
        packet.extend(udp_len.to_be_bytes());
        packet.extend([0, 0]); // no UDP checksum (allowed on IPv4)
        packet.extend(payload);
        let to = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(dst.ip().octets()),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: the buffer and address outlive the call; sizes are theirs.
        let sent = unsafe {
            libc::sendto(
                fd,
                packet.as_ptr().cast(),
                packet.len(),
                0,
                std::ptr::from_ref(&to).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        let error = io::Error::last_os_error();
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        assert!(sent >= 0, "sendto: {error}");
    });
}

#[tokio::test]
async fn a_sandbox_cannot_forge_replies_into_another_sandboxs_connections() {
    require_root!();
    let lab = Lab::new("f");
    let net = NetworkManager::new(lab.config()).await.unwrap();
    let a = net.attach("a", 1, &Egress::Unrestricted).await.unwrap();
    let b = net.attach("b", 2, &Egress::Unrestricted).await.unwrap();
    // a talks to a resolver out in ext from a fixed port: conntrack now expects replies from
    // REMOTE_DNS:53 to the router's uplink address at that port (masquerade keeps a free port).
    const PORT: u16 = 40_053;
    let victim = {
        let path = a.netns_path.clone();
        std::thread::spawn(move || {
            enter(&path);
            let socket = UdpSocket::bind(("0.0.0.0", PORT)).unwrap();
            socket
                .set_read_timeout(Some(Duration::from_secs(2)))
                .unwrap();
            socket.send_to(b"query", (REMOTE_DNS, 53)).unwrap();
            let mut buf = [0u8; 64];
            let (n, from) = socket.recv_from(&mut buf).unwrap();
            assert_eq!((&buf[..n], from), (&b"query"[..], (REMOTE_DNS, 53).into()));
            socket
        })
        .join()
        .unwrap()
    };
    // b forges "replies" from the resolver: to the uplink address (where conntrack would turn
    // it back into a's address) and straight to a's address.
    let forged_src = SocketAddrV4::new(REMOTE_DNS, 53);
    send_forged_udp(
        &b.netns_path,
        forged_src,
        SocketAddrV4::new(ROUTER_UP, PORT),
        b"forged",
    );
    send_forged_udp(
        &b.netns_path,
        forged_src,
        SocketAddrV4::new(a.address, PORT),
        b"forged",
    );
    // a gets only the real resolver's answers: the forged ones were dropped on b's link.
    let path = a.netns_path.clone();
    let got = std::thread::spawn(move || {
        enter(&path);
        victim.send_to(b"again", (REMOTE_DNS, 53)).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        while let Ok((n, _)) = victim.recv_from(&mut buf) {
            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
            victim
                .set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
        }
        got
    })
    .join()
    .unwrap();
    assert_eq!(got, ["again"], "a forged reply reached the other sandbox");
    for (key, slot) in [("a", 1), ("b", 2)] {
        net.detach(key, slot).await.unwrap();
    }
}

#[tokio::test]
async fn detach_removes_everything_and_is_idempotent() {
    require_root!();
    let lab = Lab::new("d");
    let net = NetworkManager::new(lab.config()).await.unwrap();
    let empty_ruleset = lab.ruleset();

    let start = Instant::now();
    let a = net
        .attach("a", 5, &nets(&["198.51.100.0/24"]))
        .await
        .unwrap();
    let attached = start.elapsed();
    assert!(a.netns_path.exists());
    assert!(lab.router_links().contains("sbxv5@"));
    assert!(lab.ruleset().contains("chain sb5"));

    // egress_bytes counts what went out, and only that.
    assert_refused_fast(&a.netns_path, EXT_B, HTTP);
    assert_eq!(net.egress_bytes("a", 5).await.unwrap(), 0);
    assert_reaches(&a.netns_path, EXT_A, HTTP);
    let after = net.egress_bytes("a", 5).await.unwrap();
    assert!(after > 0, "egress_bytes did not grow");
    // (The closing handshake may still add a packet or two.)
    let all = net.egress_bytes_all().await.unwrap();
    assert!(all.get(&5).is_some_and(|b| *b >= after), "{all:?}");

    let start = Instant::now();
    net.detach("a", 5).await.unwrap();
    let detached = start.elapsed();
    eprintln!("timing: attach {attached:?}, detach {detached:?} (one sandbox, allow-list)");

    assert!(!a.netns_path.exists(), "netns left behind");
    assert!(lab.sandbox_netns().is_empty());
    assert!(
        !lab.router_links().contains("sbxv"),
        "veth left behind:\n{}",
        lab.router_links()
    );
    assert_eq!(lab.ruleset(), empty_ruleset, "nft objects left behind");
    net.detach("a", 5).await.unwrap();
    assert!(matches!(
        net.egress_bytes("a", 5).await,
        Err(NetworkError::NotAttached(5))
    ));

    // The same key and slot can be attached again.
    let again = net.attach("a", 5, &Egress::Unrestricted).await.unwrap();
    assert_reaches(&again.netns_path, EXT_B, HTTP);
    net.detach("a", 5).await.unwrap();
    assert_eq!(lab.ruleset(), empty_ruleset);
}

#[tokio::test]
async fn attach_refuses_bad_input_and_leaves_nothing() {
    require_root!();
    let lab = Lab::new("e");
    let mut config = lab.config();
    config.pool = "10.99.0.0/28".into(); // four slots
    let net = NetworkManager::new(config).await.unwrap();
    let empty_ruleset = lab.ruleset();
    assert!(matches!(
        net.attach("a", 4, &Egress::Unrestricted).await,
        Err(NetworkError::SlotOutOfRange { capacity: 4, .. })
    ));
    assert!(matches!(
        net.attach("Bad-Key", 1, &Egress::Unrestricted).await,
        Err(NetworkError::InvalidKey(_))
    ));
    let a = net.attach("a", 3, &Egress::Unrestricted).await.unwrap();
    assert_eq!(a.address, Ipv4Addr::new(10, 99, 0, 14));
    // The same namespace twice: refused, and the first attachment is untouched.
    assert!(matches!(
        net.attach("a", 2, &Egress::Unrestricted).await,
        Err(NetworkError::AlreadyExists(_))
    ));
    assert_reaches(&a.netns_path, EXT_A, HTTP);
    // A slot in use by another sandbox: refused, the new namespace is undone and the owner of
    // the slot keeps its veth and its policy.
    let err = net.attach("b", 3, &Egress::DenyAll).await.unwrap_err();
    assert!(matches!(err, NetworkError::SlotInUse(3)), "{err}");
    assert_eq!(lab.sandbox_netns(), vec![a.netns_name.clone()]);
    assert_reaches(&a.netns_path, EXT_B, HTTP);
    // A leftover nft chain alone (no veth) also makes the slot busy, and the veth this attach
    // made is removed again.
    ok(
        &[
            "ip",
            "netns",
            "exec",
            &lab.router,
            "nft",
            "add",
            "chain",
            "inet",
            "sbx",
            "sb2",
        ],
        None,
    );
    let err = net.attach("b", 2, &Egress::DenyAll).await.unwrap_err();
    assert!(matches!(err, NetworkError::SlotInUse(2)), "{err}");
    assert!(
        !lab.router_links().contains("sbxv2"),
        "{}",
        lab.router_links()
    );
    assert_eq!(lab.sandbox_netns(), vec![a.netns_name.clone()]);
    ok(
        &[
            "ip",
            "netns",
            "exec",
            &lab.router,
            "nft",
            "delete",
            "chain",
            "inet",
            "sbx",
            "sb2",
        ],
        None,
    );
    net.detach("a", 3).await.unwrap();
    assert_eq!(lab.ruleset(), empty_ruleset);
}

#[tokio::test]
async fn cleanup_stale_removes_leftovers_only() {
    require_root!();
    let lab = Lab::new("c");
    let net = NetworkManager::new(lab.config()).await.unwrap();
    let keep = net.attach("keep", 1, &Egress::Unrestricted).await.unwrap();
    net.attach("gone1", 2, &Egress::DenyAll).await.unwrap();
    net.attach("gone2", 3, &nets(&["203.0.113.0/24"]))
        .await
        .unwrap();
    // A half-made leftover: only a namespace.
    ok(
        &["ip", "netns", "add", &format!("{}gone3", lab.prefix)],
        None,
    );

    let mut removed = net.cleanup_stale(&[("keep".to_owned(), 1)]).await.unwrap();
    removed.sort();
    let p = &lab.prefix;
    assert_eq!(
        removed,
        vec![
            format!("netns {p}gone1"),
            format!("netns {p}gone2"),
            format!("netns {p}gone3"),
            "nft objects of slot 2".to_owned(),
            "nft objects of slot 3".to_owned(),
            "veth sbxv2".to_owned(),
            "veth sbxv3".to_owned(),
        ]
    );
    assert_eq!(lab.sandbox_netns(), vec![keep.netns_name.clone()]);
    let links = lab.router_links();
    assert!(links.contains("sbxv1@") && !links.contains("sbxv2") && !links.contains("sbxv3"));
    let rules = lab.ruleset();
    assert!(
        rules.contains("chain sb1 ") && !rules.contains("sb2") && !rules.contains("sb3"),
        "{rules}"
    );
    assert_reaches(&keep.netns_path, EXT_A, HTTP);
    // Nothing more to do the second time.
    assert!(
        net.cleanup_stale(&[("keep".to_owned(), 1)])
            .await
            .unwrap()
            .is_empty()
    );
    net.detach("keep", 1).await.unwrap();
}

#[tokio::test]
async fn new_is_idempotent_and_keeps_running_sandboxes() {
    require_root!();
    let lab = Lab::new("n");
    let first = NetworkManager::new(lab.config()).await.unwrap();
    let base = lab.ruleset();
    let a = first
        .attach("a", 1, &nets(&["198.51.100.0/24"]))
        .await
        .unwrap();
    let with_sandbox = lab.ruleset();

    let second = NetworkManager::new(lab.config()).await.unwrap();
    assert_eq!(
        lab.ruleset(),
        with_sandbox,
        "a second new() changed the ruleset"
    );
    assert_reaches(&a.netns_path, EXT_A, HTTP);
    assert_refused_fast(&a.netns_path, EXT_B, HTTP);
    let forward = ok(
        &[
            "ip",
            "netns",
            "exec",
            &lab.router,
            "cat",
            "/proc/sys/net/ipv4/ip_forward",
        ],
        None,
    );
    assert_eq!(forward.trim(), "1");

    second.detach("a", 1).await.unwrap();
    assert_eq!(lab.ruleset(), base);
}

#[tokio::test]
async fn attach_to_an_existing_process_namespace() {
    require_root!();
    let mut lab = Lab::new("x");
    let net = NetworkManager::new(lab.config()).await.unwrap();
    let child = Command::new("unshare")
        .args(["--net", "sleep", "60"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    lab.children.push(child);
    // Wait until unshare has moved into its own namespace.
    let own = std::fs::metadata("/proc/self/ns/net").unwrap().ino();
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .map(|m| m.ino())
        .ok()
        == Some(own)
    {
        assert!(Instant::now() < deadline, "unshare did not start");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The rules first, as sbxd does while the runtime creates the container; the links when
    // the process (and so its namespace) exists.
    let a = net.prepare("a", 2, &Egress::Unrestricted).await.unwrap();
    assert!(
        !lab.router_links().contains("sbxv2"),
        "{}",
        lab.router_links()
    );
    assert!(!a.netns_path.exists());
    net.plug(&a, Some(pid)).await.unwrap();
    let process_ns = PathBuf::from(format!("/proc/{pid}/ns/net"));
    assert_eq!(
        std::fs::metadata(&a.netns_path).unwrap().ino(),
        std::fs::metadata(&process_ns).unwrap().ino()
    );
    assert_eq!(
        assert_reaches(&process_ns, EXT_A, HTTP),
        ROUTER_UP.to_string()
    );
    net.detach("a", 2).await.unwrap();
    assert!(!a.netns_path.exists());
    // A prepared slot whose sandbox never came (its create failed) goes with detach;
    // preparing it again for another sandbox starts clean.
    let rules = lab.ruleset();
    net.prepare("b", 2, &Egress::Unrestricted).await.unwrap();
    net.detach("b", 2).await.unwrap();
    assert_eq!(lab.ruleset(), rules);
    let b = net.attach("b", 2, &Egress::DenyAll).await.unwrap();
    assert_refused_fast(&b.netns_path, EXT_A, HTTP);
    net.detach("b", 2).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_sandboxes_at_once() {
    require_root!();
    let lab = Lab::new("m");
    let net = Arc::new(NetworkManager::new(lab.config()).await.unwrap());
    let empty = lab.ruleset();
    let count = 8u32;
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for slot in 0..count {
        let net = net.clone();
        set.spawn(async move {
            let egress = if slot % 2 == 0 {
                Egress::Unrestricted
            } else {
                nets(&["203.0.113.0/24"])
            };
            net.attach(&format!("s{slot}"), slot, &egress).await
        });
    }
    let mut attached = Vec::new();
    while let Some(result) = set.join_next().await {
        attached.push(result.unwrap().unwrap());
    }
    let took = start.elapsed();
    for att in &attached {
        assert_reaches(&att.netns_path, EXT_B, HTTP);
    }
    let mut set = tokio::task::JoinSet::new();
    for slot in 0..count {
        let net = net.clone();
        set.spawn(async move { net.detach(&format!("s{slot}"), slot).await });
    }
    while let Some(result) = set.join_next().await {
        result.unwrap().unwrap();
    }
    eprintln!("timing: {count} concurrent attaches {took:?}, then {count} concurrent detaches");
    assert!(lab.sandbox_netns().is_empty());
    assert_eq!(lab.ruleset(), empty);
}

#[tokio::test]
async fn attach_detach_timing() {
    require_root!();
    let lab = Lab::new("t");
    let net = NetworkManager::new(lab.config()).await.unwrap();
    let (mut attach, mut change, mut detach) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..10u32 {
        let egress = if round % 2 == 0 {
            Egress::Unrestricted
        } else {
            nets(&["198.51.100.0/24"])
        };
        let start = Instant::now();
        net.attach("t", round, &egress).await.unwrap();
        attach.push(start.elapsed());
        let start = Instant::now();
        net.set_egress("t", round, &Egress::DenyAll).await.unwrap();
        change.push(start.elapsed());
        let start = Instant::now();
        net.detach("t", round).await.unwrap();
        detach.push(start.elapsed());
    }
    for (what, times) in [
        ("attach", &mut attach),
        ("set_egress", &mut change),
        ("detach", &mut detach),
    ] {
        times.sort();
        eprintln!(
            "timing over 10 rounds: {what} min {:?} median {:?} max {:?}",
            times[0], times[5], times[9]
        );
    }
    assert!(lab.sandbox_netns().is_empty());
}
