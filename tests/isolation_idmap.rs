//! Host ids of sandboxes, black-box against a real `sbx serve` (sbxd, runc, user namespaces):
//! every sandbox (and every container the pool prepares) has a host id range of its own,
//! also across a restart of the daemon; files keep their owners inside through a snapshot, a
//! restore and a cold or warm fork into another range; and the sandbox's root, as a host
//! process (the creds it would have after escaping its mount namespace), cannot rename or
//! replace what the daemon later reads or hands to the runtime. Needs root.
mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::sbxd::{self, TestNet};
use common::{Daemon, call, key};
use sbx::cli::client::ApiClient;
use sbx::shared::models::sandbox::{CreateSandboxRequest, ForkRequest};
use sbx::shared::models::snapshot::RestoreRequest;
use serde_json::json;

const RANGE: u64 = 65536;

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

async fn sandbox(client: &ApiClient, name: &str, namespace: &str) {
    let req = CreateSandboxRequest {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        image: Some(sbxd::busybox()),
        ..Default::default()
    };
    client.create_sandbox(&req).await.expect("create");
    sbxd::running(client, name, namespace).await;
}

async fn sh(client: &ApiClient, name: &str, namespace: &str, command: &str) -> String {
    let (code, stdout, stderr) = sbxd::exec(client, name, namespace, command).await;
    assert_eq!(code, 0, "`{command}` in {name}: {stdout}{stderr}");
    stdout
}

/// The sandbox's id maps as its own processes read them: `(inside, host, count)` of the uid
/// and the gid map (one extent each).
async fn id_maps(client: &ApiClient, name: &str, namespace: &str) -> [(u64, u64, u64); 2] {
    let text = sh(
        client,
        name,
        namespace,
        "cat /proc/self/uid_map /proc/self/gid_map",
    )
    .await;
    let extents: Vec<(u64, u64, u64)> = text
        .lines()
        .map(|line| {
            let n: Vec<u64> = line
                .split_whitespace()
                .map(|w| w.parse().expect("a number"))
                .collect();
            (n[0], n[1], n[2])
        })
        .collect();
    assert_eq!(extents.len(), 2, "one extent per map in {name}: {text}");
    [extents[0], extents[1]]
}

/// The host base of a sandbox's range, checked to be one whole range from id 0, the same for
/// uids and gids.
async fn host_base(client: &ApiClient, name: &str, namespace: &str) -> u64 {
    let [uid, gid] = id_maps(client, name, namespace).await;
    assert_eq!(uid, gid, "uid and gid maps of {name}");
    assert_eq!(
        (uid.0, uid.2),
        (0, RANGE),
        "container ids 0..65535 in {name}"
    );
    assert!(
        uid.1 >= 100_000,
        "{name}'s root is an unprivileged host id: {uid:?}"
    );
    uid.1
}

fn assert_disjoint(bases: &BTreeMap<String, u64>) {
    let all: Vec<(&String, &u64)> = bases.iter().collect();
    for (i, (a, base_a)) in all.iter().enumerate() {
        for (b, base_b) in &all[i + 1..] {
            assert!(
                base_a.abs_diff(**base_b) >= RANGE,
                "{a} (host ids from {base_a}) and {b} (from {base_b}) overlap: {bases:?}"
            );
        }
    }
}

/// The host id bases of every container under the data dir (sandboxes and prepared ones),
/// from the runtime configs the daemon wrote: by sandbox dir.
fn runtime_bases(data_dir: &Path) -> BTreeMap<String, u64> {
    let mut bases = BTreeMap::new();
    for entry in std::fs::read_dir(data_dir.join("sandboxes"))
        .expect("sandboxes dir")
        .flatten()
    {
        let Ok(bytes) = std::fs::read(entry.path().join("bundle/config.json")) else {
            continue;
        };
        let config: serde_json::Value = serde_json::from_slice(&bytes).expect("config.json");
        let base = config["linux"]["uidMappings"][0]["hostID"]
            .as_u64()
            .expect("a uid mapping");
        bases.insert(entry.file_name().to_string_lossy().into_owned(), base);
    }
    bases
}

/// The host dir of the sandbox whose hostname is `name`.
fn sandbox_dir(data_dir: &Path, name: &str) -> PathBuf {
    for entry in std::fs::read_dir(data_dir.join("sandboxes"))
        .expect("sandboxes dir")
        .flatten()
    {
        let hostname = std::fs::read_to_string(entry.path().join("etc/hostname"));
        if hostname.is_ok_and(|h| h.trim() == name) {
            return entry.path();
        }
    }
    panic!("no sandbox dir for {name} under {}", data_dir.display());
}

