//! Sandboxes for real on the embedded default: the real `sbx serve` with the sbxd runtime
//! (runc, overlayfs, cgroups, a netns per sandbox, nftables), images from the real loopback
//! registry, networks inside namespaces the test creates. Needs root.
mod common;

use std::time::{Duration, Instant};

use common::sbxd::{self, ALLOWED_ADDR, DENIED_ADDR, SERVER_PORT, TestNet};
use common::{Daemon, cli};
use reqwest::StatusCode;
use sbx::cli::client::{ApiClient, ClientError};
use sbx::shared::models::sandbox::{
    CreateSandboxRequest, ExecRequest, LogsQuery, PauseRequest, ResourceLimits, ResumeRequest,
    Sandbox, SandboxStatus,
};
use serde_json::{Value, json};

fn request(name: &str) -> CreateSandboxRequest {
    CreateSandboxRequest {
        name: Some(name.into()),
        image: Some(sbxd::busybox()),
        ..Default::default()
    }
}

async fn wait_settled(client: &ApiClient, name: &str, namespace: &str) -> Sandbox {
    let started = Instant::now();
    loop {
        let s = client
            .get_sandbox(name, namespace)
            .await
            .expect("get sandbox");
        let settled = (s.status == SandboxStatus::Running && s.ready == "True")
            || s.status == SandboxStatus::Failed;
        if settled {
            return s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{name} never settled: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn create_ready(client: &ApiClient, req: CreateSandboxRequest) -> Sandbox {
    let name = req.name.clone().unwrap();
    let ns = req.namespace.clone().unwrap_or_else(|| "default".into());
    client.create_sandbox(&req).await.expect("create");
    let s = wait_settled(client, &name, &ns).await;
    assert_eq!(s.status, SandboxStatus::Running, "{s:?}");
    s
}

async fn sh(client: &ApiClient, name: &str, command: &str) -> (i32, String, String) {
    let r = client
        .exec_sandbox(
            name,
            "default",
            &ExecRequest {
                command: Some(command.into()),
                timeout_seconds: Some(60),
            },
        )
        .await
        .expect("exec");
    (r.exit_code, r.stdout, r.stderr)
}

fn api_status<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (u16, String) {
    match r {
        Err(ClientError::Api(e)) => (e.status, e.code),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Ids of the sandboxes that exist on disk now.
fn sandbox_ids(daemon: &Daemon) -> Vec<String> {
    sbxd::sandbox_ids(&daemon.data_dir)
}

fn assert_no_leftovers(daemon: &Daemon, ids: &[String]) {
    // A delete answers once processes, mounts, cgroups and files are gone; the network
    // follows a few milliseconds later.
    let started = Instant::now();
    for id in ids {
        loop {
            let left = sbxd::leftovers(daemon, Some(id));
            if left.is_empty() {
                break;
            }
            let network_only = left.iter().all(|l| l.starts_with("netns "));
            assert!(
                network_only && started.elapsed() < Duration::from_secs(10),
                "sandbox {id} left: {left:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[tokio::test]
async fn lifecycle_exec_logs_pause_metrics_delete() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "[runtime]\nexecOutputCap = 4096\n");
    let client = daemon.admin();

    let http = daemon.http();
    let response = http
        .post(format!("{}/api/v1/sandboxes", daemon.url))
        .header("X-API-Key", daemon.admin_token())
        .json(&request("demo"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(
        response.headers()["location"],
        "/api/v1/sandboxes/demo?namespace=default"
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["data"],
        json!({"name": "demo", "namespace": "default", "image": sbxd::busybox()})
    );

    let s = wait_settled(&client, "demo", "default").await;
    assert_eq!(
        (s.status, s.ready.as_str(), s.restarts),
        (SandboxStatus::Running, "True", 0)
    );
    assert_eq!(s.error_message, "");
    assert_eq!(s.backend, "sbxd");
    assert!(s.age.starts_with("0:00:"), "{}", s.age);
    // The sandbox's session keyring is its shim's (owned by root), not one charged to the
    // sandboxes' shared host id: the kernel's per-user key quota (200) would cap the host.
    let key_users = std::fs::read_to_string("/proc/key-users").unwrap();
    assert!(
        !key_users
            .lines()
            .any(|l| l.trim_start().starts_with("100000:")),
        "keys owned by the sandboxes' host id: {key_users}"
    );
    let listed = client.list_sandboxes(Some("default")).await.unwrap();
    assert_eq!(
        listed.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["demo"]
    );
    assert!(
        client
            .list_sandboxes(Some("other"))
            .await
            .unwrap()
            .is_empty()
    );

    let (code, out, err) = sh(&client, "demo", "echo out; echo err >&2; hostname; exit 3").await;
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (3, "out\ndemo\n", "err\n")
    );
    let r = client
        .exec_sandbox(
            "demo",
            "default",
            &ExecRequest {
                command: Some("true".into()),
                timeout_seconds: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(r.exit_code, 0);
    assert!(!r.timed_out && !r.truncated);

    // The main process's stdout is the sandbox log.
    sh(
        &client,
        "demo",
        "for i in 1 2 3; do echo line-$i > /proc/1/fd/1; done; sleep 0.2; echo oops > /proc/1/fd/2",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let q = |tail: u64, since: u64| LogsQuery {
        namespace: None,
        container: "sandbox".into(),
        tail,
        since,
        follow: false,
    };
    let logs = client.sandbox_logs("demo", &q(200, 0)).await.unwrap().logs;
    assert_eq!(logs, "line-1\nline-2\nline-3\noops\n");
    assert_eq!(
        client.sandbox_logs("demo", &q(2, 0)).await.unwrap().logs,
        "line-3\noops\n"
    );
    assert_eq!(
        client.sandbox_logs("demo", &q(200, 60)).await.unwrap().logs,
        logs
    );
    let (status, code) = api_status(
        client
            .sandbox_logs(
                "demo",
                &LogsQuery {
                    container: "sidecar".into(),
                    ..q(1, 0)
                },
            )
            .await,
    );
    assert_eq!((status, code.as_str()), (404, "NotFound"));
    let (status, _) = api_status(client.sandbox_logs("ghost", &q(1, 0)).await);
    assert_eq!(status, 404);

    // Metrics from the cgroup.
    sh(
        &client,
        "demo",
        "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done",
    )
    .await;
    let metrics = client.sandbox_metrics("default").await.unwrap();
    assert_eq!(metrics.len(), 1);
    assert!(metrics[0].cpu_usage.ends_with('m'), "{:?}", metrics[0]);
    assert!(metrics[0].memory_usage.ends_with("Mi"), "{:?}", metrics[0]);

    // Pause freezes: status Paused, not ready, exec refused; resume brings it back.
    client
        .pause_sandbox("demo", &PauseRequest::default())
        .await
        .unwrap();
    let s = client.get_sandbox("demo", "default").await.unwrap();
    assert_eq!(
        (s.status, s.ready.as_str()),
        (SandboxStatus::Paused, "False")
    );
    let id = sandbox_ids(&daemon).pop().unwrap();
    let freezer = std::fs::read_to_string(format!("/sys/fs/cgroup/freezer/sbx/{id}/freezer.state"))
        .unwrap_or_default();
    assert_eq!(freezer.trim(), "FROZEN");
    // sbxd freezes the cgroup itself; the runtime reads the same state.
    let runtime_state = |id: &str| -> Value {
        let out = std::process::Command::new("runc")
            .arg("--root")
            .arg(daemon.data_dir.join("runtime").join("runc"))
            .args(["state", id])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(runtime_state(&id)["status"], "paused");
    let (status, code) = api_status(
        client
            .exec_sandbox(
                "demo",
                "default",
                &ExecRequest {
                    command: Some("true".into()),
                    timeout_seconds: None,
                },
            )
            .await,
    );
    assert_eq!((status, code.as_str()), (409, "Conflict"));
    client
        .resume_sandbox("demo", &ResumeRequest::default())
        .await
        .unwrap();
    client
        .resume_sandbox("demo", &ResumeRequest::default())
        .await
        .unwrap();
    assert_eq!(sh(&client, "demo", "echo back").await.1, "back\n");
    assert_eq!(runtime_state(&id)["status"], "running");

    // Exec limits: timeout kills the command tree.
    let r = client
        .exec_sandbox(
            "demo",
            "default",
            &ExecRequest {
                command: Some("sleep 30 & sleep 30; echo never".into()),
                timeout_seconds: Some(1),
            },
        )
        .await
        .unwrap();
    assert_eq!((r.exit_code, r.timed_out), (124, true));
    let (code, out, _) = sh(&client, "demo", "ps -o args | grep -c '^sleep 30$' || true").await;
    assert_eq!(
        (code, out.trim()),
        (0, "0"),
        "the timed-out command's children were killed"
    );

    // Output beyond the cap is cut and said so.
    let r = client
        .exec_sandbox(
            "demo",
            "default",
            &ExecRequest {
                command: Some("seq 1 5000".into()),
                timeout_seconds: None,
            },
        )
        .await
        .unwrap();
    assert_eq!((r.exit_code, r.truncated, r.stdout.len()), (0, true, 4096));
    assert!(r.stdout.starts_with("1\n2\n3\n"));

    // A main process that exits is restarted, and counted.
    sh(&client, "demo", "kill 1").await;
    let started = Instant::now();
    let s = loop {
        let s = client.get_sandbox("demo", "default").await.unwrap();
        if s.restarts == 1 && s.ready == "True" {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no restart: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(s.status, SandboxStatus::Running);
    assert!(
        s.error_message.contains("exited with code 0"),
        "{}",
        s.error_message
    );
    assert_eq!(sh(&client, "demo", "echo alive").await.1, "alive\n");

    // Delete removes everything.
    let ids = sandbox_ids(&daemon);
    client.delete_sandbox("demo", "default").await.unwrap();
    let (status, code) = api_status(client.get_sandbox("demo", "default").await);
    assert_eq!((status, code.as_str()), (404, "NotFound"));
    assert_no_leftovers(&daemon, &ids);
}

#[tokio::test]
async fn create_body_fields_take_effect_inside_the_sandbox() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let client = daemon.admin();
    let dir = tempfile::tempdir().unwrap();
    let env_file = dir.path().join("app.env");
    std::fs::write(
        &env_file,
        "# app\nSECRET_TOKEN=s3cr3t-value\nexport GREETING=\"hello world\"\n",
    )
    .unwrap();

    let mut req = request("shaped");
    req.pod_non_root = true;
    req.cap_add = Some(vec!["NET_BIND_SERVICE".into()]);
    req.limits = Some(ResourceLimits {
        cpu: Some("250m".into()),
        memory: Some("48Mi".into()),
        ..Default::default()
    });
    req.env_file = Some(env_file.display().to_string());
    req.before_script = Some("echo prepared > /tmp/marker; sleep 0.3".into());
    create_ready(&client, req).await;

    let (_, out, _) = sh(&client, "shaped", "id -u; id -g; id -G").await;
    assert_eq!(out, "65532\n65532\n65532\n");
    let (_, status, _) = sh(
        &client,
        "shaped",
        "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status",
    )
    .await;
    assert!(
        status.contains("CapEff:\t0000000000000400"),
        "only NET_BIND_SERVICE: {status}"
    );
    assert!(status.contains("CapBnd:\t0000000000000400"), "{status}");
    assert!(
        status.contains("NoNewPrivs:\t1") && status.contains("Seccomp:\t2"),
        "{status}"
    );
    let (code, _, _) = sh(&client, "shaped", "nc -l -p 80 & p=$!; sleep 0.2; kill $p").await;
    assert_eq!(
        code, 0,
        "binding :80 works with NET_BIND_SERVICE as uid 65532"
    );
    let (_, owner, _) = sh(&client, "shaped", "touch /owned && stat -c %u /owned").await;
    assert_eq!(owner, "65532\n", "the writable root belongs to 65532");

    let (_, env, _) = sh(&client, "shaped", "echo \"$SECRET_TOKEN|$GREETING\"").await;
    assert_eq!(env, "s3cr3t-value|hello world\n");
    assert!(
        !daemon.log_text().contains("s3cr3t-value"),
        "env values must not be logged"
    );
    assert_eq!(
        sh(&client, "shaped", "cat /tmp/marker").await.1,
        "prepared\n",
        "before_script ran before Ready"
    );

    let (_, quota, _) = sh(
        &client,
        "shaped",
        "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us",
    )
    .await;
    assert_eq!(quota, "25000\n100000\n");
    let (_, limit, _) = sh(
        &client,
        "shaped",
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes",
    )
    .await;
    assert_eq!(limit.trim(), (48u64 << 20).to_string());
    let (code, _, _) = sh(
        &client,
        "shaped",
        "dd if=/dev/zero of=/dev/null bs=128M count=1",
    )
    .await;
    assert_eq!(code, 137, "allocating past the memory limit is OOM-killed");

    // Root by default, with no capabilities at all.
    create_ready(&client, request("plain")).await;
    let (_, out, _) = sh(
        &client,
        "plain",
        "id -u; grep CapEff /proc/self/status; chown 65532 /tmp 2>&1; echo $?",
    )
    .await;
    assert!(out.starts_with("0\nCapEff:\t0000000000000000\n"), "{out}");
    assert!(
        out.trim_end().ends_with('1'),
        "chown needs CAP_CHOWN: {out}"
    );

    // cap_drop without ALL subtracts from the runtime's default set.
    let mut req = request("dropper");
    req.cap_drop = Some(vec!["NET_RAW".into()]);
    create_ready(&client, req).await;
    let (_, caps, _) = sh(&client, "dropper", "grep CapEff /proc/self/status").await;
    let mask = u64::from_str_radix(caps.trim().trim_start_matches("CapEff:").trim(), 16).unwrap();
    assert_eq!(mask & (1 << 13), 0, "NET_RAW dropped: {caps}");
    assert_ne!(mask & 1, 0, "CHOWN kept from the default set: {caps}");

    // container_non_root: uid 65532, group unchanged.
    let mut req = request("cnr");
    req.container_non_root = true;
    create_ready(&client, req).await;
    assert_eq!(sh(&client, "cnr", "id -u; id -g").await.1, "65532\n0\n");

    // A failing before_script fails the sandbox with its reason.
    let mut req = request("broken");
    req.before_script = Some("echo nope >&2; exit 4".into());
    client.create_sandbox(&req).await.unwrap();
    let s = wait_settled(&client, "broken", "default").await;
    assert_eq!(
        (s.status, s.ready.as_str()),
        (SandboxStatus::Failed, "False")
    );
    assert!(
        s.error_message.contains("code 4") && s.error_message.contains("nope"),
        "{}",
        s.error_message
    );

    let ids = sandbox_ids(&daemon);
    let deleted = client.delete_all_sandboxes("default").await.unwrap();
    assert_eq!(deleted.results.len(), 5);
    assert!(
        deleted
            .results
            .iter()
            .all(|r| r.success && r.error.is_none()),
        "{deleted:?}"
    );
    assert!(
        client
            .list_sandboxes(Some("default"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_no_leftovers(&daemon, &ids);
}

#[tokio::test]
async fn ephemeral_storage_over_the_limit_is_evicted() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "[runtime]\nevictionCheckSeconds = 1\n");
    let client = daemon.admin();
    let mut req = request("filler");
    req.limits = Some(ResourceLimits {
        ephemeral_storage: Some("8Mi".into()),
        ..Default::default()
    });
    create_ready(&client, req).await;
    let (code, _, _) = sh(&client, "filler", "dd if=/dev/zero of=/big bs=1M count=4").await;
    assert_eq!(code, 0);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let s = client.get_sandbox("filler", "default").await.unwrap();
    assert_eq!(
        s.status,
        SandboxStatus::Running,
        "under the limit it keeps running"
    );
    sh(
        &client,
        "filler",
        "dd if=/dev/zero of=/bigger bs=1M count=16",
    )
    .await;
    let started = Instant::now();
    let s = loop {
        let s = client.get_sandbox("filler", "default").await.unwrap();
        if s.status == SandboxStatus::Failed || started.elapsed() > Duration::from_secs(30) {
            break s;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(s.status, SandboxStatus::Failed, "{s:?}");
    assert!(
        s.error_message.contains("evicted") && s.error_message.contains("ephemeral-storage"),
        "{}",
        s.error_message
    );
    let ids = sandbox_ids(&daemon);
    client.delete_sandbox("filler", "default").await.unwrap();
    assert_no_leftovers(&daemon, &ids);
}

#[tokio::test]
async fn egress_allow_lists_are_enforced() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let client = daemon.admin();
    // busybox-static's wget crashes even on literal addresses; nc speaks plain HTTP.
    let fetch = |addr: &str| {
        format!(
            "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 {addr} {SERVER_PORT} 2>&1; echo rc=$?"
        )
    };

    create_ready(&client, request("open")).await;
    let mut req = request("allow");
    req.egress_whitelist = Some(vec!["198.51.100.0/24".into()]);
    create_ready(&client, req).await;
    let mut req = request("closed");
    req.egress_whitelist = Some(vec![]);
    create_ready(&client, req).await;

    let (_, out, _) = sh(&client, "open", &fetch(ALLOWED_ADDR)).await;
    assert!(
        out.contains("hello-from-ext") && out.contains("rc=0"),
        "{out}"
    );
    let (_, out, _) = sh(&client, "open", &fetch(DENIED_ADDR)).await;
    assert!(
        out.contains("hello-from-ext"),
        "unrestricted reaches everything: {out}"
    );

    let (_, out, _) = sh(&client, "allow", &fetch(ALLOWED_ADDR)).await;
    assert!(out.contains("hello-from-ext"), "{out}");
    let (_, out, _) = sh(&client, "allow", &fetch(DENIED_ADDR)).await;
    assert!(
        !out.contains("hello-from-ext") && !out.contains("rc=0"),
        "{out}"
    );
    // Refused at once by the allow-list, not silently dropped until nc's timeout.
    assert!(out.contains("refused"), "denied traffic is refused: {out}");

    for addr in [ALLOWED_ADDR, DENIED_ADDR] {
        let (_, out, _) = sh(&client, "closed", &fetch(addr)).await;
        assert!(!out.contains("hello-from-ext"), "[] allows nothing: {out}");
    }
    let ids = sandbox_ids(&daemon);
    client.delete_all_sandboxes("default").await.unwrap();
    assert_no_leftovers(&daemon, &ids);
}

#[tokio::test]
async fn every_error_status_of_the_sandbox_routes() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let client = daemon.admin();
    let token = daemon.admin_token();
    let post = |path: &str, body: Value| {
        let http = daemon.http();
        let url = format!("{}{path}", daemon.url);
        let token = token.clone();
        async move {
            let r = http
                .post(url)
                .header("X-API-Key", token)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let image = sbxd::busybox();
    let cases = [
        (json!({"image": image}), "`name`"),
        (json!({"name": "x"}), "`image`"),
        (
            json!({"name": "x", "image": "/bad//ref"}),
            "image reference",
        ),
        (
            json!({"name": "Bad_Name", "image": image}),
            "not a valid name",
        ),
        (
            json!({"name": "x", "image": image, "namespace": "NS!"}),
            "namespace",
        ),
        (
            json!({"name": "x", "image": image, "limits": {"cpu": "lots"}}),
            "invalid limits",
        ),
        (
            json!({"name": "x", "image": image, "limits": {"gpu": "1"}}),
            "gpu",
        ),
        (
            json!({"name": "x", "image": image, "limits": {"memory": "1Ki"}}),
            "memory",
        ),
        (
            json!({"name": "x", "image": image, "env_file": "/nonexistent/app.env"}),
            "bad env file",
        ),
        (
            json!({"name": "x", "image": image, "egress_whitelist": ["example.com"]}),
            "egress_whitelist",
        ),
        (
            json!({"name": "x", "image": image, "cap_add": ["FLY"]}),
            "FLY",
        ),
        (
            json!({"name": "x", "image": image, "backend": "kata-qemu-longhorn"}),
            "backend",
        ),
    ];
    for (body, needle) in cases {
        let (status, response) = post("/api/v1/sandboxes", body.clone()).await;
        assert_eq!(status, 400, "{body} -> {response}");
        assert_eq!(response["error"]["code"], "BadRequest");
        assert!(
            response["error"]["message"]
                .as_str()
                .unwrap()
                .contains(needle),
            "{needle}: {response}"
        );
    }
    let (status, _) = post("/api/v1/sandboxes", json!({"name": "x", "image": 5})).await;
    assert_eq!(status, 422);

    // A tenant role's key cannot make the service read a file on its host: 403 before any
    // read (the file exists and would parse; the answer names no key of it).
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), "HOST_SECRET_KEY=value\n").unwrap();
    let user = common::key(&client, "env-user", "user", None).await;
    let response = daemon
        .http()
        .post(format!("{}/api/v1/sandboxes", daemon.url))
        .header("X-API-Key", &user)
        .json(&json!({"name": "peek", "image": image, "env_file": secret.path()}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    let body: Value = response.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("env_file") && !message.contains("HOST_SECRET_KEY"),
        "{message}"
    );

    create_ready(&client, request("taken")).await;
    let (status, response) = post(
        "/api/v1/sandboxes",
        json!({"name": "taken", "image": image}),
    )
    .await;
    assert_eq!(status, 400, "an existing name is 400: {response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already exists")
    );

    let (status, response) = post("/api/v1/sandboxes/taken/exec", json!({})).await;
    assert_eq!(
        (status, response["error"]["code"].as_str()),
        (400, Some("BadRequest"))
    );
    let (status, _) = post(
        "/api/v1/sandboxes/taken/exec",
        json!({"command": "true", "timeout_seconds": 0}),
    )
    .await;
    assert_eq!(status, 400);
    let (status, _) = post("/api/v1/sandboxes/ghost/exec", json!({"command": "true"})).await;
    assert_eq!(status, 404);
    for action in ["pause", "resume"] {
        let (status, _) = post(&format!("/api/v1/sandboxes/ghost/{action}"), json!({})).await;
        assert_eq!(status, 404, "{action}");
    }
    let (status, code) = api_status(client.delete_sandbox("ghost", "default").await);
    assert_eq!((status, code.as_str()), (404, "NotFound"));

    // An image the registry does not have: the sandbox fails with the reason.
    let mut req = request("noimage");
    req.image = Some(format!("{}/sbx-test/absent:latest", sbxd::registry()));
    client.create_sandbox(&req).await.unwrap();
    let s = wait_settled(&client, "noimage", "default").await;
    assert_eq!(s.status, SandboxStatus::Failed);
    assert!(s.error_message.contains("absent"), "{}", s.error_message);
    let (status, code) = api_status(
        client
            .exec_sandbox(
                "noimage",
                "default",
                &ExecRequest {
                    command: Some("true".into()),
                    timeout_seconds: None,
                },
            )
            .await,
    );
    assert_eq!((status, code.as_str()), (409, "Conflict"));

    let ids = sandbox_ids(&daemon);
    client.delete_all_sandboxes("default").await.unwrap();
    assert_no_leftovers(&daemon, &ids);
}

#[tokio::test]
async fn sandboxes_survive_a_daemon_restart_and_dead_ones_are_reported() {
    let net = TestNet::new();
    let (_dir, config) = sbxd::config_file(&net);
    let args = ["--config", config.as_str()];
    let daemon = Daemon::start_with(&args);
    let client = daemon.admin();
    create_ready(&client, request("keeper")).await;
    create_ready(&client, request("victim")).await;
    // A lifetime is kept across the restart, and enforced by the restarted daemon.
    let timed = CreateSandboxRequest {
        ttl_seconds: Some(10),
        idle_timeout_seconds: Some(600),
        ..request("timed")
    };
    let timed = create_ready(&client, timed).await;
    assert!(timed.expires_at.is_some(), "{timed:?}");
    sh(&client, "keeper", "echo before-restart > /proc/1/fd/1").await;
    let keeper_pid = sh(&client, "keeper", "cat /proc/1/stat | cut -d' ' -f1")
        .await
        .1;
    assert_eq!(keeper_pid.trim(), "1");

    let mut daemon = daemon;
    assert!(daemon.stop());
    // While the daemon is down, kill the victim's main process from the host.
    let runtime_root = daemon.data_dir.join("runtime").join("runc");
    let ids = sandbox_ids(&daemon);
    let mut killed = false;
    for id in &ids {
        let spec = std::fs::read_to_string(
            daemon
                .data_dir
                .join("sandboxes")
                .join(id)
                .join("etc/hostname"),
        )
        .unwrap_or_default();
        if spec.trim() == "victim" {
            let out = std::process::Command::new("runc")
                .arg("--root")
                .arg(&runtime_root)
                .args(["state", id])
                .output()
                .unwrap();
            let state: Value = serde_json::from_slice(&out.stdout).unwrap();
            let pid = state["pid"].as_i64().unwrap();
            std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()
                .unwrap();
            killed = true;
        }
    }
    assert!(killed);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let daemon = daemon.restart(&args);
    let client = daemon.admin();
    let after = client.get_sandbox("timed", "default").await.unwrap();
    assert_eq!(
        (&after.expires_at, after.idle_timeout_seconds),
        (&timed.expires_at, Some(600))
    );
    let keeper = client.get_sandbox("keeper", "default").await.unwrap();
    assert_eq!(
        (keeper.status, keeper.ready.as_str()),
        (SandboxStatus::Running, "True")
    );
    assert_eq!(
        sh(&client, "keeper", "echo still-here").await.1,
        "still-here\n"
    );
    let logs = client
        .sandbox_logs(
            "keeper",
            &LogsQuery {
                namespace: None,
                container: "sandbox".into(),
                tail: 10,
                since: 0,
                follow: false,
            },
        )
        .await
        .unwrap();
    assert!(logs.logs.contains("before-restart"));
    let victim = client.get_sandbox("victim", "default").await.unwrap();
    assert_eq!(victim.status, SandboxStatus::Failed);
    assert!(
        victim.error_message.contains("137") && victim.error_message.contains("not running"),
        "{}",
        victim.error_message
    );
    let started = Instant::now();
    while client.get_sandbox("timed", "default").await.is_ok() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the restarted daemon kept a sandbox past its TTL"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    client.delete_all_sandboxes("default").await.unwrap();
    assert_no_leftovers(&daemon, &ids);
}

#[tokio::test]
async fn a_create_interrupted_by_a_crash_is_finished_after_restart() {
    let net = TestNet::new();
    let (_dir, config) = sbxd::config_file(&net);
    let args = ["--config", config.as_str()];
    let mut daemon = Daemon::start_with(&args);
    let client = daemon.admin();
    // Whatever point the create had reached, a crash must not leave a half-made sandbox.
    client.create_sandbox(&request("crashy")).await.unwrap();
    daemon.kill9();
    let daemon = daemon.restart(&args);
    let client = daemon.admin();
    let s = wait_settled(&client, "crashy", "default").await;
    assert_eq!(
        (s.status, s.ready.as_str()),
        (SandboxStatus::Running, "True"),
        "{s:?}"
    );
    assert_eq!(sh(&client, "crashy", "hostname").await.1, "crashy\n");
    let ids = sandbox_ids(&daemon);
    assert_eq!(ids.len(), 1);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert_eq!(
        mounts.matches(&format!("{}/bundle/rootfs", ids[0])).count(),
        1,
        "one root mount"
    );
    client.delete_sandbox("crashy", "default").await.unwrap();
    assert_no_leftovers(&daemon, &ids);
}

#[tokio::test]
async fn twenty_concurrent_creates_and_deletes_leak_nothing() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let client = daemon.admin();
    let names: Vec<String> = (0..20).map(|i| format!("burst-{i}")).collect();
    let creates = names.iter().map(|n| {
        let client = client.clone();
        let n = n.clone();
        async move { create_ready(&client, request(&n)).await }
    });
    futures_util::future::join_all(creates).await;
    assert_eq!(
        client.list_sandboxes(Some("default")).await.unwrap().len(),
        20
    );
    let ids = sandbox_ids(&daemon);
    assert_eq!(ids.len(), 20);
    let execs = names.iter().map(|n| {
        let client = client.clone();
        let n = n.clone();
        async move { sh(&client, &n, "hostname").await.1 }
    });
    let hostnames = futures_util::future::join_all(execs).await;
    assert_eq!(
        hostnames,
        names.iter().map(|n| format!("{n}\n")).collect::<Vec<_>>()
    );
    let deletes = names.iter().map(|n| {
        let client = client.clone();
        let n = n.clone();
        async move { client.delete_sandbox(&n, "default").await.unwrap() }
    });
    futures_util::future::join_all(deletes).await;
    assert!(client.list_sandboxes(None).await.unwrap().is_empty());
    assert_no_leftovers(&daemon, &ids);
}

#[test]
fn the_cli_creates_execs_lists_and_deletes() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let config = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        cli(config.path())
            .args(["--server", &daemon.url, "--api-key", &daemon.admin_token()])
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&[
        "sandbox",
        "create",
        "demo",
        "--image",
        &sbxd::busybox(),
        "--limit",
        "cpu=500m,memory=128Mi",
        "--egress",
        "198.51.100.0/24",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Running"));
    let out = run(&["sandbox", "exec", "demo", "--", "uname", "-s"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Linux\n");
    let out = run(&[
        "sandbox",
        "exec",
        "demo",
        "--",
        "sh",
        "-c",
        "echo to-err >&2; exit 7",
    ]);
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "to-err\n");
    let out = run(&["sandbox", "exec", "demo", "--", "echo", "a b", "$HOME"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "a b $HOME\n",
        "arguments reach the shell intact"
    );
    let out = run(&["sandbox", "list"]);
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        table.starts_with("NAMESPACE") && table.contains("demo") && table.contains("True"),
        "{table}"
    );
    let out = run(&["sandbox", "list", "-o", "json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list[0]["name"], "demo");
    let out = run(&["sandbox", "pause", "demo"]);
    assert!(out.status.success());
    let out = run(&["sandbox", "get", "demo", "-o", "json"]);
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["status"],
        "Paused"
    );
    assert!(run(&["sandbox", "resume", "demo"]).status.success());
    let out = run(&["sandbox", "metrics"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("demo"));
    let out = run(&["sandbox", "logs", "demo", "--tail", "5", "--since", "10m"]);
    assert!(out.status.success());
    let out = run(&["sandbox", "get", "ghost"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("(NotFound)"));
    let out = run(&["sandbox", "delete-all", "--yes"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("deleted demo"));
}

/// Waits (up to 60 s) until the daemon's pool holds `count` prepared containers, all of them
/// made (their marker has the container's pid); their ids.
fn wait_prepared(daemon: &Daemon, count: usize) -> Vec<String> {
    let started = Instant::now();
    let made = |id: &String| {
        let marker = daemon.data_dir.join("sandboxes").join(id).join("pool.json");
        std::fs::read(marker)
            .ok()
            .and_then(|m| serde_json::from_slice::<Value>(&m).ok())
            .is_some_and(|m| m["pid"].as_i64().unwrap_or(0) > 0)
    };
    loop {
        let mut ids = sbxd::prepared_ids(&daemon.data_dir);
        if ids.len() == count && ids.iter().all(made) {
            ids.sort();
            return ids;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the pool never held {count} prepared containers: {ids:?}\n{}",
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pool's claim counters on `/metrics`: (hits, misses).
async fn pool_claims(daemon: &Daemon) -> (u64, u64) {
    let text = daemon.scrape(&daemon.admin_token()).await;
    let count = |outcome: &str| {
        let series = format!("sbx_pool_claims_total{{outcome=\"{outcome}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&series))
            .map_or(0, |v| v.trim().parse().unwrap())
    };
    (count("hit"), count("miss"))
}

/// Sandboxes prepared ahead of requests (issue 18): a create of a shape asked for before
/// gets a container the pool created beforehand, which is used once and carries nothing of
/// another sandbox: not its files, name, address or egress rules. The pool survives a
/// restart (its containers are taken over, not remade), is counted on `/metrics`, and is
/// removed when turned off.
#[tokio::test]
async fn prepared_sandboxes_are_used_once_and_carry_nothing_of_another() {
    let net = TestNet::new();
    let (_config_dir, config) = sbxd::config_file(&net);
    std::fs::write(
        &config,
        std::fs::read_to_string(&config).unwrap() + "\n[runtime.pool]\nsize = 1\n",
    )
    .unwrap();
    let daemon = Daemon::start_with(&["--config", &config]);
    let client = daemon.admin();
    let fetch = |addr: &str| {
        format!(
            "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 {addr} {SERVER_PORT} 2>&1; echo rc=$?"
        )
    };

    // The first create of a shape finds nothing prepared; the pool then prepares one.
    let mut req = request("first");
    req.egress_whitelist = Some(vec![]);
    create_ready(&client, req).await;
    assert_eq!(pool_claims(&daemon).await, (0, 1));
    let prepared = wait_prepared(&daemon, 1);
    let (_, out, _) = sh(&client, "first", "echo mine > /secret; hostname").await;
    assert_eq!(out.trim(), "first");
    let (_, out, _) = sh(&client, "first", &fetch(ALLOWED_ADDR)).await;
    assert!(!out.contains("hello-from-ext"), "[] allows nothing: {out}");
    client.delete_sandbox("first", "default").await.unwrap();

    // The next create of that shape (egress is not part of it) starts the prepared one.
    let second = create_ready(&client, request("second")).await;
    assert_eq!(pool_claims(&daemon).await, (1, 1));
    assert_eq!(
        sandbox_ids(&daemon),
        prepared,
        "the prepared container is the sandbox"
    );
    let (code, out, _) = sh(
        &client,
        "second",
        "hostname; cat /etc/hostname /etc/hosts; ls /secret 2>&1; ip -4 -o addr show eth0",
    )
    .await;
    assert_eq!(code, 0, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[..2], ["second", "second"], "{out}");
    let address = lines
        .iter()
        .find(|l| l.contains("eth0"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|a| a.split('/').next())
        .unwrap_or_else(|| panic!("no eth0 address: {out}"));
    assert!(
        out.contains(&format!("{address}\tsecond")),
        "/etc/hosts names its own address: {out}"
    );
    assert!(
        !out.contains("first"),
        "nothing of the first sandbox: {out}"
    );
    assert!(out.contains("No such file"), "{out}");
    let (_, out, _) = sh(&client, "second", &fetch(ALLOWED_ADDR)).await;
    assert!(
        out.contains("hello-from-ext") && out.contains("rc=0"),
        "no rule of the first sandbox applies: {out}"
    );
    assert_eq!(second.status, SandboxStatus::Running);
    // Another shape (a different command) is not served by it.
    let refill = wait_prepared(&daemon, 1);
    let mut other = request("other");
    other.cmd = Some(vec!["sleep".into(), "3600".into()]);
    create_ready(&client, other).await;
    assert_eq!(pool_claims(&daemon).await, (1, 2));
    assert!(!sandbox_ids(&daemon).contains(&refill[0]));

    // A restart takes the prepared containers over, the next claims hit them.
    let prepared = wait_prepared(&daemon, 2);
    let daemon = daemon.restart(&["--config", &config]);
    let client = daemon.admin();
    assert_eq!(sbxd::prepared_ids(&daemon.data_dir).len(), 2);
    create_ready(&client, request("third")).await;
    assert_eq!(pool_claims(&daemon).await, (1, 0));
    let ids = sandbox_ids(&daemon);
    assert!(
        prepared.iter().any(|p| ids.contains(p)),
        "{prepared:?} {ids:?}"
    );

    // Turned off, the pool's containers are removed; the sandboxes stay.
    std::fs::write(
        &config,
        std::fs::read_to_string(&config)
            .unwrap()
            .replace("size = 1", "size = 0"),
    )
    .unwrap();
    let daemon = daemon.restart(&["--config", &config]);
    let client = daemon.admin();
    assert!(sbxd::prepared_ids(&daemon.data_dir).is_empty());
    assert_eq!(
        client.list_sandboxes(Some("default")).await.unwrap().len(),
        3
    );
    let ids = sandbox_ids(&daemon);
    client.delete_all_sandboxes("default").await.unwrap();
    assert_no_leftovers(&daemon, &ids);
    // (Cgroups are checked per id: other tests' sandboxes run meanwhile.)
    let left: Vec<String> = sbxd::leftovers(&daemon, None)
        .into_iter()
        .filter(|l| l.starts_with("mount ") || l.starts_with("dir "))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
