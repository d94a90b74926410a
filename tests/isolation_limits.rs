//! Issue 43, points 15 and 18: what one tenant or one anonymous client may take from the
//! daemon, and what the audit trail and the request log keep of it, black-box against a real
//! `sbx serve` with real sandboxes (runc, the loopback registry). A flood of bad tokens from
//! one address is refused with 429 before the tokens are verified (a known key is still
//! served), and audited as a count;
//! a tenant at its cap of exec streams, log follows, file transfers or execs gets 429 while
//! another tenant is served; a WebSocket message over 1 MiB is refused by its header (close
//! 1009); `POST /exec` of 200 MiB of control bytes answers a bounded body without the
//! daemon's RSS following; a sandbox nobody sized gets the default size; streamed execs,
//! downloads, stats and pause/resume are audited with their namespace; the request log
//! never holds a query. Needs root.
mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::Daemon;
use common::sbxd::{self, TestNet};
use futures_util::{SinkExt, StreamExt};
use sbx::cli::client::ApiClient;
use sbx::shared::exec_stream::{ExecStatus, ExecStreamQuery, Frame};
use sbx::shared::models::sandbox::CreateSandboxRequest;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::Message;

/// How much the daemon's peak RSS may pass its RSS before an attack.
const RSS_SLACK: u64 = 50 << 20;

/// A token of the right shape that no daemon minted.
const BAD_TOKEN: &str =
    "0123456789abcdef_0000000000000000000000000000000000000000000000000000000000000000";

/// A field of `/proc/<pid>/status`, in bytes.
fn status_bytes(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("a number of kB");
    kib << 10
}

/// Runs `attack` and returns its result with how far the daemon's peak RSS (`VmHWM`, reset
/// first through `clear_refs`) went above its RSS before it.
async fn peak_rss_growth<T>(
    daemon: &Daemon,
    attack: impl std::future::Future<Output = T>,
) -> (T, u64) {
    let pid = daemon.pid();
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset VmHWM");
    let before = status_bytes(pid, "VmRSS:");
    let out = attack.await;
    let peak = status_bytes(pid, "VmHWM:");
    eprintln!(
        "daemon RSS {} MiB before, peak {} MiB during",
        before >> 20,
        peak >> 20
    );
    (out, peak.saturating_sub(before))
}

/// A daemon without sandboxes, with this config file text.
fn plain_daemon(config: &str) -> (Daemon, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("config dir");
    let path = dir.path().join("sbx.toml");
    std::fs::write(&path, config).expect("write the config");
    let daemon = Daemon::start_with(&["--config", path.to_str().expect("utf-8 path")]);
    (daemon, dir)
}

async fn create_running(client: &ApiClient, name: &str, namespace: &str) {
    client
        .create_sandbox(&CreateSandboxRequest {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            image: Some(sbxd::busybox()),
            ..Default::default()
        })
        .await
        .expect("create");
    sbxd::running(client, name, namespace).await;
}

/// The daemon's audit lines so far.
fn audit_lines(daemon: &Daemon) -> Vec<Value> {
    std::fs::read_to_string(daemon.data_dir.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("an audit line is JSON"))
        .collect()
}

/// `GET path` with `token`: status, `Retry-After` (if any) and the body as JSON.
async fn get(daemon: &Daemon, token: &str, path: &str) -> (u16, Option<u64>, Value) {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", daemon.url))
        .header("x-api-key", token)
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    let retry = retry_after(&response);
    let body = response.json().await.unwrap_or(Value::Null);
    (status, retry, body)
}

