//! Snapshots, fork, restore and GC on the embedded default, with real sandboxes (the real
//! `sbx serve`, runc, overlayfs) and images from the loopback registry. Needs root.
mod common;

use std::time::{Duration, Instant};

use common::sbxd::{self, TestNet};
use common::{Daemon, cli};
use sbx::cli::client::{ApiClient, ClientError};
use sbx::shared::models::sandbox::{
    CreateSandboxRequest, CreateSnapshotRequest, ExecRequest, ForkRequest, PauseRequest,
    SandboxStatus,
};
use sbx::shared::models::snapshot::{GcRequest, RestoreRequest, SnapshotKind, SnapshotListQuery};
use serde_json::{Value, json};

fn request(name: &str) -> CreateSandboxRequest {
    CreateSandboxRequest {
        name: Some(name.into()),
        image: Some(sbxd::busybox()),
        ..Default::default()
    }
}

async fn sh(client: &ApiClient, name: &str, command: &str) -> String {
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
    r.stdout
}

fn status<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (u16, String) {
    match r {
        Err(ClientError::Api(e)) => (e.status, e.code),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn snapshot_layers(daemon: &Daemon) -> usize {
    std::fs::read_dir(daemon.data_dir.join("snapshot-layers"))
        .map(|d| d.flatten().count())
        .unwrap_or(0)
}

fn list_query(kind: Option<&str>) -> SnapshotListQuery {
    SnapshotListQuery {
        kind: kind.map(str::to_string),
        ..Default::default()
    }
}

#[tokio::test]
async fn snapshot_restore_and_fork_keep_exactly_the_files_of_their_moment() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let client = daemon.admin();
    client.create_sandbox(&request("src")).await.unwrap();
    sbxd::running(&client, "src", "default").await;
    sh(
        &client,
        "src",
        "echo before > /data.txt; mkdir -p /d && echo gone > /d/removed",
    )
    .await;

    // A named snapshot of a running sandbox: 201 + Location; the sandbox keeps running.
    let http = daemon.http();
    let response = http
        .post(format!("{}/api/v1/sandboxes/src/snapshot", daemon.url))
        .header("X-API-Key", daemon.admin_token())
        .json(&json!({"snapshot_name": "snap1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    assert_eq!(
        response.headers()["location"],
        "/api/v1/snapshots/snap1?namespace=default"
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["data"],
        json!({"name": "snap1", "namespace": "default", "source_sandbox": "src"})
    );
    assert_eq!(
        client.get_sandbox("src", "default").await.unwrap().status,
        SandboxStatus::Running
    );
    let snap = client.get_snapshot("snap1", "default").await.unwrap();
    assert_eq!(
        (snap.kind, snap.ready_to_use, snap.source_sandbox.as_str()),
        (SnapshotKind::Named, true, "src")
    );
    assert!(snap.size_bytes > 0 && snap.creation_timestamp.ends_with('Z'));

    // Changes after the snapshot, including a deletion (an overlay whiteout).
    sh(
        &client,
        "src",
        "echo after > /data.txt; echo more > /more.txt; rm /d/removed",
    )
    .await;

    let restored = client
        .restore_snapshot(
            "snap1",
            &RestoreRequest {
                new_sandbox_name: Some("restored".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (restored.name.as_str(), restored.source_snapshot.as_str()),
        ("restored", "snap1")
    );
    sbxd::running(&client, "restored", "default").await;
    assert_eq!(
        sh(
            &client,
            "restored",
            "cat /data.txt /d/removed; ls /more.txt 2>&1"
        )
        .await,
        "before\ngone\nls: /more.txt: No such file or directory\n"
    );

    // Fork: the clone has the source's files of now; neither side sees the other's writes.
    let forked = client
        .fork_sandbox(
            "src",
            &ForkRequest {
                new_name: Some("clone".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (forked.name.as_str(), forked.source.as_str()),
        ("clone", "src")
    );
    let clone = client.get_sandbox("clone", "default").await.unwrap();
    assert_eq!(
        clone.status,
        SandboxStatus::Running,
        "fork returns once the clone runs"
    );
    sbxd::running(&client, "clone", "default").await;
    assert_eq!(
        sh(
            &client,
            "clone",
            "cat /data.txt /more.txt; ls /d/removed 2>&1"
        )
        .await,
        "after\nmore\nls: /d/removed: No such file or directory\n"
    );
    sh(&client, "clone", "echo clone > /clone-only").await;
    sh(&client, "src", "echo src > /src-only").await;
    assert_eq!(
        sh(&client, "src", "ls /clone-only 2>&1").await,
        "ls: /clone-only: No such file or directory\n"
    );
    assert_eq!(
        sh(&client, "clone", "ls /src-only 2>&1").await,
        "ls: /src-only: No such file or directory\n"
    );
    // The fork snapshot was deleted inline; with `snapshot` it is kept as named.
    assert!(
        client
            .list_snapshots(&list_query(Some("fork")))
            .await
            .unwrap()
            .is_empty()
    );
    client
        .fork_sandbox(
            "src",
            &ForkRequest {
                new_name: Some("clone2".into()),
                snapshot: Some("at-fork".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        client
            .get_snapshot("at-fork", "default")
            .await
            .unwrap()
            .kind,
        SnapshotKind::Named
    );

    // A fork of a fork (layers stacked twice) sees everything.
    client
        .fork_sandbox(
            "clone",
            &ForkRequest {
                new_name: Some("grandchild".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        sh(&client, "grandchild", "cat /data.txt /clone-only").await,
        "after\nclone\n"
    );

    // Restore works after the source sandbox is gone; keep_snapshot false deletes it when Ready.
    client.delete_sandbox("src", "default").await.unwrap();
    client
        .restore_snapshot(
            "snap1",
            &RestoreRequest {
                new_sandbox_name: Some("again".into()),
                keep_snapshot: Some(false),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    sbxd::running(&client, "again", "default").await;
    assert_eq!(sh(&client, "again", "cat /data.txt").await, "before\n");
    let started = Instant::now();
    while client.get_snapshot("snap1", "default").await.is_ok() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "snapshot not deleted after restore"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Everything deleted: no snapshot layer is left behind.
    assert!(snapshot_layers(&daemon) > 0);
    client.delete_all_sandboxes("default").await.unwrap();
    for s in client.list_snapshots(&list_query(None)).await.unwrap() {
        client.delete_snapshot(&s.name, "default").await.unwrap();
    }
    assert_eq!(snapshot_layers(&daemon), 0, "layers leaked");
}

#[tokio::test]
async fn pause_snapshots_listing_gc_and_every_error_status() {
    let net = TestNet::new();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sbx.toml");
    sbxd::write_config(&config, &net, "");
    let args = ["--config", config.to_str().unwrap()];
    let daemon = Daemon::start_with(&args);
    let client = daemon.admin();
    client.create_sandbox(&request("one")).await.unwrap();
    client.create_sandbox(&request("two")).await.unwrap();
    sbxd::running(&client, "one", "default").await;
    sbxd::running(&client, "two", "default").await;

    client
        .pause_sandbox(
            "one",
            &PauseRequest {
                namespace: None,
                snapshot: Some("one-paused".into()),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        client.get_sandbox("one", "default").await.unwrap().status,
        SandboxStatus::Paused
    );
    client
        .snapshot_sandbox(
            "two",
            &CreateSnapshotRequest {
                snapshot_name: Some("two-named".into()),
                namespace: None,
            },
        )
        .await
        .unwrap();
    let all = client.list_snapshots(&list_query(None)).await.unwrap();
    assert_eq!(all.len(), 2);
    let pauses = client
        .list_snapshots(&list_query(Some("pause")))
        .await
        .unwrap();
    assert_eq!(
        pauses.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["one-paused"]
    );
    let of_two = client
        .list_snapshots(&SnapshotListQuery {
            sandbox: Some("two".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(of_two.len(), 1);
    assert!(
        client
            .list_snapshots(&SnapshotListQuery {
                namespace: Some("other".into()),
                ..Default::default()
            })
            .await
            .unwrap()
            .is_empty()
    );

    // Errors.
    let token = daemon.admin_token();
    let post = |path: String, body: Value| {
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
            let code = r.status().as_u16();
            (code, r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    for (path, body, want) in [
        ("/api/v1/sandboxes/two/snapshot", json!({}), 400),
        (
            "/api/v1/sandboxes/two/snapshot",
            json!({"snapshot_name": "Bad Name"}),
            400,
        ),
        (
            "/api/v1/sandboxes/two/snapshot",
            json!({"snapshot_name": "two-named"}),
            409,
        ),
        (
            "/api/v1/sandboxes/ghost/snapshot",
            json!({"snapshot_name": "x"}),
            404,
        ),
        ("/api/v1/sandboxes/two/fork", json!({}), 400),
        (
            "/api/v1/sandboxes/ghost/fork",
            json!({"new_name": "x"}),
            404,
        ),
        (
            "/api/v1/sandboxes/two/fork",
            json!({"new_name": "one"}),
            409,
        ),
        (
            "/api/v1/sandboxes/one/pause",
            json!({"snapshot": "two-named"}),
            409,
        ),
        ("/api/v1/snapshots/two-named/restore", json!({}), 400),
        (
            "/api/v1/snapshots/ghost/restore",
            json!({"new_sandbox_name": "x"}),
            404,
        ),
        (
            "/api/v1/snapshots/two-named/restore",
            json!({"new_sandbox_name": "one"}),
            409,
        ),
        (
            "/api/v1/snapshots/two-named/restore",
            json!({"new_sandbox_name": "x", "overrides": {"docker": true}}),
            400,
        ),
        (
            "/api/v1/snapshots/two-named/restore",
            json!({"new_sandbox_name": "x", "overrides": {"backend": "kata-qemu-longhorn"}}),
            400,
        ),
        (
            "/api/v1/snapshots/two-named/restore",
            json!({"new_sandbox_name": "x", "overrides": {"limits": {"cpu": "many"}}}),
            400,
        ),
        (
            "/api/v1/snapshots/gc",
            json!({"keep_fork_for": "soon"}),
            400,
        ),
        (
            "/api/v1/snapshots/two-named/restore",
            json!({"new_sandbox_name": "x", "overrides": {"image": "Bad//Ref"}}),
            400,
        ),
    ] {
        let (code, response) = post(path.to_string(), body.clone()).await;
        assert_eq!(code, want, "{path} {body} -> {response}");
        assert!(
            response["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{response}"
        );
    }
    let (code, _) = status(client.get_snapshot("ghost", "default").await);
    assert_eq!(code, 404);
    let (code, _) = status(client.delete_snapshot("ghost", "default").await);
    assert_eq!(code, 404);
    let (code, _) = status(client.list_snapshots(&list_query(Some("other"))).await);
    assert_eq!(code, 400);

    // A fork snapshot a crash mid-fork left (here a fork's own snapshot lives only while the
    // fork runs) is gone when the daemon starts again; pause and named ones stay, and the GC
    // then has nothing to sweep.
    let mut daemon = daemon;
    assert!(daemon.stop());
    let conn = rusqlite::Connection::open(daemon.data_dir.join("sbx.db")).unwrap();
    conn.execute(
        "INSERT INTO snapshots (id, namespace, name, kind, source_sandbox, created, size_bytes, source) \
         SELECT 'oldfork', namespace, 'two-fork-1', 'fork', source_sandbox, 1000, size_bytes, source \
         FROM snapshots WHERE name = 'two-named'",
        [],
    )
    .unwrap();
    drop(conn);
    let daemon = daemon.restart(&args);
    let client = daemon.admin();
    let gc = |dry_run: bool| GcRequest {
        dry_run,
        keep_fork_for: Some(sbx::shared::duration::DurationValue::Seconds(0)),
        ..Default::default()
    };
    for dry_run in [true, false] {
        let swept = client.gc_snapshots(&gc(dry_run)).await.unwrap();
        assert!(swept.results.is_empty(), "{swept:?}");
    }
    let left: Vec<String> = client
        .list_snapshots(&list_query(None))
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(left, ["one-paused", "two-named"]);

    client.delete_all_sandboxes("default").await.unwrap();
    for name in left {
        client.delete_snapshot(&name, "default").await.unwrap();
    }
    assert_eq!(snapshot_layers(&daemon), 0, "layers leaked");
}

#[tokio::test]
async fn long_layer_stacks_are_flattened_without_changing_the_files() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let client = daemon.admin();
    client.create_sandbox(&request("g0")).await.unwrap();
    sbxd::running(&client, "g0", "default").await;
    sh(&client, "g0", "echo 0 > /gen0; echo image-file > /doomed").await;
    // Ten generations, each a fork of the last that writes a file and deletes one.
    for g in 1..=10 {
        let (parent, child) = (format!("g{}", g - 1), format!("g{g}"));
        client
            .fork_sandbox(
                &parent,
                &ForkRequest {
                    new_name: Some(child.clone()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        sh(
            &client,
            &child,
            &format!("echo {g} > /gen{g}; rm -f /gen{}", g - 2),
        )
        .await;
        if g == 5 {
            sh(&client, &child, "rm /doomed").await;
        }
    }
    client
        .snapshot_sandbox(
            "g10",
            &CreateSnapshotRequest {
                snapshot_name: Some("deep".into()),
                namespace: None,
            },
        )
        .await
        .unwrap();
    let started = Instant::now();
    while !daemon.log_text().contains("snapshot layers flattened") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never flattened"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client
        .restore_snapshot(
            "deep",
            &RestoreRequest {
                new_sandbox_name: Some("flat".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    sbxd::running(&client, "flat", "default").await;
    let want = sh(&client, "g10", "ls / | grep -E '^(gen|doomed)' | sort").await;
    assert_eq!(want, "gen10\ngen9\n");
    assert_eq!(
        sh(&client, "flat", "ls / | grep -E '^(gen|doomed)' | sort").await,
        want
    );
    assert_eq!(sh(&client, "flat", "cat /gen9 /gen10").await, "9\n10\n");

    client.delete_all_sandboxes("default").await.unwrap();
    client.delete_snapshot("deep", "default").await.unwrap();
    assert_eq!(snapshot_layers(&daemon), 0, "layers leaked");
}

/// The counter line a sandbox's background counter writes: (token, count).
async fn counter(client: &ApiClient, name: &str) -> (String, u64) {
    let started = Instant::now();
    loop {
        let line = sh(client, name, "cat /tmp/counter 2>/dev/null").await;
        let mut words = line.split_whitespace();
        if let (Some(token), Some(Ok(n))) = (words.next(), words.next().map(str::parse)) {
            return (token.to_string(), n);
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{name}: no counter"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Also on a host without iptables: CRIU locks the sandbox's network with nftables.
#[tokio::test]
async fn warm_fork_continues_the_running_processes_from_their_memory() {
    let net = TestNet::new();
    let (_no_iptables, path) = sbxd::path_without_iptables();
    let daemon = sbxd::daemon_with_env(&net, "", &[("PATH", path.as_str())]);
    let client = daemon.admin();
    client.create_sandbox(&request("src")).await.unwrap();
    sbxd::running(&client, "src", "default").await;
    // A process whose state lives only in its memory: a random token and a count, written
    // out on every tick.
    sh(
        &client,
        "src",
        "setsid sh -c 'tok=$RANDOM$RANDOM; i=0; while :; do i=$((i+1)); \
         echo \"$tok $i\" > /tmp/counter; sleep 0.05; done' </dev/null >/dev/null 2>&1 &",
    )
    .await;
    let (token, _) = counter(&client, "src").await;
    while counter(&client, "src").await.1 < 5 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, before) = counter(&client, "src").await;
    let forked = client
        .fork_sandbox(
            "src",
            &ForkRequest {
                new_name: Some("clone".into()),
                warm: true,
                ..Default::default()
            },
        )
        .await
        .expect("warm fork");
    assert_eq!(forked.name, "clone");
    let clone = sbxd::running(&client, "clone", "default").await;
    assert_eq!(clone.restarts, 0);
    // The file goes; the clone's counter writes it again from memory: same token, a count
    // that goes on from where the source was, not from 1.
    sh(&client, "clone", "rm /tmp/counter").await;
    let (clone_token, first) = counter(&client, "clone").await;
    assert_eq!(
        clone_token, token,
        "the clone's process has the source's memory"
    );
    assert!(first > before, "count {first} did not go on from {before}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, later) = counter(&client, "clone").await;
    assert!(later > first, "the clone's counter stopped at {first}");
    // Both run on, apart: the source is not frozen, and each has its own files.
    let (_, source_now) = counter(&client, "src").await;
    assert!(source_now > before);
    sh(&client, "clone", "echo mine > /clone-only").await;
    assert!(
        !sh(&client, "src", "cat /clone-only 2>&1 || true")
            .await
            .contains("mine")
    );
    // The clone is a sandbox of its own: its hostname, its address.
    assert_eq!(sh(&client, "clone", "hostname").await, "clone\n");
    let address = |name: &'static str| {
        let client = client.clone();
        async move {
            sh(
                &client,
                name,
                "ip -o -4 addr show dev eth0 | awk '{print $4}'",
            )
            .await
        }
    };
    let (a, b) = (address("src").await, address("clone").await);
    assert!(!a.trim().is_empty() && a != b, "{a} vs {b}");
    // No fork snapshot and no checkpoint images are left.
    assert!(
        client
            .list_snapshots(&list_query(None))
            .await
            .unwrap()
            .is_empty()
    );
    // Where /run is no tmpfs, CRIU kept its kernel probe in the daemon's own /run for it
    // (`checkpoints/.criu-run`), so the next dump and restore skip the probe.
    let run_fs = std::process::Command::new("stat")
        .args(["-f", "-c", "%T", "/run"])
        .output()
        .expect("stat -f /run");
    if String::from_utf8_lossy(&run_fs.stdout).trim() != "tmpfs" {
        assert!(
            daemon
                .data_dir
                .join("checkpoints/.criu-run/criu.kdat")
                .is_file(),
            "CRIU kept no kernel probe"
        );
    }
    let checkpoints: Vec<_> = ["checkpoints", "checkpoints.disk"]
        .iter()
        .flat_map(|dir| {
            std::fs::read_dir(daemon.data_dir.join(dir))
                .into_iter()
                .flatten()
        })
        .flatten()
        .filter(|e| e.file_name() != ".criu-run")
        .map(|e| e.path())
        .collect();
    assert!(
        checkpoints.is_empty(),
        "checkpoint images left: {checkpoints:?}"
    );
    client.delete_all_sandboxes("default").await.unwrap();
    // (Cgroups are checked per id elsewhere; other tests' sandboxes run meanwhile.)
    let left: Vec<String> = sbxd::leftovers(&daemon, None)
        .into_iter()
        .filter(|l| l.starts_with("mount ") || l.starts_with("dir "))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(snapshot_layers(&daemon), 0, "layers leaked");
}

#[tokio::test]
async fn warm_fork_without_criu_answers_400_and_cold_fork_still_works() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "[runtime]\ncriu = \"/nonexistent/criu\"\n");
    let client = daemon.admin();
    client.create_sandbox(&request("src")).await.unwrap();
    sbxd::running(&client, "src", "default").await;
    let fork = |warm: bool| {
        let client = client.clone();
        async move {
            client
                .fork_sandbox(
                    "src",
                    &ForkRequest {
                        new_name: Some("clone".into()),
                        warm,
                        ..Default::default()
                    },
                )
                .await
        }
    };
    match fork(true).await {
        Err(ClientError::Api(e)) => {
            assert_eq!((e.status, e.code.as_str()), (400, "BadRequest"), "{e:?}");
            assert!(e.message.contains("CRIU"), "{}", e.message);
        }
        other => panic!("expected 400, got {other:?}"),
    }
    // Nothing was made, and the source was not left frozen.
    assert_eq!(status(client.get_sandbox("clone", "default").await).0, 404);
    assert!(
        client
            .list_snapshots(&list_query(None))
            .await
            .unwrap()
            .is_empty()
    );
    let src = client.get_sandbox("src", "default").await.unwrap();
    assert_eq!(
        (src.status, src.ready.as_str()),
        (SandboxStatus::Running, "True")
    );
    assert_eq!(sh(&client, "src", "echo alive").await, "alive\n");
    fork(false).await.expect("cold fork");
    sbxd::running(&client, "clone", "default").await;
    client.delete_all_sandboxes("default").await.unwrap();
    assert_eq!(snapshot_layers(&daemon), 0, "layers leaked");
}

#[tokio::test]
async fn kill_9_in_the_middle_of_a_fork_leaves_no_orphan_after_restart() {
    let net = TestNet::new();
    let (_dir, config) = sbxd::config_file(&net);
    let args = ["--config", config.as_str()];
    let mut daemon = Daemon::start_with(&args);
    let client = daemon.admin();
    client.create_sandbox(&request("src")).await.unwrap();
    sbxd::running(&client, "src", "default").await;
    // Enough files that the copy takes a while, so the crash lands inside the fork.
    sh(&client, "src", "for i in $(seq 1 300); do echo $i > /f$i; done; dd if=/dev/zero of=/big bs=1M count=64 2>/dev/null").await;
    let forking = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .fork_sandbox(
                    "src",
                    &ForkRequest {
                        new_name: Some("clone".into()),
                        ..Default::default()
                    },
                )
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(40)).await;
    daemon.kill9();
    let _ = forking.await;

    let daemon = daemon.restart(&args);
    let client = daemon.admin();
    for line in daemon
        .log_text()
        .lines()
        .filter(|l| l.contains("interrupted") || l.contains("half-copied"))
    {
        eprintln!("restart: {line}");
    }
    // The source runs and is not left frozen by the interrupted copy.
    let src = client.get_sandbox("src", "default").await.unwrap();
    assert_eq!(
        (src.status, src.ready.as_str()),
        (SandboxStatus::Running, "True"),
        "{src:?}"
    );
    assert_eq!(sh(&client, "src", "cat /f300").await, "300\n");
    // No half-copied layer; the clone, if it got as far as being recorded, runs.
    let layers_dir = daemon.data_dir.join("snapshot-layers");
    let partial: Vec<String> = std::fs::read_dir(&layers_dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        partial.iter().all(|n| !n.starts_with(".tmp-")),
        "{partial:?}"
    );
    if client.get_sandbox("clone", "default").await.is_ok() {
        sbxd::running(&client, "clone", "default").await;
        assert_eq!(sh(&client, "clone", "cat /f300").await, "300\n");
    }
    // The interrupted fork's own snapshot was deleted at start-up: the GC finds nothing, and
    // nothing remains.
    let gc = GcRequest {
        keep_fork_for: Some(sbx::shared::duration::DurationValue::Seconds(0)),
        ..Default::default()
    };
    tokio::time::sleep(Duration::from_millis(1100)).await;
    client.gc_snapshots(&gc).await.unwrap();
    assert!(
        client
            .list_snapshots(&list_query(None))
            .await
            .unwrap()
            .is_empty()
    );
    client.delete_all_sandboxes("default").await.unwrap();
    assert_eq!(snapshot_layers(&daemon), 0, "layers leaked");
}

#[test]
fn the_cli_pauses_with_a_snapshot_forks_and_restores() {
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
    assert!(
        run(&["sandbox", "create", "demo", "--image", &sbxd::busybox()])
            .status
            .success()
    );
    assert!(
        run(&[
            "sandbox",
            "exec",
            "demo",
            "--",
            "sh",
            "-c",
            "echo kept > /kept"
        ])
        .status
        .success()
    );
    let out = run(&["sandbox", "fork", "demo", "demo-2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&run(&["sandbox", "exec", "demo-2", "--", "cat", "/kept"]).stdout),
        "kept\n"
    );
    let out = run(&["sandbox", "pause", "demo", "--snapshot"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["snapshot", "list", "--kind", "pause", "-o", "json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let name = list[0]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("demo-paused-"), "{name}");
    let out = run(&["snapshot", "restore", &name, "demo-3"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let started = Instant::now();
    loop {
        let out = run(&["sandbox", "exec", "demo-3", "--", "cat", "/kept"]);
        if out.status.success() {
            assert_eq!(String::from_utf8_lossy(&out.stdout), "kept\n");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = run(&["snapshot", "list"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&name));
    let out = run(&["snapshot", "gc", "--dry-run", "--keep-fork-for", "0"]);
    assert!(out.status.success());
    assert!(run(&["sandbox", "delete-all", "--yes"]).status.success());
    assert!(run(&["snapshot", "delete", &name]).status.success());
    assert_eq!(run(&["snapshot", "get", &name]).status.code(), Some(4));
}
