//! Usage showback against a real Prometheus (Debian's `prometheus`) on loopback, scraping the
//! real `sbx serve` every second: numbers checked against a sandbox of known size, lifetime
//! and traffic. Needs root, the loopback registry and /usr/bin/prometheus.
mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::prometheus::{free_port, prometheus};
use common::sbxd::{self, ALLOWED_ADDR, TestNet};
use common::{Daemon, call, key};
use sbx::shared::models::sandbox::{CreateSandboxRequest, ExecRequest, ResourceLimits};
use sbx::shared::timestamp::now_unix;
use serde_json::{Value, json};

const SINK: &str = "import socket\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(('0.0.0.0', 9000))\ns.listen()\nc, _ = s.accept()\nn = 0\nwhile True:\n    d = c.recv(65536)\n    if not d:\n        break\n    n += len(d)\nprint(n)\n";

async fn wait_until<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < limit, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn usage(daemon: &Daemon, token: &str, query: &str) -> (u16, Value) {
    call(
        daemon,
        token,
        reqwest::Method::GET,
        &format!("/api/v1/usage?{query}"),
        None,
    )
    .await
}

#[tokio::test]
async fn usage_read_back_from_prometheus_matches_a_known_sandbox() {
    let net = TestNet::new();
    let prom_port = free_port();
    let daemon = sbxd::daemon(
        &net,
        &format!("[metering]\nmetricsUrl = \"http://127.0.0.1:{prom_port}\"\n"),
    );
    let admin = daemon.admin();
    let scraper = key(&admin, "prometheus", "operator", None).await;
    let target = daemon.url.trim_start_matches("http://").to_string();
    let prom = prometheus(prom_port, &target, &scraper);
    let http = reqwest::Client::new();
    wait_until("prometheus ready", Duration::from_secs(60), || {
        let (http, url) = (http.clone(), prom.url.clone());
        async move {
            http.get(format!("{url}/-/ready"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        }
    })
    .await;

    // Prometheus applies a new target's discovery after a few seconds: wait for its first
    // scrape, so that the whole life of the sandbox below is recorded.
    wait_until("the first scrape", Duration::from_secs(60), || {
        let (http, url) = (http.clone(), prom.url.clone());
        async move {
            let Ok(r) = http
                .get(format!("{url}/api/v1/query"))
                .query(&[("query", "up{job=\"sbx\"}")])
                .send()
                .await
            else {
                return false;
            };
            let body: Value = r.json().await.unwrap_or(Value::Null);
            body["data"]["result"][0]["value"][1] == "1"
        }
    })
    .await;

    // A tenant with one sandbox of 500m CPU and 512Mi memory, alive for a known time, that
    // sends 200,000 bytes out.
    let response = daemon
        .http()
        .post(format!("{}/api/v1/tenants", daemon.url))
        .header("x-api-key", daemon.admin_token())
        .json(&json!({"name": "meter", "spec": {"namespaces": ["meter-ns"]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    // A TCP sink in the namespace behind the router that reads to the end and prints the
    // byte count (busybox nc -l stops reading at its own stdin's end).
    let sink = Command::new("ip")
        .args(["netns", "exec", &net.ext, "python3", "-c", SINK])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ext = net.ext.clone();
    wait_until("the sink listening", Duration::from_secs(10), || {
        let ext = ext.clone();
        async move {
            let out = Command::new("ip")
                .args(["netns", "exec", &ext, "ss", "-Hltn", "sport = :9000"])
                .output()
                .unwrap();
            !out.stdout.is_empty()
        }
    })
    .await;
    let started = now_unix();
    admin
        .create_sandbox(&CreateSandboxRequest {
            name: Some("m1".into()),
            namespace: Some("meter-ns".into()),
            image: Some(sbxd::busybox()),
            limits: Some(ResourceLimits {
                cpu: Some("500m".into()),
                memory: Some("512Mi".into()),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let sent = admin
        .exec_sandbox(
            "m1",
            "meter-ns",
            &ExecRequest {
                command: Some(format!(
                    "head -c 200000 /dev/zero | nc {ALLOWED_ADDR} 9000; echo sent $?"
                )),
                timeout_seconds: Some(30),
            },
        )
        .await
        .unwrap();
    assert_eq!(sent.stdout.trim(), "sent 0", "{sent:?}");
    tokio::time::sleep(Duration::from_secs(8)).await;
    admin.delete_sandbox("m1", "meter-ns").await.unwrap();
    let ended = now_unix();
    let received = sink.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&received.stdout).trim(),
        "200000",
        "{} {:?}",
        String::from_utf8_lossy(&received.stderr),
        received.status
    );
    let lifetime = (ended - started) as f64;

    // Prometheus has the last increments once it scraped after the delete.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let token = daemon.admin_token();
    let query = format!(
        "from={}&to={}&group_by=tenant,namespace,backend",
        started - 30,
        now_unix()
    );
    let (status, body) = usage(&daemon, &token, &query).await;
    assert_eq!(status, 200, "{body}");
    let rows = body["data"]["rows"].as_array().unwrap();
    let row = rows
        .iter()
        .find(|r| r["tenant"] == "meter")
        .unwrap_or_else(|| panic!("no row for tenant meter: {body}"));
    assert_eq!(
        (row["namespace"].as_str(), row["backend"].as_str()),
        (Some("meter-ns"), Some("sbxd"))
    );
    let seconds = row["sandbox_seconds"].as_f64().unwrap();
    // Tolerance: the sandbox's lifetime to within 3 s (scrapes every 1 s, accrual every 5 s
    // between scrapes, Prometheus extrapolation at the window's edges).
    assert!(
        (seconds - lifetime).abs() <= 3.0,
        "sandbox_seconds {seconds} vs lifetime {lifetime}: {row}"
    );
    let ratio = |field: &str| row[field].as_f64().unwrap() / seconds;
    assert!((ratio("vcpu_seconds") - 0.5).abs() < 0.02, "{row}");
    assert!((ratio("memory_gib_seconds") - 0.5).abs() < 0.02, "{row}");
    // No disk limit asked for: the sandbox got `[sandboxDefaults] disk` (10 GiB), reserved.
    assert!((ratio("disk_gib_seconds") - 10.0).abs() < 0.4, "{row}");
    let egress = row["egress_bytes"].as_f64().unwrap();
    assert!(
        (200_000.0..300_000.0).contains(&egress),
        "egress {egress}: {row}"
    );

    // A tenant-scoped key reads its own tenant only.
    let user = key(&admin, "u", "read-only", Some("meter")).await;
    let (status, body) = usage(
        &daemon,
        &user,
        &format!("from={}&to={}", started - 30, now_unix()),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let own = body["data"]["rows"][0]["sandbox_seconds"].as_f64().unwrap();
    assert!((own - seconds).abs() < 2.0, "{body}");
    let (status, _) = usage(&daemon, &user, "from=0&to=1&tenant=someone-else").await;
    assert_eq!(status, 403);
    // Bad ranges and groupings are 400.
    for bad in [
        "to=1",
        "from=2&to=1",
        "from=0&to=1&group_by=color",
        "from=yesterday&to=1",
    ] {
        assert_eq!(usage(&daemon, &token, bad).await.0, 400, "{bad}");
    }
    // The CLI: relative times, grouping, a table by default.
    let config = tempfile::tempdir().unwrap();
    let out = common::cli(config.path())
        .env("SBX_SERVER", &daemon.url)
        .env("SBX_API_KEY", &token)
        .args(["usage", "--from", "5m ago", "--group-by", "tenant,state"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("TENANT"), "{text}");
    assert!(text.contains("meter"), "{text}");
    // The request metrics are there too.
    let metrics = daemon.scrape(&scraper).await;
    assert!(
        metrics.contains(
            "sbx_http_requests_total{method=\"GET\",route=\"/api/v1/usage\",status=\"200\"}"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("sbx_http_request_duration_seconds_bucket"));
    assert_eq!(
        daemon
            .http()
            .get(format!("{}/metrics", daemon.url))
            .header("x-api-key", &user)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
}

#[tokio::test]
async fn usage_without_a_metrics_server_is_400_and_an_unreachable_one_502() {
    let daemon = Daemon::start();
    let (status, body) = usage(&daemon, &daemon.admin_token(), "from=0&to=10").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("metering.metricsUrl")
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sbx.toml");
    let port = free_port();
    std::fs::write(
        &config,
        format!("[metering]\nmetricsUrl = \"http://127.0.0.1:{port}\"\n"),
    )
    .unwrap();
    let daemon = Daemon::start_with(&["--config", config.to_str().unwrap()]);
    let (status, body) = usage(&daemon, &daemon.admin_token(), "from=0&to=10").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (502, Some("MetricsUnavailable")),
        "{body}"
    );
}