fn retry_after(response: &reqwest::Response) -> Option<u64> {
    response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// Asserts a 429 in the envelope with a `Retry-After` of at least a second.
fn assert_too_many(status: u16, retry: Option<u64>, body: &Value, what: &str) {
    assert_eq!(status, 429, "{what}: {body}");
    assert_eq!(body["error"]["code"], "TooManyRequests", "{what}: {body}");
    assert!(
        retry.is_some_and(|s| s >= 1),
        "{what}: Retry-After {retry:?}"
    );
}

#[tokio::test]
async fn a_flood_of_bad_tokens_from_one_address_is_refused_and_audited_as_a_count() {
    let (daemon, _config) = plain_daemon("[audit]\nauthFailureInterval = \"1s\"\n");
    let admin = daemon.admin_token();
    assert_eq!(get(&daemon, &admin, "/api/v1/sandboxes").await.0, 200);

    let started = Instant::now();
    let (mut unauthorized, mut refused) = (0u64, 0u64);
    for i in 0..80 {
        // Both kinds of failure count: a token no daemon minted, and no credentials at all.
        let (status, retry, body) = if i % 2 == 0 {
            get(&daemon, BAD_TOKEN, "/api/v1/sandboxes").await
        } else {
            let response = reqwest::get(format!("{}/api/v1/sandboxes", daemon.url))
                .await
                .unwrap();
            let (status, retry) = (response.status().as_u16(), retry_after(&response));
            (status, retry, response.json().await.unwrap_or(Value::Null))
        };
        match status {
            401 => {
                assert_eq!(body["error"]["code"], "Unauthorized", "{body}");
                unauthorized += 1;
            }
            _ => {
                assert_too_many(status, retry, &body, "a bad token past the burst");
                assert!(
                    body["error"]["message"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("failed authentications"),
                    "{body}"
                );
                refused += 1;
            }
        }
    }
    // The default burst is 20 failures, refilled at 2 a second.
    let allowed = 20 + 2 * started.elapsed().as_secs() + 2;
    assert!(
        (20..=allowed).contains(&unauthorized),
        "{unauthorized} 401s (at most {allowed} expected)"
    );
    assert!(refused >= 80 - allowed, "{refused} 429s");

    // A key the daemon knows (by its id: a lookup, no hashing) is still served from that
    // address, which clients behind one proxy share with whoever floods it; a JWT-shaped
    // token is refused unverified.
    let (status, _, body) = get(&daemon, &admin, "/api/v1/sandboxes").await;
    assert_eq!(status, 200, "a good key from the flooding address: {body}");
    let (status, retry, body) = get(&daemon, "aaa.bbb.ccc", "/api/v1/sandboxes").await;
    assert_too_many(status, retry, &body, "a JWT from the flooding address");
    refused += 1;
    // The daemon is up, and the address's failures are answered 401 again once the bucket
    // refilled.
    let health = reqwest::get(format!("{}/health", daemon.url))
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
    tokio::time::sleep(Duration::from_secs(retry.unwrap_or(1))).await;
    let (status, _, body) = get(&daemon, BAD_TOKEN, "/api/v1/sandboxes").await;
    assert_eq!(status, 401, "{body}");
    unauthorized += 1;

    // The audit trail has every failure, counted: a few lines per address and status, not
    // one per request.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lines: Vec<Value> = audit_lines(&daemon)
            .into_iter()
            .filter(|l| l["action"] == "authenticate")
            .collect();
        let sum = |status: u64| -> u64 {
            lines
                .iter()
                .filter(|l| l["status"] == status)
                .map(|l| l["count"].as_u64().unwrap_or(0))
                .sum()
        };
        if sum(401) == unauthorized && sum(429) == refused {
            for line in &lines {
                assert_eq!(line["address"], "127.0.0.1", "{line}");
                assert_eq!(line["path"], "/api/v1/sandboxes", "{line}");
                assert_eq!(line["principal"], "", "{line}");
            }
            assert!(
                lines.len() < 15,
                "{} audit lines for {} failures: {lines:?}",
                lines.len(),
                unauthorized + refused
            );
            assert!(
                lines.iter().any(|l| l["count"].as_u64() > Some(5)),
                "{lines:?}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "audit counts {} / {} of {unauthorized} 401s and {refused} 429s: {lines:?}",
            sum(401),
            sum(429)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Opens a streamed exec of `command` in `name`; `Ok` holds it open.
async fn open_exec_stream(
    daemon: &Daemon,
    token: &str,
    name: &str,
    namespace: &str,
    command: &str,
) -> Result<sbx::shared::exec_stream::ClientSocket, (u16, Value)> {
    let query = ExecStreamQuery {
        namespace: Some(namespace.into()),
        command: Some(command.into()),
        stdin: true,
        ..Default::default()
    };
    let request = reqwest::Client::builder()
        .http1_only()
        .build()
        .unwrap()
        .get(format!(
            "{}/api/v1/sandboxes/{name}/exec/stream",
            daemon.url
        ))
        .query(&query)
        .header("x-api-key", token);
    sbx::shared::exec_stream::connect(request)
        .await
        .map_err(|(status, body)| (status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
}

/// The `Retry-After` of a refused stream upgrade (the refusal itself, with its headers).
async fn refused_upgrade(daemon: &Daemon, token: &str, name: &str, namespace: &str) -> Option<u64> {
    let response = reqwest::Client::builder()
        .http1_only()
        .build()
        .unwrap()
        .get(format!(
            "{}/api/v1/sandboxes/{name}/exec/stream",
            daemon.url
        ))
        .query(&[("namespace", namespace), ("command", "true")])
        .header("x-api-key", token)
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .header("sec-websocket-protocol", "v1.exec.sbx.io")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 429);
    retry_after(&response)
}

/// `GET …/logs?follow=true`: the open response, or the refusal.
async fn follow(
    daemon: &Daemon,
    token: &str,
    name: &str,
    namespace: &str,
) -> Result<reqwest::Response, (u16, Option<u64>, Value)> {
    let response = reqwest::Client::new()
        .get(format!(
            "{}/api/v1/sandboxes/{name}/logs?namespace={namespace}&follow=true",
            daemon.url
        ))
        .header("x-api-key", token)
        .send()
        .await
        .unwrap();
    if response.status().is_success() {
        return Ok(response);
    }
    let (status, retry) = (response.status().as_u16(), retry_after(&response));
    Err((status, retry, response.json().await.unwrap_or(Value::Null)))
}

/// `GET …/files?path=` : the open response (its body unread), or the refusal.
async fn download(
    daemon: &Daemon,
    token: &str,
    name: &str,
    namespace: &str,
    path: &str,
) -> Result<reqwest::Response, (u16, Option<u64>, Value)> {
    let response = reqwest::Client::new()
        .get(format!(
            "{}/api/v1/sandboxes/{name}/files?namespace={namespace}&path={path}",
            daemon.url
        ))
        .header("x-api-key", token)
        .send()
        .await
        .unwrap();
    if response.status().is_success() {
        return Ok(response);
    }
    let (status, retry) = (response.status().as_u16(), retry_after(&response));
    Err((status, retry, response.json().await.unwrap_or(Value::Null)))
}

/// `POST …/exec` of `command`: status, `Retry-After`, body.
async fn exec(
    daemon: &Daemon,
    token: &str,
    name: &str,
    namespace: &str,
    command: &str,
) -> (u16, Option<u64>, Value) {
    let response = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/sandboxes/{name}/exec?namespace={namespace}",
            daemon.url
        ))
        .header("x-api-key", token)
        .json(&json!({ "command": command, "timeout_seconds": 120 }))
        .send()
        .await
        .unwrap();
    let (status, retry) = (response.status().as_u16(), retry_after(&response));
    (status, retry, response.json().await.unwrap_or(Value::Null))
}

/// Polls `attempt` (up to 30 s) until it is `Ok`: a slot given back is free again soon after.
async fn eventually<T, E: std::fmt::Debug, F: std::future::Future<Output = Result<T, E>>>(
    what: &str,
    mut attempt: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match attempt().await {
            Ok(value) => return value,
            Err(e) => assert!(Instant::now() < deadline, "{what}: still {e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_tenant_at_its_caps_gets_429_and_another_tenant_is_served() {
    let net = TestNet::new();
    // Small caps, so that reaching them takes few streams (the defaults are larger).
    let daemon = sbxd::daemon(
        &net,
        "[rateLimit.perTenant]\nexecs = 1\nexecStreams = 2\nlogFollows = 2\nfileTransfers = 1\n",
    );
    let admin = daemon.admin();
    let root = daemon.admin_token();
    for (tenant, ns) in [("acme", "acme-ns"), ("globex", "globex-ns")] {
        let (status, body) = common::call(
            &daemon,
            &root,
            reqwest::Method::POST,
            "/api/v1/tenants",
            Some(json!({"name": tenant, "spec": {"namespaces": [ns]}})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let a = common::key(&admin, "acme-user", "user", Some("acme")).await;
    let g = common::key(&admin, "globex-user", "user", Some("globex")).await;
    let (a_client, g_client) = (daemon.client(&a), daemon.client(&g));
    create_running(&a_client, "a", "acme-ns").await;
    create_running(&g_client, "g", "globex-ns").await;

    // Exec streams: two open, the third refused; the other tenant's opens.
    let first = open_exec_stream(&daemon, &a, "a", "acme-ns", "sleep 120").await;
    let second = open_exec_stream(&daemon, &a, "a", "acme-ns", "sleep 120").await;
    assert!(first.is_ok() && second.is_ok());
    let Err((status, body)) = open_exec_stream(&daemon, &a, "a", "acme-ns", "true").await else {
        panic!("a third exec stream of acme was opened")
    };
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "TooManyRequests");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("tenant 'acme'") && message.contains("execStreams"),
        "{message}"
    );
    assert!(refused_upgrade(&daemon, &a, "a", "acme-ns").await >= Some(1));
    let other = open_exec_stream(&daemon, &g, "g", "globex-ns", "sleep 120").await;
    assert!(other.is_ok(), "globex is not limited by acme's streams");
    // A stream that ends gives its slot back.
    drop(first);
    let again = eventually("acme's slot given back", || {
        open_exec_stream(&daemon, &a, "a", "acme-ns", "sleep 120")
    })
    .await;
    drop((second, again, other));

    // Log follows.
    let f1 = follow(&daemon, &a, "a", "acme-ns").await.expect("follow 1");
    let f2 = follow(&daemon, &a, "a", "acme-ns").await.expect("follow 2");
    let Err((status, retry, body)) = follow(&daemon, &a, "a", "acme-ns").await else {
        panic!("a third log follow of acme was served")
    };
    assert_too_many(status, retry, &body, "a third log follow");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("logFollows")
    );
    let g1 = follow(&daemon, &g, "g", "globex-ns").await;
    assert!(g1.is_ok(), "globex follows");
    drop(f1);
    let f3 = eventually("acme's follow slot given back", || {
        follow(&daemon, &a, "a", "acme-ns")
    })
    .await;
    drop((f2, f3, g1));

    // File transfers: a download held open (its body unread) takes acme's one slot.
    let (code, _, _) = sbxd::exec(
        &a_client,
        "a",
        "acme-ns",
        "head -c 67108864 /dev/zero > /tmp/big",
    )
    .await;
    assert_eq!(code, 0);
    let held = download(&daemon, &a, "a", "acme-ns", "/tmp/big")
        .await
        .expect("a download");
    let Err((status, retry, body)) = download(&daemon, &a, "a", "acme-ns", "/etc/hostname").await
    else {
        panic!("a second transfer of acme was served")
    };
    assert_too_many(status, retry, &body, "a second transfer");
    let upload = reqwest::Client::new()
        .put(format!(
            "{}/api/v1/sandboxes/a/files?namespace=acme-ns&path=/tmp",
            daemon.url
        ))
        .header("x-api-key", &a)
        .header("content-type", "application/x-tar")
        .body(vec![0u8; 1024])
        .send()
        .await
        .unwrap();
    let (status, retry) = (upload.status().as_u16(), retry_after(&upload));
    let body: Value = upload.json().await.unwrap();
    assert_too_many(status, retry, &body, "an upload beside a download");
    let g_download = download(&daemon, &g, "g", "globex-ns", "/etc/hostname").await;
    assert!(g_download.is_ok(), "globex downloads");
    drop(held);
    let small = eventually("acme's transfer slot given back", || {
        download(&daemon, &a, "a", "acme-ns", "/etc/hostname")
    })
    .await;
    assert!(!small.bytes().await.unwrap().is_empty());

    // Execs: one at a time for acme (its first still sleeps), globex unaffected meanwhile.
    let sleeper = {
        let (daemon_url, a) = (daemon.url.clone(), a.clone());
        // Until it has the slot: a probe below may hold it for a moment.
        tokio::spawn(async move {
            loop {
                let status = reqwest::Client::new()
                    .post(format!(
                        "{daemon_url}/api/v1/sandboxes/a/exec?namespace=acme-ns"
                    ))
                    .header("x-api-key", &a)
                    .json(&json!({"command": "sleep 10"}))
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16();
                if status != 429 {
                    return status;
                }
            }
        })
    };
    let (status, retry, body) = eventually("acme's second exec refused", || async {
        let answer = exec(&daemon, &a, "a", "acme-ns", "true").await;
        if answer.0 == 429 {
            Ok(answer)
        } else {
            Err(answer)
        }
    })
    .await;
    assert_too_many(status, retry, &body, "a second exec");
    let (status, _, body) = exec(&daemon, &g, "g", "globex-ns", "echo served").await;
    assert_eq!(
        (status, body["data"]["stdout"].as_str()),
        (200, Some("served\n"))
    );
    assert_eq!(sleeper.await.unwrap(), 200);
}

#[tokio::test]
async fn a_websocket_message_over_the_limit_is_refused_by_its_header() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let token = daemon.admin_token();
    create_running(&daemon.admin(), "ws", "default").await;

    let mut socket = open_exec_stream(&daemon, &token, "ws", "default", "cat")
        .await
        .expect("a stream");
    // Control: an ordinary message goes through.
    socket
        .send(Message::Binary(
            Frame::Stdin(Bytes::from_static(b"hello\n")).encode().into(),
        ))
        .await
        .unwrap();
    loop {
        match socket.next().await {
            Some(Ok(Message::Binary(b))) => {
                if Frame::decode(&b).unwrap() == Frame::Stdout(Bytes::from_static(b"hello\n")) {
                    break;
                }
            }
            other => panic!("no echo: {other:?}"),
        }
    }
    // A masked binary frame announcing 1 GiB, and a little of it: a server that waited for
    // the payload would never answer; one that read it would hold a gigabyte.
    let ((), growth) = peak_rss_growth(&daemon, async {
        let raw = socket.get_mut();
        let mut head = vec![0x82u8, 0x80 | 127];
        head.extend_from_slice(&(1u64 << 30).to_be_bytes());
        head.extend_from_slice(&[1, 2, 3, 4]);
        raw.write_all(&head).await.unwrap();
        raw.write_all(&[0u8; 4096]).await.unwrap();
        raw.flush().await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut status = None;
        loop {
            assert!(Instant::now() < deadline, "no close from the server");
            match tokio::time::timeout(Duration::from_secs(30), socket.next()).await {
                Ok(Some(Ok(Message::Binary(b)))) => {
                    if let Ok(Frame::Status(s)) = Frame::decode(&b) {
                        status = Some(s);
                    }
                }
                Ok(Some(Ok(Message::Close(frame)))) => {
                    let frame = frame.expect("a close code");
                    assert_eq!(u16::from(frame.code), 1009, "{frame:?}");
                    break;
                }
                Ok(Some(Ok(_))) => {}
                other => panic!("the stream ended without a close frame: {other:?}"),
            }
        }
        let status: ExecStatus = status.expect("a status before the close");
        let error = status.error.expect("an error status");
        assert_eq!(error.code, "BadRequest");
        assert!(error.message.contains("1048576"), "{}", error.message);
    })
    .await;
    assert!(
        growth < RSS_SLACK,
        "the daemon's RSS grew by {growth} bytes"
    );
    let health = reqwest::get(format!("{}/health", daemon.url))
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
}

#[tokio::test]
async fn exec_output_is_bounded_in_memory_and_as_json_and_sandboxes_get_the_default_size() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let token = daemon.admin_token();
    let admin = daemon.admin();
    create_running(&admin, "out", "default").await;

    // Nobody sized it: the default size (2 CPUs, 2 GiB), and the pids cap.
    let (_, sizes, _) = sbxd::exec(
        &admin,
        "out",
        "default",
        "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/memory/memory.limit_in_bytes \
         /sys/fs/cgroup/pids/pids.max",
    )
    .await;
    assert_eq!(sizes, format!("200000\n{}\n4096\n", 2u64 << 30));

    // 200 MiB of control bytes (six bytes each in JSON), then of bytes that are not UTF-8.
    for (what, byte) in [("control bytes", "\\001"), ("invalid UTF-8", "\\377")] {
        let command = format!("head -c 209715200 /dev/zero | tr '\\000' '{byte}'; echo done >&2");
        let ((status, length, body), growth) = peak_rss_growth(&daemon, async {
            let response = reqwest::Client::new()
                .post(format!("{}/api/v1/sandboxes/out/exec", daemon.url))
                .header("x-api-key", &token)
                .json(&json!({ "command": command, "timeout_seconds": 120 }))
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let text = response.bytes().await.unwrap();
            let body: Value = serde_json::from_slice(&text).expect("JSON");
            (status, text.len(), body)
        })
        .await;
        assert_eq!(status, 200, "{what}");
        let data = &body["data"];
        assert_eq!(data["truncated"], true, "{what}");
        assert_eq!(data["stderr"], "done\n", "{what}");
        let stdout = data["stdout"].as_str().unwrap();
        assert!(stdout.len() > 1 << 20, "{what}: some output is kept");
        // The default cap (10 MiB) bounds each stream's JSON form, not only its bytes.
        assert!(
            length < (10 << 20) + 4096,
            "{what}: a body of {length} bytes"
        );
        assert!(
            growth < RSS_SLACK,
            "{what}: the daemon's RSS grew by {growth} bytes"
        );
    }
}

#[tokio::test]
async fn streams_downloads_stats_and_pause_are_audited_and_the_log_has_no_query() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let token = daemon.admin_token();
    let admin = daemon.admin();
    create_running(&admin, "aud", "audit-ns").await;

    let marker = "s3cr3t-in-the-query";
    let mut stream = open_exec_stream(
        &daemon,
        &token,
        "aud",
        "audit-ns",
        &format!("echo {marker} >/dev/null; echo ran"),
    )
    .await
    .expect("a stream");
    while let Some(Ok(message)) = stream.next().await {
        if let Message::Binary(b) = message {
            if matches!(Frame::decode(&b), Ok(Frame::Status(_))) {
                break;
            }
        }
    }
    let held = download(&daemon, &token, "aud", "audit-ns", "/etc/hostname")
        .await
        .expect("download");
    held.bytes().await.unwrap();
    let (status, _, body) = get(
        &daemon,
        &token,
        "/api/v1/sandboxes/aud/files/stat?namespace=audit-ns&path=/etc/hostname",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    for action in ["pause", "resume"] {
        let (status, body) = common::call(
            &daemon,
            &token,
            reqwest::Method::POST,
            &format!("/api/v1/sandboxes/aud/{action}"),
            Some(json!({"namespace": "audit-ns"})),
        )
        .await;
        assert_eq!(status, 200, "{action}: {body}");
    }

    let wanted = [
        ("GET /api/v1/sandboxes/{name}/exec/stream", 101),
        ("GET /api/v1/sandboxes/{name}/files", 200),
        ("GET /api/v1/sandboxes/{name}/files/stat", 200),
        ("POST /api/v1/sandboxes/{name}/pause", 200),
        ("POST /api/v1/sandboxes/{name}/resume", 200),
    ];
    let lines = eventually("the audit lines", || async {
        let lines = audit_lines(&daemon);
        let found = wanted
            .iter()
            .all(|(action, _)| lines.iter().any(|l| l["action"] == *action));
        if found { Ok(lines) } else { Err(lines) }
    })
    .await;
    for (action, status) in wanted {
        let line = lines.iter().find(|l| l["action"] == action).unwrap();
        assert_eq!(
            (&line["namespace"], &line["status"], &line["outcome"]),
            (&json!("audit-ns"), &json!(status), &json!("ok")),
            "{line}"
        );
        assert!(!line["path"].as_str().unwrap().contains('?'), "{line}");
    }
    let audit = std::fs::read_to_string(daemon.data_dir.join("audit.jsonl")).unwrap();
    assert!(
        !audit.contains(marker),
        "the command is not in the audit trail"
    );

    // The request log names the path of each request, never its query.
    let log = daemon.log_text();
    assert!(log.contains("/api/v1/sandboxes/aud/exec/stream"), "{log}");
    assert!(
        !log.contains(marker),
        "the command is in the request log:\n{log}"
    );
    assert!(
        !log.contains("command="),
        "a query is in the request log:\n{log}"
    );
}
