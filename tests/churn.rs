//! Churn on the embedded default: hundreds of real sandboxes created and deleted at once, a
//! crash in the middle of a mass delete, and network pieces left over from removals that a
//! crash cut short. What the host side holds must always be what the live sandboxes own, and
//! a dirty slot must never fail a create. Needs root.
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::sbxd::{self, TestNet};
use common::{Daemon, ok};
use futures_util::StreamExt;
use sbx::cli::client::ApiClient;
use sbx::shared::models::sandbox::{CreateSandboxRequest, SandboxStatus};

/// How many client requests run at once.
const CLIENTS: usize = 8;

fn request(name: &str) -> CreateSandboxRequest {
    CreateSandboxRequest {
        name: Some(name.into()),
        image: Some(sbxd::busybox()),
        ..Default::default()
    }
}

/// Waits (up to 30 s) until the host side holds exactly `sandboxes` sandboxes' pieces: a
/// chain, a set, a counter, a veth and a namespace each.
async fn wait_for_objects(net: &TestNet, sandboxes: usize) {
    let started = Instant::now();
    loop {
        let objects = sbxd::network_objects(net);
        let count = |kind: &str| objects.iter().filter(|o| o.starts_with(kind)).count();
        let counts = ["chain ", "set ", "counter ", "veth ", "netns "].map(count);
        if counts.iter().all(|&c| c == sandboxes) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "expected the pieces of {sandboxes} sandboxes, found {counts:?}: {objects:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Makes the pieces a removal cut short leaves for `slot`: the nft chain, set, counter and
/// verdict-map element, and a host veth (no namespace).
fn leave_pieces_of_slot(net: &TestNet, slot: u32) {
    let t = "inet sbx";
    let script = format!(
        "add table {t}\nadd map {t} egress {{ type ifname : verdict; }}\nadd chain {t} sb{slot}\n\
         add set {t} sb{slot}_allow {{ type ipv4_addr; flags interval; }}\nadd counter {t} sb{slot}_tx\n\
         add element {t} egress {{ \"sbxv{slot}\" : jump sb{slot} }}\n"
    );
    ok(
        &["ip", "netns", "exec", &net.router, "nft", "-f", "-"],
        Some(&script),
    );
    ok(
        &[
            "ip",
            "-n",
            &net.router,
            "link",
            "add",
            &format!("sbxv{slot}"),
            "type",
            "veth",
            "peer",
            "name",
            &format!("left{slot}"),
        ],
        None,
    );
}

/// Creates `names` (CLIENTS at a time) and waits until every one is Running.
async fn create_all(client: &ApiClient, names: &[String]) {
    futures_util::stream::iter(names.iter().cloned())
        .for_each_concurrent(CLIENTS, |name| {
            let client = client.clone();
            async move {
                client
                    .create_sandbox(&request(&name))
                    .await
                    .unwrap_or_else(|e| panic!("create {name}: {e}"));
            }
        })
        .await;
    let started = Instant::now();
    loop {
        let list = client.list_sandboxes(Some("default")).await.expect("list");
        let failed: Vec<_> = list
            .iter()
            .filter(|s| s.status == SandboxStatus::Failed)
            .map(|s| format!("{}: {}", s.name, s.error_message))
            .collect();
        assert!(failed.is_empty(), "failed creates: {failed:?}");
        let running = list
            .iter()
            .filter(|s| s.status == SandboxStatus::Running && s.ready == "True")
            .count();
        if running == names.len() {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "{running} of {} running",
            names.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mass_delete_cut_by_a_crash_leaves_no_network_piece_and_dirty_slots_never_fail() {
    let net = TestNet::new();
    let (_dir, config) = sbxd::config_file(&net);
    let args = ["--config", config.as_str()];
    let mut daemon = Daemon::start_with(&args);
    let client = daemon.admin();

    // Hundreds created at once; half deleted, at once, when the daemon dies.
    let names: Vec<String> = (0..200).map(|i| format!("churn-{i}")).collect();
    create_all(&client, &names).await;
    wait_for_objects(&net, names.len()).await;
    let deleted = Arc::new(AtomicUsize::new(0));
    let deletes = {
        let (client, names, deleted) = (client.clone(), names.clone(), deleted.clone());
        tokio::spawn(async move {
            futures_util::stream::iter(names)
                .for_each_concurrent(CLIENTS, |name| {
                    let (client, deleted) = (client.clone(), deleted.clone());
                    async move {
                        if client.delete_sandbox(&name, "default").await.is_ok() {
                            deleted.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
                .await
        })
    };
    while deleted.load(Ordering::SeqCst) < names.len() / 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    daemon.kill9();
    let _ = deletes.await;

    // After the restart the host side holds exactly what the remaining sandboxes own (the
    // deletes the crash interrupted are finished), and they all still run.
    let daemon = daemon.restart(&args);
    let client = daemon.admin();
    let remaining = client.list_sandboxes(Some("default")).await.expect("list");
    assert!(
        remaining.len() < names.len() && remaining.len() > CLIENTS,
        "{} remain",
        remaining.len()
    );
    assert!(
        remaining.iter().all(|s| s.status == SandboxStatus::Running),
        "{remaining:?}"
    );
    wait_for_objects(&net, remaining.len()).await;
    client
        .delete_all_sandboxes("default")
        .await
        .expect("delete all");
    wait_for_objects(&net, 0).await;
    let mut daemon = daemon;
    assert!(daemon.stop(), "daemon did not stop cleanly");

    // Pieces of removals a crash cut short, with no sandbox and no namespace left: the next
    // start removes them before any create.
    for slot in [0, 1, 5] {
        leave_pieces_of_slot(&net, slot);
    }
    let daemon = daemon.restart(&args);
    let client = daemon.admin();
    assert!(
        sbxd::network_objects(&net).is_empty(),
        "{:?}",
        sbxd::network_objects(&net)
    );

    // Pieces that appear while it runs: the create that gets the slot cleans it.
    leave_pieces_of_slot(&net, 0);
    leave_pieces_of_slot(&net, 2);
    let again: Vec<String> = (0..40).map(|i| format!("again-{i}")).collect();
    create_all(&client, &again).await;
    wait_for_objects(&net, again.len()).await;
    client
        .delete_all_sandboxes("default")
        .await
        .expect("delete all");
    wait_for_objects(&net, 0).await;
}