#[tokio::test]
async fn each_sandbox_gets_a_host_id_range_of_its_own_and_a_restart_reuses_no_live_one() {
    let net = TestNet::new();
    let (_config_dir, config) = sbxd::config_file(&net);
    let daemon = Daemon::start_with(&["--config", &config]);
    let admin = daemon.admin();
    tenant(&daemon, "red").await;
    tenant(&daemon, "blue").await;
    let red_key = key(&admin, "red-user", "user", Some("red")).await;
    let red = daemon.client(&red_key);
    let blue = daemon.client(&key(&admin, "blue-user", "user", Some("blue")).await);
    sandbox(&red, "a", "red").await;
    sandbox(&blue, "b", "blue").await;
    let mut bases = BTreeMap::new();
    bases.insert("a".to_string(), host_base(&red, "a", "red").await);
    bases.insert("b".to_string(), host_base(&blue, "b", "blue").await);
    assert_disjoint(&bases);
    // The host sees a's files owned by a's range: root inside is its base outside.
    sh(&red, "a", "red", "echo x > /by-root").await;
    let upper = sandbox_dir(&daemon.data_dir, "a").join("upper/by-root");
    assert_eq!(
        u64::from(std::fs::metadata(&upper).expect("a's file").uid()),
        bases["a"]
    );

    // A restart: a and b run on; the next sandboxes (and the pool's prepared containers)
    // get ranges none of them holds.
    let daemon = daemon.restart(&["--config", &config]);
    let red = daemon.client(&red_key);
    assert_eq!(
        host_base(&red, "a", "red").await,
        bases["a"],
        "a kept its range"
    );
    sandbox(&red, "c", "red").await;
    sandbox(&red, "d", "red").await;
    bases.insert("c".to_string(), host_base(&red, "c", "red").await);
    bases.insert("d".to_string(), host_base(&red, "d", "red").await);
    assert_disjoint(&bases);
    let all = runtime_bases(&daemon.data_dir);
    assert!(all.len() >= 4, "{all:?}");
    assert_disjoint(&all);
}

#[tokio::test]
async fn owners_inside_survive_snapshot_restore_and_cold_and_warm_fork_into_other_ranges() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let client = daemon.admin();
    // Sandboxes hold no capability by default: the source's root may chown (the forks and
    // the restore inherit it).
    let req = CreateSandboxRequest {
        name: Some("src".into()),
        image: Some(sbxd::busybox()),
        cap_add: Some(
            ["CHOWN", "FOWNER", "FSETID", "DAC_OVERRIDE"]
                .map(String::from)
                .to_vec(),
        ),
        ..Default::default()
    };
    client.create_sandbox(&req).await.expect("create");
    sbxd::running(&client, "src", "default").await;
    sh(
        &client,
        "src",
        "default",
        "echo x > /f && chown 1000:1001 /f && mkdir /d && echo r > /d/r && \
         chown 4242:4343 /d && chmod 4755 /f",
    )
    .await;
    let owners = "1000:1001 4755\n4242:4343 755\n0:0 644\n";
    let stat = "stat -c '%u:%g %a' /f /d /d/r";
    assert_eq!(sh(&client, "src", "default", stat).await, owners);
    let src_base = host_base(&client, "src", "default").await;

    let http = daemon.http();
    let response = http
        .post(format!("{}/api/v1/sandboxes/src/snapshot", daemon.url))
        .header("X-API-Key", daemon.admin_token())
        .json(&json!({"snapshot_name": "snap"}))
        .send()
        .await
        .expect("snapshot");
    assert_eq!(response.status().as_u16(), 201);
    // Layers are stored in container ids, as image layers are: the range of the sandbox they
    // came from is on none of their files.
    let layers: Vec<PathBuf> = std::fs::read_dir(daemon.data_dir.join("snapshot-layers"))
        .expect("layers dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("f").exists())
        .collect();
    assert_eq!(layers.len(), 1, "{layers:?}");
    let f = std::fs::metadata(layers[0].join("f")).expect("f in the layer");
    assert_eq!((f.uid(), f.gid(), f.mode() & 0o7777), (1000, 1001, 0o4755));

    client
        .restore_snapshot(
            "snap",
            &RestoreRequest {
                new_sandbox_name: Some("restored".into()),
                ..Default::default()
            },
        )
        .await
        .expect("restore");
    sbxd::running(&client, "restored", "default").await;
    for warm in [false, true] {
        let name = if warm { "warm" } else { "cold" };
        client
            .fork_sandbox(
                "src",
                &ForkRequest {
                    new_name: Some(name.into()),
                    warm,
                    ..Default::default()
                },
            )
            .await
            .unwrap_or_else(|e| panic!("{name} fork: {e}"));
        sbxd::running(&client, name, "default").await;
    }
    let mut bases = BTreeMap::from([("src".to_string(), src_base)]);
    for name in ["restored", "cold", "warm"] {
        assert_eq!(
            sh(&client, name, "default", stat).await,
            owners,
            "owners inside {name}"
        );
        // Its own root can still change what it owns, as in its source.
        sh(
            &client,
            name,
            "default",
            "chown 7:7 /d/r && echo more >> /f && rm /d/r",
        )
        .await;
        bases.insert(name.to_string(), host_base(&client, name, "default").await);
    }
    // The warm clone's processes were restored by CRIU into the clone's range, not the
    // source's (its user namespace comes from the checkpoint images).
    assert_disjoint(&bases);
    assert_eq!(
        sh(&client, "warm", "default", "cat /proc/1/uid_map")
            .await
            .split_whitespace()
            .nth(1),
        Some(bases["warm"].to_string().as_str())
    );
}

