//! Crash consistency on the embedded default: `sbx serve` killed with SIGKILL at seeded
//! random moments of create, delete, snapshot, cold and warm fork, restore, tenant delete and
//! a burst of 20 concurrent creates — 50 kills, reproducible from `SBX_CRASH_SEED`. After
//! each restart every sandbox the API said exists runs (an exec answers) or reads Failed with
//! a reason, nothing it said was deleted comes back, nothing appears that no one asked for,
//! and once the test deletes what the round made, the host holds exactly what it held
//! before: no mount, cgroup, netns, nft object, veth, snapshot layer, checkpoint, container,
//! shim process or database row more. Needs root and CRIU (scripts/setup installs it).
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::sbxd::{self, TestNet};
use common::{Daemon, ok};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use sbx::cli::client::{ApiClient, ClientError, ClientResult};
use sbx::shared::models::sandbox::{
    CreateSandboxRequest, CreateSnapshotRequest, ExecRequest, ForkRequest, SandboxStatus,
};
use sbx::shared::models::snapshot::{RestoreRequest, SnapshotListQuery};
use sbx::shared::models::tenant::{CreateTenantRequest, TenantSpec};

/// How many times the daemon is killed.
const KILLS: usize = 50;
/// The seed when `SBX_CRASH_SEED` is not set.
const DEFAULT_SEED: u64 = 20_261_128;
/// Sandbox and snapshot every round starts from (never deleted).
const SOURCE: &str = "src";
const BASE: &str = "base";
const DEFAULT: &str = "default";
/// Sandboxes a burst creates at once.
const BURST: usize = 20;

/// What the API last answered about an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Said {
    /// Created (2xx): it must exist.
    Exists,
    /// Deleted (2xx): it must never come back.
    Gone,
    /// The kill cut the answer off: either is right, but it must settle.
    Unknown,
}

/// A splitmix64 generator: the kill points follow from the seed alone.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Create,
    Delete,
    Snapshot,
    ColdFork,
    WarmFork,
    Restore,
    TenantDelete,
    Burst,
}

const OPS: [Op; 8] = [
    Op::Create,
    Op::Delete,
    Op::Snapshot,
    Op::ColdFork,
    Op::WarmFork,
    Op::Restore,
    Op::TenantDelete,
    Op::Burst,
];

impl Op {
    /// The kill lands at a uniform random moment up to this many ms after the operation
    /// starts. Operations that answer when done (delete, snapshot, fork, tenant delete): 1.25×
    /// the last answered one's length, so most kills land inside it and some after the answer
    /// (whose word must then hold). Creates and restores answer first and provision after:
    /// a fixed window over their provisioning.
    fn window_ms(self, last: Option<u64>) -> u64 {
        let first_guess = match self {
            Op::Create | Op::Restore => return 250,
            Op::Burst => return 600,
            Op::Delete => 100,
            Op::Snapshot => 150,
            Op::ColdFork => 250,
            Op::WarmFork => 500,
            Op::TenantDelete => 200,
        };
        last.map_or(first_guess, |ms| ms * 5 / 4 + 1)
    }
}

/// Sandboxes (namespace, name), snapshots (namespace, name) and tenants, with what the API
/// said of each.
#[derive(Default)]
struct Model {
    sandboxes: BTreeMap<(String, String), Said>,
    snapshots: BTreeMap<(String, String), Said>,
    tenants: BTreeMap<String, Said>,
}

/// One object an answer (or a missing one) was about.
enum Answer {
    Sandbox(String, String, Said),
    Snapshot(String, String, Said),
    Tenant(String, Said),
}

/// `Exists`/`Gone` for an answer, `Unknown` for a cut connection; any error envelope is a
/// failure of the test (nothing here should be refused).
fn said<T>(what: &str, result: ClientResult<T>, success: Said) -> Said {
    match result {
        Ok(_) => success,
        Err(ClientError::Api(e)) => panic!("{what}: the server refused: {e}"),
        Err(_) => Said::Unknown,
    }
}

fn key(namespace: &str, name: &str) -> (String, String) {
    (namespace.to_string(), name.to_string())
}

fn request(name: &str, namespace: &str) -> CreateSandboxRequest {
    CreateSandboxRequest {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        image: Some(sbxd::busybox()),
        ..Default::default()
    }
}

impl Answer {
    fn said(&self) -> Said {
        match self {
            Answer::Sandbox(_, _, s) | Answer::Snapshot(_, _, s) | Answer::Tenant(_, s) => *s,
        }
    }
}

