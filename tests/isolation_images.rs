//! Issue 43 point 14, black-box against the real `sbx serve`: a tenant user names images only
//! from `[images] allowedRegistries` (operators from any), and no pull, whoever asks, contacts
//! a loopback, private or link-local address that a registry or a reference names: not the
//! registry itself, not the token service of its 401, not a redirect target. What a registry
//! writes in its errors never reaches the caller.
//!
//! The registry is a small HTTP server of the test's own on loopback (listed as a private
//! registry, as an operator would list an internal mirror) that answers each repository with
//! one attack; a second loopback listener records every connection, and must record none.
//! Needs the loopback test registry (`eval "$(scripts/registry start)"`); no sandboxes.
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{Daemon, call, key, test_registry};
use reqwest::Method as M;
use serde_json::{Value, json};

/// Text only the test's registry writes: it must never appear in an answer of the API.
const REGISTRY_SECRET: &str = "REGISTRY-SAYS-internal-host-10.1.2.3";

/// A loopback listener that counts the connections it accepts (and answers none).
struct Recorder {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl Recorder {
    fn start() -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let seen = connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stream.is_ok() {
                    seen.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        Recorder { port, connections }
    }

    fn count(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// The test's registry: `GET /v2/<attack>/…` answers with that attack; every request line
/// is recorded.
struct Registry {
    address: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Registry {
    fn start(recorder_port: u16) -> Registry {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        let me = address.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (log, me) = (log.clone(), me.clone());
                std::thread::spawn(move || serve(stream, &me, recorder_port, &log));
            }
        });
        Registry { address, requests }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// One request of the test's registry.
fn serve(stream: TcpStream, me: &str, recorder: u16, log: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => break,
            Ok(_) if header == "\r\n" => break,
            Ok(_) => {}
        }
    }
    let path = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    log.lock().unwrap().push(path.clone());
    let repository = path
        .strip_prefix("/v2/")
        .and_then(|p| p.split('/').next())
        .unwrap_or_default();
    let challenge = |realm: &str| {
        (
            "401 Unauthorized",
            format!("WWW-Authenticate: Bearer realm=\"{realm}\",service=\"test\"\r\n"),
            String::new(),
        )
    };
    let redirect = |to: &str| {
        (
            "307 Temporary Redirect",
            format!("Location: {to}\r\n"),
            String::new(),
        )
    };
    let (status, headers, body) = match repository {
        _ if path.starts_with("/token") => (
            "403 Forbidden",
            String::new(),
            format!("token refused: {REGISTRY_SECRET}"),
        ),
        "realm-metadata" => challenge("http://169.254.169.254/latest/api/token"),
        "realm-loopback" => challenge(&format!("http://127.0.0.1:{recorder}/token")),
        "realm-name" => challenge(&format!("http://localhost:{recorder}/token")),
        "realm-private" => challenge("http://10.1.2.3/token"),
        "redirect-loopback" => redirect(&format!("http://127.0.0.1:{recorder}/manifest")),
        "redirect-name" => redirect(&format!("http://localhost:{recorder}/manifest")),
        "redirect-metadata" => redirect("http://169.254.169.254/latest/meta-data/"),
        "redirect-ipv6" => redirect(&format!("http://[::1]:{recorder}/manifest")),
        "chatty" => (
            "500 Internal Server Error",
            "Content-Type: application/json\r\n".to_string(),
            json!({"errors": [{"code": "UNKNOWN", "message": REGISTRY_SECRET}]}).to_string(),
        ),
        "chatty-token" => challenge(&format!("http://{me}/token")),
        "missing" => (
            "404 Not Found",
            "Content-Type: application/json\r\n".to_string(),
            json!({"errors": [{"code": "MANIFEST_UNKNOWN", "message": REGISTRY_SECRET}]})
                .to_string(),
        ),
        _ => ("404 Not Found", String::new(), String::new()),
    };
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
    // Drain what the client still sends, so that closing does not reset the answer.
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_millis(100)));
    let _ = reader.read(&mut [0u8; 1024]);
}