/// A host process with the sandbox root's creds (uid and gid its range's base, no groups,
/// no capabilities): `sh -c script`, its exit code and output.
fn as_host_id(base: u64, script: &str) -> (i32, String) {
    let out = Command::new("setpriv")
        .args([
            &format!("--reuid={base}"),
            &format!("--regid={base}"),
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "sh",
            "-c",
            script,
        ])
        .output()
        .expect("setpriv");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test]
async fn the_sandbox_root_cannot_rename_or_replace_its_bundle_or_sandbox_dir() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let client = daemon.admin();
    sandbox(&client, "victim", "default").await;
    let base = host_base(&client, "victim", "default").await;
    let dir = sandbox_dir(&daemon.data_dir, "victim");

    // Owners and modes on the host: nothing the daemon reads or hands to the runtime is the
    // sandbox's; it gets search permission, through the group, where the runtime needs it.
    let meta = |p: &Path| std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    for path in [dir.clone(), dir.join("etc")] {
        let m = meta(&path);
        assert_eq!(
            (m.uid(), u64::from(m.gid()), m.permissions().mode() & 0o7777),
            (0, base, 0o710),
            "{}",
            path.display()
        );
    }
    for path in [
        dir.join("bundle"),
        dir.join("bundle/config.json"),
        dir.join("etc/hosts"),
        dir.join("etc/resolv.conf"),
        dir.join("work"),
    ] {
        let m = meta(&path);
        assert_eq!((m.uid(), m.gid()), (0, 0), "{}", path.display());
        assert_eq!(m.permissions().mode() & 0o022, 0, "{}", path.display());
    }
    for path in [daemon.data_dir.clone(), daemon.data_dir.join("sandboxes")] {
        let m = meta(&path);
        assert_eq!(m.uid(), 0, "{}", path.display());
        assert_eq!(m.permissions().mode() & 0o022, 0, "{}", path.display());
    }

    // The attack: the sandbox's root, out of its mount namespace, goes for the bundle.
    let d = dir.display();
    let attempts = [
        format!("mv {d}/bundle {d}/moved"),
        format!("mkdir {d}/bundle2"),
        format!("mv {d}/upper {d}/upper2"),
        format!("mv {d}/etc {d}/etc2"),
        format!("ln -s /etc {d}/link"),
        format!("mv {d}/etc/hosts {d}/etc/hosts2"),
        format!("echo x > {d}/etc/evil"),
        format!("echo '{{}}' > {d}/bundle/config.json"),
        format!("cat {d}/bundle/config.json"),
    ];
    for attempt in attempts {
        let (code, out) = as_host_id(base, &attempt);
        assert_ne!(code, 0, "`{attempt}` as host id {base} worked: {out}");
        assert!(
            out.contains("Permission denied"),
            "`{attempt}` as host id {base} failed for another reason: {out}"
        );
    }
    // It still gets where the runtime needs it: the /etc files it bind-mounts.
    let (code, out) = as_host_id(base, &format!("cat {d}/etc/hostname"));
    assert_eq!((code, out.as_str()), (0, "victim\n"));
    // And the sandbox runs on: its bundle was never touched.
    assert_eq!(
        sh(&client, "victim", "default", "hostname").await,
        "victim\n"
    );
    let config = std::fs::read(dir.join("bundle/config.json")).expect("config.json");
    assert!(serde_json::from_slice::<serde_json::Value>(&config).is_ok());
}

#[test]
fn an_id_layout_past_the_last_host_id_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("sbx.toml");
    std::fs::write(&config, "[runtime]\nidMapRanges = 65535\n").expect("write config");
    let stderr = common::serve_refused(
        &["--config", config.to_str().expect("utf-8")],
        &dir.path().join("data"),
    );
    assert!(
        stderr.contains("idMapRanges 65535") && stderr.contains("65534 ranges fit"),
        "{stderr}"
    );
}