impl Model {
    fn record(&mut self, answer: Answer) {
        match answer {
            Answer::Sandbox(ns, name, s) => self.sandboxes.insert((ns, name), s),
            Answer::Snapshot(ns, name, s) => self.snapshots.insert((ns, name), s),
            Answer::Tenant(name, s) => self.tenants.insert(name, s),
        };
    }
}

/// Makes what an operation needs before the timer starts (a sandbox to delete, a tenant
/// with sandboxes), Running.
async fn prepare(op: Op, round: usize, client: &ApiClient, model: &mut Model) {
    match op {
        Op::Delete => {
            let name = format!("d{round}");
            client
                .create_sandbox(&request(&name, DEFAULT))
                .await
                .unwrap();
            model.record(Answer::Sandbox(DEFAULT.into(), name.clone(), Said::Exists));
            sbxd::running(client, &name, DEFAULT).await;
        }
        Op::TenantDelete => {
            let tenant = format!("t{round}");
            let spec: TenantSpec =
                serde_json::from_value(serde_json::json!({ "namespaces": [tenant] })).unwrap();
            client
                .create_tenant(&CreateTenantRequest {
                    name: Some(tenant.clone()),
                    spec: Some(spec),
                    labels: None,
                })
                .await
                .unwrap();
            model.record(Answer::Tenant(tenant.clone(), Said::Exists));
            for name in ["a", "b"] {
                client
                    .create_sandbox(&request(name, &tenant))
                    .await
                    .unwrap();
                model.record(Answer::Sandbox(tenant.clone(), name.into(), Said::Exists));
                sbxd::running(client, name, &tenant).await;
            }
        }
        _ => {}
    }
}

/// Runs the operation the kill will cut; returns what each answer said and how long it took
/// (ms).
fn run(op: Op, round: usize, client: ApiClient) -> BoxFuture<'static, (Vec<Answer>, u64)> {
    Box::pin(async move {
        let started = Instant::now();
        let sandbox = |name: &str, s| Answer::Sandbox(DEFAULT.into(), name.to_string(), s);
        let answers = match op {
            Op::Create => {
                let name = format!("c{round}");
                let r = client.create_sandbox(&request(&name, DEFAULT)).await;
                vec![sandbox(&name, said("create", r, Said::Exists))]
            }
            Op::Delete => {
                let name = format!("d{round}");
                let r = client.delete_sandbox(&name, DEFAULT).await;
                vec![sandbox(&name, said("delete", r, Said::Gone))]
            }
            Op::Snapshot => {
                let name = format!("s{round}");
                let body = CreateSnapshotRequest {
                    snapshot_name: Some(name.clone()),
                    ..Default::default()
                };
                let r = client.snapshot_sandbox(SOURCE, &body).await;
                vec![Answer::Snapshot(
                    DEFAULT.into(),
                    name,
                    said("snapshot", r, Said::Exists),
                )]
            }
            Op::ColdFork | Op::WarmFork => {
                let warm = matches!(op, Op::WarmFork);
                let name = format!("{}{round}", if warm { "w" } else { "f" });
                let body = ForkRequest {
                    new_name: Some(name.clone()),
                    warm,
                    ..Default::default()
                };
                let r = client.fork_sandbox(SOURCE, &body).await;
                vec![sandbox(&name, said("fork", r, Said::Exists))]
            }
            Op::Restore => {
                let name = format!("r{round}");
                let body = RestoreRequest {
                    new_sandbox_name: Some(name.clone()),
                    keep_snapshot: Some(true),
                    ..Default::default()
                };
                let r = client.restore_snapshot(BASE, &body).await;
                vec![sandbox(&name, said("restore", r, Said::Exists))]
            }
            Op::TenantDelete => {
                let tenant = format!("t{round}");
                let r = said(
                    "tenant delete",
                    client.delete_tenant(&tenant, true).await,
                    Said::Gone,
                );
                let mut answers = vec![Answer::Tenant(tenant.clone(), r)];
                for name in ["a", "b"] {
                    // Without an answer, each sandbox of the cascade may or may not be gone.
                    answers.push(Answer::Sandbox(tenant.clone(), name.into(), r));
                }
                answers
            }
            Op::Burst => {
                let names: Vec<String> = (0..BURST).map(|k| format!("b{round}-{k}")).collect();
                futures_util::stream::iter(names)
                    .map(|name| {
                        let client = client.clone();
                        async move {
                            let r = client.create_sandbox(&request(&name, DEFAULT)).await;
                            sandbox(&name, said("burst create", r, Said::Exists))
                        }
                    })
                    .buffer_unordered(BURST)
                    .collect()
                    .await
            }
        };
        (answers, started.elapsed().as_millis() as u64)
    })
}