/// A daemon whose tenant users may pull from `allowed`, and for which `private` registries
/// may be on loopback.
fn daemon(allowed: &[&str], private: &[&str]) -> (Daemon, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sbx.toml");
    let list = |items: &[&str]| {
        items
            .iter()
            .map(|i| format!("\"{i}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let insecure: Vec<&str> = private.to_vec();
    std::fs::write(
        &config,
        format!(
            "[images]\ninsecureRegistries = [{}]\nprivateRegistries = [{}]\nallowedRegistries = [{}]\n",
            list(&insecure),
            list(private),
            list(allowed)
        ),
    )
    .unwrap();
    let daemon = Daemon::start_with(&["--config", config.to_str().unwrap()]);
    (daemon, dir)
}

/// A tenant `blue` (namespace `blue`) and the token of a `user` key of it.
async fn tenant_user(daemon: &Daemon) -> String {
    let (status, body) = call(
        daemon,
        &daemon.admin_token(),
        M::POST,
        "/api/v1/tenants",
        Some(json!({"name": "blue", "spec": {"namespaces": ["blue"]}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    key(&daemon.admin(), "blue-user", "user", Some("blue")).await
}

async fn pull(daemon: &Daemon, token: &str, reference: &str) -> (u16, Value) {
    call(
        daemon,
        token,
        M::POST,
        "/api/v1/images/pull",
        Some(json!({"reference": reference})),
    )
    .await
}

fn error(body: &Value) -> (&str, &str) {
    (
        body["error"]["code"].as_str().unwrap_or_default(),
        body["error"]["message"].as_str().unwrap_or_default(),
    )
}

#[tokio::test]
async fn a_tenant_user_pulls_only_from_the_allowed_registries() {
    let registry = test_registry();
    // The real test registry is private but not allowed: only the (unused) allowed one is.
    let (daemon, _dir) = daemon(&["registry.example.com"], &[&registry]);
    let user = tenant_user(&daemon).await;
    let busybox = format!("{registry}/sbx-test/busybox:latest");

    for reference in [
        busybox.as_str(),
        "busybox",
        "quay.io/someone/tool:1",
        "169.254.169.254/latest/meta-data:1",
    ] {
        let (status, body) = pull(&daemon, &user, reference).await;
        assert_eq!(status, 403, "{reference}: {body}");
        let (code, message) = error(&body);
        assert_eq!(code, "Forbidden", "{reference}");
        assert!(
            message.contains("[images] allowedRegistries")
                && message.contains("registry.example.com"),
            "{reference}: {message}"
        );
    }
    // A sandbox's image is a pull too: refused before anything is made.
    let (status, body) = call(
        &daemon,
        &user,
        M::POST,
        "/api/v1/sandboxes",
        Some(json!({"name": "web", "namespace": "blue", "image": busybox})),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(error(&body).1.contains("allowedRegistries"), "{body}");
    let (status, _) = call(
        &daemon,
        &user,
        M::GET,
        "/api/v1/sandboxes/web?namespace=blue",
        None,
    )
    .await;
    assert_eq!(status, 404, "nothing was made");
    let (status, body) = call(
        &daemon,
        &daemon.admin_token(),
        M::GET,
        "/api/v1/images",
        None,
    )
    .await;
    assert_eq!(
        (status, &body["data"]),
        (200, &json!([])),
        "nothing was pulled"
    );

    // Operators and admins pull from any registry: the same image, 201.
    let operator = key(&daemon.admin(), "ops", "operator", None).await;
    let (status, body) = pull(&daemon, &operator, &busybox).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["data"]["reference"], busybox);

    // The control: once an admin allows the registry, the same user's pull works.
    let (daemon, _dir) = daemon_allowing(&registry);
    let user = tenant_user(&daemon).await;
    let (status, body) = pull(&daemon, &user, &busybox).await;
    assert_eq!(status, 201, "{body}");
}

fn daemon_allowing(registry: &str) -> (Daemon, tempfile::TempDir) {
    daemon(&[registry], &[registry])
}

#[tokio::test]
async fn no_pull_reaches_a_private_address_a_registry_or_a_reference_names() {
    let recorder = Recorder::start();
    let fake = Registry::start(recorder.port);
    let loopback_name = format!("localhost:{}", recorder.port);
    let loopback_ip = format!("127.0.0.1:{}", recorder.port);
    let (daemon, _dir) = daemon(
        &[
            &fake.address,
            &loopback_name,
            &loopback_ip,
            "169.254.169.254",
        ],
        &[&fake.address],
    );
    let user = tenant_user(&daemon).await;
    let admin = daemon.admin_token();

    // The reference's own registry: a name resolving to loopback, an IP literal on loopback,
    // the metadata address. Allowed registries, so only the address rule refuses them.
    for reference in [
        format!("{loopback_name}/x/y:1"),
        format!("{loopback_ip}/x/y:1"),
        "169.254.169.254/latest/meta-data:1".to_string(),
    ] {
        for token in [&user, &admin] {
            let (status, body) = pull(&daemon, token, &reference).await;
            assert_eq!(status, 403, "{reference}: {body}");
            let (code, message) = error(&body);
            assert_eq!(code, "Forbidden", "{reference}");
            assert!(
                message.contains("is at a")
                    && message.contains("address")
                    && message.contains("[images] privateRegistries"),
                "{reference}: {message}"
            );
        }
    }

    // Hosts the registry names: the token service of its 401, and redirects; each a literal
    // or a name, on loopback, the LAN or the metadata address.
    for attack in [
        "realm-metadata",
        "realm-loopback",
        "realm-name",
        "realm-private",
        "redirect-loopback",
        "redirect-name",
        "redirect-metadata",
        "redirect-ipv6",
    ] {
        let reference = format!("{}/{attack}/image:1", fake.address);
        let (status, body) = pull(&daemon, &user, &reference).await;
        assert_eq!(status, 403, "{attack}: {body}");
        let (code, message) = error(&body);
        assert_eq!(code, "Forbidden", "{attack}");
        assert!(
            message.contains("a token service or a redirect")
                && message.contains("[images] privateRegistries"),
            "{attack}: {message}"
        );
        // The host the registry chose is not repeated to the caller.
        for echoed in [
            "169.254",
            "localhost",
            "10.1.2.3",
            &recorder.port.to_string(),
        ] {
            assert!(!message.contains(echoed), "{attack}: {message}");
        }
        assert!(
            fake.requests()
                .iter()
                .any(|p| p.starts_with(&format!("/v2/{attack}/"))),
            "{attack}: the pull reached the registry, so the refusal is the next hop's"
        );
    }
    assert_eq!(
        recorder.count(),
        0,
        "no pull connected to the loopback listener a registry or a reference named"
    );
    assert!(
        fake.requests().iter().all(|p| !p.starts_with("/token")),
        "no token service was asked"
    );
}

#[tokio::test]
async fn what_a_registry_writes_never_reaches_the_caller() {
    let recorder = Recorder::start();
    let fake = Registry::start(recorder.port);
    let (daemon, _dir) = daemon(&[&fake.address], &[&fake.address]);
    let user = tenant_user(&daemon).await;
    for (attack, want_status, says) in [
        ("chatty", 503, "answered HTTP 500"),
        ("chatty-token", 503, "token service answered HTTP 403"),
        ("missing", 404, "not found"),
    ] {
        let reference = format!("{}/{attack}/image:1", fake.address);
        let (status, body) = pull(&daemon, &user, &reference).await;
        assert_eq!(status, want_status, "{attack}: {body}");
        let message = error(&body).1;
        assert!(message.contains(says), "{attack}: {message}");
        assert!(
            !body.to_string().contains("REGISTRY-SAYS") && !body.to_string().contains("10.1.2.3"),
            "{attack}: the registry's text was echoed: {body}"
        );
    }
    // The token service on the registry's own host and port was asked: it is trusted with it.
    assert!(fake.requests().iter().any(|p| p.starts_with("/token")));
    // The details are in the daemon's log, for the operator.
    assert!(
        daemon
            .log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(REGISTRY_SECRET)),
        "the registry's answer is logged"
    );
}