/// Waits (up to 3 minutes) until no sandbox is Pending or Terminating and every snapshot is
/// ready; then holds the API to its word, settles the unknowns and runs an exec in every
/// Running sandbox.
async fn check(client: &ApiClient, model: &mut Model, round: usize) {
    let started = Instant::now();
    let (sandboxes, snapshots) = loop {
        let sandboxes = client.list_sandboxes(None).await.expect("list sandboxes");
        let snapshots = client
            .list_snapshots(&SnapshotListQuery {
                all_namespaces: true,
                ..Default::default()
            })
            .await
            .expect("list snapshots");
        let busy: Vec<String> = sandboxes
            .iter()
            .filter(|s| {
                matches!(
                    s.status,
                    SandboxStatus::Pending | SandboxStatus::Terminating
                )
            })
            .map(|s| format!("{}/{} {:?}", s.namespace, s.name, s.status))
            .chain(
                snapshots
                    .iter()
                    .filter(|s| !s.ready_to_use)
                    .map(|s| format!("snapshot {}/{}", s.namespace, s.name)),
            )
            .collect();
        if busy.is_empty() {
            break (sandboxes, snapshots);
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "round {round}: never settled: {busy:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let tenants = client.list_tenants().await.expect("list tenants");

    for s in &sandboxes {
        let k = (&s.namespace, &s.name);
        match s.status {
            SandboxStatus::Running | SandboxStatus::Paused => {}
            SandboxStatus::Failed => assert!(
                !s.error_message.is_empty(),
                "round {round}: {k:?} Failed without a reason"
            ),
            other => panic!("round {round}: {k:?} is {other:?} after settling"),
        }
    }
    let listed: Vec<_> = sandboxes
        .iter()
        .map(|s| key(&s.namespace, &s.name))
        .collect();
    hold_to_word("sandbox", round, &mut model.sandboxes, &listed);
    let listed: Vec<_> = snapshots
        .iter()
        .map(|s| key(&s.namespace, &s.name))
        .collect();
    hold_to_word("snapshot", round, &mut model.snapshots, &listed);
    let listed: Vec<_> = tenants.iter().map(|t| t.metadata.name.clone()).collect();
    hold_to_word("tenant", round, &mut model.tenants, &listed);

    // Running means running: an exec in each answers.
    let running: Vec<_> = sandboxes
        .iter()
        .filter(|s| s.status == SandboxStatus::Running)
        .map(|s| (s.namespace.clone(), s.name.clone()))
        .collect();
    futures_util::stream::iter(running)
        .for_each_concurrent(8, |(namespace, name)| async move {
            let r = client
                .exec_sandbox(
                    &name,
                    &namespace,
                    &ExecRequest {
                        command: Some("echo alive".into()),
                        timeout_seconds: Some(30),
                    },
                )
                .await
                .unwrap_or_else(|e| panic!("round {round}: exec in {namespace}/{name}: {e}"));
            assert_eq!(
                r.stdout.trim(),
                "alive",
                "round {round}: {namespace}/{name}: {r:?}"
            );
        })
        .await;
}

/// Holds the API to its word on one kind of object: whatever is listed was asked for and not
/// deleted, whatever it created is listed, nothing it deleted is; an unknown takes what the
/// list says.
fn hold_to_word<K: Ord + std::fmt::Debug>(
    kind: &str,
    round: usize,
    said: &mut BTreeMap<K, Said>,
    listed: &[K],
) {
    for k in listed {
        let known = said.get(k).copied();
        assert!(
            matches!(known, Some(Said::Exists | Said::Unknown)),
            "round {round}: {kind} {k:?} is listed but the API said {known:?}"
        );
    }
    for (k, s) in said.iter_mut() {
        let present = listed.contains(k);
        match *s {
            Said::Exists => assert!(present, "round {round}: {kind} {k:?} was made but is gone"),
            Said::Gone => assert!(!present, "round {round}: deleted {kind} {k:?} came back"),
            Said::Unknown => *s = if present { Said::Exists } else { Said::Gone },
        }
    }
}

/// Deletes everything the round made, through the API (a refusal fails the test with the
/// daemon's last log lines).
async fn clean(daemon: &Daemon, model: &mut Model) {
    let client = &daemon.admin();
    let refused = |what: &str, e: ClientError| -> ! {
        let log = daemon.log_text();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!("{what}: {e}\ndaemon log:\n{}", tail.join("\n"))
    };
    for (name, said) in model.tenants.iter_mut() {
        if *said == Said::Exists {
            client
                .delete_tenant(name, true)
                .await
                .expect("delete tenant");
            *said = Said::Gone;
        }
    }
    for ((namespace, name), said) in model.sandboxes.iter_mut() {
        let tenant_gone = namespace != DEFAULT;
        if *said == Said::Exists && !(namespace == DEFAULT && name == SOURCE) {
            if !tenant_gone {
                client
                    .delete_sandbox(name, namespace)
                    .await
                    .expect("delete");
            }
            *said = Said::Gone;
        }
    }
    for ((namespace, name), said) in model.snapshots.iter_mut() {
        if *said == Said::Exists && name != BASE {
            if let Err(e) = client.delete_snapshot(name, namespace).await {
                refused("delete snapshot", e);
            }
            *said = Said::Gone;
        }
    }
}

/// Everything on the host that belongs to the daemon's sandboxes and snapshots, one line
/// each, sorted: mounts, sandbox dirs and cgroups (`sbxd::leftovers`), network pieces, layer
/// and checkpoint dirs, runtime containers, shim processes and database rows.
fn inventory(daemon: &Daemon, net: &TestNet) -> Vec<String> {
    let data = &daemon.data_dir;
    // Mounts under the data dir, sandbox dirs and cgroups: what a sandbox leaves while it
    // exists (the image store's id-mapped view is the daemon's own).
    let mut found = sbxd::leftovers(daemon, None);
    found.extend(sbxd::network_objects(net));
    let data_text = data.display().to_string();
    // (`checkpoints/.criu-run` is the daemon's own: CRIU's kernel probe.)
    for dir in ["snapshot-layers", "checkpoints", "checkpoints.disk"] {
        found.extend(
            entries(&data.join(dir))
                .filter(|e| e != ".criu-run")
                .map(|e| format!("{dir}/{e}")),
        );
    }
    let root = data.join("runtime").join("runc");
    let containers = ok(
        &["runc", "--root", &root.display().to_string(), "list", "-q"],
        None,
    );
    // Runtime containers and shims by id, the pool's prepared ones left out after the scan
    // (`prepared_are_intact` checks them): a prepared container's marker comes before its
    // container and shim, so none slips in between.
    let mut by_id: Vec<(String, String)> = containers
        .lines()
        .map(|c| (format!("container {c}"), c.to_string()))
        .collect();
    for pid in entries(Path::new("/proc")).filter(|p| p.bytes().all(|b| b.is_ascii_digit())) {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<String> = cmdline
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.get(1).is_some_and(|a| a == "shim")
            && args.iter().any(|a| a.starts_with(&data_text))
        {
            let id = args
                .iter()
                .skip_while(|a| *a != "--id")
                .nth(1)
                .cloned()
                .unwrap_or_default();
            by_id.push((format!("shim {id}"), id));
        }
    }
    let prepared = sbxd::prepared_ids(data);
    found.extend(
        by_id
            .into_iter()
            .filter(|(_, id)| !prepared.contains(id) && !id.starts_with('.'))
            .map(|(line, _)| line),
    );
    found.extend(database_rows(&data.join("sbx.db")));
    found.sort();
    found
}

/// The names of a directory's entries (none when it does not exist).
fn entries(dir: &Path) -> impl Iterator<Item = String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
}

/// One line per sandbox, snapshot and tenant row of the daemon's database.
fn database_rows(path: &Path) -> Vec<String> {
    let db =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open the daemon's database");
    let mut rows = Vec::new();
    for (table, columns) in [
        ("sandboxes", "namespace || '/' || name"),
        ("snapshots", "namespace || '/' || name"),
        ("tenants", "name"),
    ] {
        let mut query = db
            .prepare(&format!("SELECT {columns} FROM {table}"))
            .expect("query");
        let names = query
            .query_map([], |r| r.get::<_, String>(0))
            .expect("rows")
            .map(|r| r.expect("row"));
        rows.extend(names.map(|n| format!("row {table} {n}")));
    }
    rows
}

/// The pool's prepared containers after a restart: each one whose creation finished is a
/// created (never started) container, and there are no more than the pool keeps.
fn prepared_are_intact(daemon: &Daemon, round: usize) {
    let root = daemon.data_dir.join("runtime").join("runc");
    let prepared = sbxd::prepared_ids(&daemon.data_dir);
    // The default pool: 2 per shape, 4 shapes.
    assert!(prepared.len() <= 8, "round {round}: {prepared:?}");
    for id in prepared {
        let marker = daemon
            .data_dir
            .join("sandboxes")
            .join(&id)
            .join("pool.json");
        let Ok(marker) = std::fs::read(&marker) else {
            continue;
        };
        let marker: serde_json::Value = serde_json::from_slice(&marker).expect("pool.json");
        if marker["pid"].as_i64().unwrap_or(0) == 0 {
            continue; // being prepared
        }
        let state = Command::new("runc")
            .arg("--root")
            .arg(&root)
            .args(["state", &id])
            .output()
            .expect("runc state");
        let state: serde_json::Value = serde_json::from_slice(&state.stdout).unwrap_or_default();
        assert_eq!(
            (state["status"].as_str(), state["pid"].as_i64()),
            (Some("created"), marker["pid"].as_i64()),
            "round {round}: prepared container {id}"
        );
    }
}

/// Waits (up to 30 s: network pieces of deleted sandboxes go in the background) until the
/// host holds exactly `expected`.
async fn wait_for_inventory(daemon: &Daemon, net: &TestNet, expected: &[String], round: usize) {
    let started = Instant::now();
    loop {
        let now = inventory(daemon, net);
        if now == expected {
            return;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let extra: Vec<_> = now.iter().filter(|l| !expected.contains(l)).collect();
            let missing: Vec<_> = expected.iter().filter(|l| !now.contains(l)).collect();
            panic!("round {round}: left over {extra:?}; missing {missing:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kills_at_random_points_lose_nothing_and_leave_nothing() {
    let seed = std::env::var("SBX_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    eprintln!("crash suite: seed {seed} (SBX_CRASH_SEED), {KILLS} kills");
    let mut rng = Rng(seed);
    let net = TestNet::new();
    let (_dir, config) = sbxd::config_file(&net);
    let args = ["--config", config.as_str()];
    let mut daemon = Daemon::start_with(&args);
    let mut client = daemon.admin();
    let mut model = Model::default();
    // How long each kind of operation took when it last answered (ms).
    let mut lengths: BTreeMap<usize, u64> = BTreeMap::new();

    // What every round starts from: a running source with a file, and a snapshot of it.
    client
        .create_sandbox(&request(SOURCE, DEFAULT))
        .await
        .unwrap();
    sbxd::running(&client, SOURCE, DEFAULT).await;
    model.record(Answer::Sandbox(DEFAULT.into(), SOURCE.into(), Said::Exists));
    client
        .snapshot_sandbox(
            SOURCE,
            &CreateSnapshotRequest {
                snapshot_name: Some(BASE.into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    model.record(Answer::Snapshot(DEFAULT.into(), BASE.into(), Said::Exists));
    let baseline = inventory(&daemon, &net);
    assert!(
        baseline.iter().any(|l| l.starts_with("shim ")),
        "the inventory sees no shim: {baseline:?}"
    );

    for round in 0..KILLS {
        let op = OPS[round % OPS.len()];
        let delay = rng.below(op.window_ms(lengths.get(&(round % OPS.len())).copied()));
        prepare(op, round, &client, &mut model).await;
        let started = Instant::now();
        let task = tokio::spawn(run(op, round, client.clone()));
        tokio::time::sleep(Duration::from_millis(delay)).await;
        daemon.kill9();
        let (answers, length_ms) = task.await.expect("the operation's task");
        let answered = answers.iter().filter(|a| a.said() != Said::Unknown).count();
        if answered == answers.len() {
            lengths.insert(round % OPS.len(), length_ms);
        }
        eprintln!(
            "round {round}: {op:?} killed after {delay} ms ({} ms in), {answered} of {} answered",
            started.elapsed().as_millis(),
            answers.len()
        );
        for answer in answers {
            model.record(answer);
        }
        daemon = daemon.restart(&args);
        client = daemon.admin();
        check(&client, &mut model, round).await;
        clean(&daemon, &mut model).await;
        wait_for_inventory(&daemon, &net, &baseline, round).await;
        prepared_are_intact(&daemon, round);
    }

    // The source and its snapshot go too: nothing at all is left.
    client.delete_snapshot(BASE, DEFAULT).await.unwrap();
    client.delete_sandbox(SOURCE, DEFAULT).await.unwrap();
    wait_for_inventory(&daemon, &net, &[], KILLS).await;
}
