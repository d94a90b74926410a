//! A tenant's status and usage with two replicas: written to the Tenant object (status
//! subresource, printer columns), accrued and refreshed by the leader alone.
use super::*;

/// The holder of the leader Lease, if any.
async fn leader(client: &kube::Client) -> Option<String> {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "kube-system");
    leases
        .get_opt("sbx-leader")
        .await
        .unwrap()
        .and_then(|l| l.spec?.holder_identity)
}

/// Waits (up to 30 s: a dead holder's claim runs out after 15 s) until `daemon` leads.
async fn until_leading(client: &kube::Client, daemon: &Daemon) {
    let started = Instant::now();
    while !leader(client)
        .await
        .is_some_and(|h| h.contains(&format!("-{}-", daemon.pid())))
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "replica {} never led",
            daemon.pid()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The `/metrics` lines of a replica that start with `series{` and mention `label`.
pub(crate) async fn series(daemon: &Daemon, token: &str, series: &str, label: &str) -> Vec<String> {
    let response = reqwest::Client::new()
        .get(format!("{}/metrics", daemon.url))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    text.lines()
        .filter(|l| l.starts_with(&format!("{series}{{")) && l.contains(label))
        .map(str::to_string)
        .collect()
}

pub(crate) fn value(line: &str) -> f64 {
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// `kubectl get tenant NAME` as a table: its header and its row.
fn kubectl_table(name: &str) -> (String, String) {
    let kubectl = std::env::var("SBX_TEST_KUBECTL").expect(
        "SBX_TEST_KUBECTL is not set: run scripts/test (it exports the test environment's kubectl)",
    );
    let out = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(common::kubeconfig())
        .args(["get", "tenant", name])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines().map(str::to_string);
    (lines.next().unwrap(), lines.next().unwrap_or_default())
}

/// Issue 14, defects 1 and 2: a tenant's status is on its Tenant object from its creation on
/// (what `kubectl get tenants` shows), rewritten by the leader; usage series and snapshot
/// storage are accrued by the leader alone (two replicas do not count twice), the snapshot
/// series labelled with the sandbox's backend; when the leader goes, the other replica takes
/// over both.
#[tokio::test]
async fn status_and_usage_are_the_leaders() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&["us-ns"]).await;
    let client = cluster.client.clone();
    let mut first = start();
    let admin = bootstrap_token(&client).await;
    until_leading(&client, &first).await;
    let (status, body) = call(
        &first,
        &admin,
        M::POST,
        "/api/v1/tenants",
        Some(json!({"name": "usage", "spec": {"namespaces": ["us-ns"]}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let object = tenants(&client).get("usage").await.unwrap();
    assert_eq!(
        object.data["status"],
        json!({"usage": {"sandboxes": "0", "vcpu": "0m", "memory": "0", "disk": "0",
                         "snapshotStorage": "0"}, "observedGeneration": 1}),
        "{object:?}"
    );

    let second = start();
    for (name, backend) in [
        ("u1", "kata-firecracker-devmapper"),
        ("u2", "kata-qemu-longhorn"),
    ] {
        let (status, body) = call(
            &second,
            &admin,
            M::POST,
            "/api/v1/sandboxes",
            Some(
                json!({"name": name, "namespace": "us-ns", "image": "busybox",
                        "backend": backend, "limits": {"cpu": "500m", "memory": "128Mi"}}),
            ),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, body) = call(
        &second,
        &admin,
        M::POST,
        "/api/v1/sandboxes/u2/snapshot",
        Some(json!({"snapshot_name": "u2-s", "namespace": "us-ns"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    // Only the leader accrues: its series grow, the other replica has none.
    let seconds = "sbx_usage_sandbox_seconds_total";
    let started = Instant::now();
    loop {
        let lines = series(&first, &admin, seconds, "sandbox=\"u1\"").await;
        if lines.iter().any(|l| value(l) > 0.0) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the leader never accrued u1: {lines:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        series(&second, &admin, seconds, "sandbox=\"u1\"").await,
        Vec::<String>::new(),
        "a follower accrues usage"
    );
    let snapshots = series(
        &first,
        &admin,
        "sbx_usage_snapshot_gib_seconds_total",
        "namespace=\"us-ns\"",
    )
    .await;
    assert!(
        snapshots.len() == 1 && snapshots[0].contains("backend=\"kata-qemu-longhorn\""),
        "{snapshots:?}"
    );

    // The leader goes; the other replica takes over, rewrites the status at once (without
    // waiting for the next 60 s round) and accrues from then on.
    first.kill9();
    until_leading(&client, &second).await;
    let started = Instant::now();
    loop {
        let object = tenants(&client).get("usage").await.unwrap();
        if object.data["status"]["usage"]["sandboxes"] == "2" {
            assert_eq!(object.data["status"]["usage"]["vcpu"], "1000m");
            assert_eq!(object.data["status"]["usage"]["memory"], "256Mi");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the new leader did not refresh the status: {:?}",
            object.data["status"]
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (header, row) = kubectl_table("usage");
    let columns: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(
        columns,
        [
            "NAME",
            "NAMESPACES",
            "SANDBOXES",
            "VCPU",
            "MEMORY",
            "DISK",
            "SNAPSHOTS",
            "AGE"
        ]
    );
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        &cells[..5],
        ["usage", "[\"us-ns\"]", "2", "1000m", "256Mi"],
        "{row}"
    );
    let started = Instant::now();
    while series(&second, &admin, seconds, "sandbox=\"u1\"")
        .await
        .iter()
        .all(|l| value(l) == 0.0)
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the new leader never accrued u1"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (status, body) = call(
        &second,
        &admin,
        M::DELETE,
        "/api/v1/tenants/usage?cascade=true",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

/// Issue 14, defect 4 on Kubernetes: a kql sandbox's root volume counts against the `disk`
/// quota (as the backstop ResourceQuota's `requests.storage` counts it), and a sandbox with no
/// size for a quota'd resource is refused rather than counted as nothing.
#[tokio::test]
async fn quotas_count_what_a_sandbox_holds() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&["qs-ns"]).await;
    let client = cluster.client.clone();
    let daemon = start();
    let admin = bootstrap_token(&client).await;
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/tenants",
        Some(json!({"name": "qs", "spec": {"namespaces": ["qs-ns"],
                    "quotas": {"vcpu": "2", "disk": "15Gi"}}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let create = |name: &str, limits: Value| {
        let (daemon, admin) = (&daemon, admin.clone());
        let body = json!({"name": name, "namespace": "qs-ns", "image": "busybox",
                          "backend": "kata-qemu-longhorn", "limits": limits});
        async move { call(daemon, &admin, M::POST, "/api/v1/sandboxes", Some(body)).await }
    };
    let (status, body) = create("bare", json!({})).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("vcpu quota"),
        "{body}"
    );
    // The first kql sandbox's 10Gi root volume fits 15Gi; a second one does not.
    let (status, body) = create("one", json!({"cpu": "500m"})).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = create("two", json!({"cpu": "500m"})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("QuotaExceeded")),
        "{body}"
    );
    assert!(
        body["error"]["message"].as_str().unwrap().contains("disk"),
        "{body}"
    );
    let quota: Api<ResourceQuota> = Api::namespaced(client.clone(), "qs-ns");
    let hard = quota
        .get("sbx-tenant-quota")
        .await
        .unwrap()
        .spec
        .unwrap()
        .hard
        .unwrap();
    assert_eq!(hard["requests.storage"].0, "15Gi");
    let (status, body) = call(
        &daemon,
        &admin,
        M::DELETE,
        "/api/v1/tenants/qs?cascade=true",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

/// `sbx apply -f` against the Kubernetes platform: Tenant objects in the cluster, created,
/// then unchanged, then one configured; `sbx diff` says so.
#[tokio::test]
async fn apply_converges_the_cluster_tenants() {
    let _cluster = Cluster::take(&["ap-one", "ap-two"]).await;
    let daemon = start();
    let admin = bootstrap_token(&_cluster.client).await;
    let config = tempfile::tempdir().unwrap();
    let file = config.path().join("tenancy.yaml");
    let tenancy = "apiVersion: sbx.io/v1alpha1\nkind: Tenant\nmetadata: {name: ap}\n\
                   spec: {namespaces: [ap-one, ap-two], quotas: {sandboxes: 3}}\n";
    std::fs::write(&file, tenancy).unwrap();
    let sbx = |args: &[&str]| {
        let out = common::cli(config.path())
            .args(args)
            .args(["-f", file.to_str().unwrap()])
            .args(["--server", &daemon.url, "--api-key", &admin])
            .output()
            .unwrap();
        // Shown with a failure.
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert_eq!(sbx(&["diff"]).0, Some(1));
    assert_eq!(sbx(&["apply"]), (Some(0), "tenant/ap created\n".into()));
    assert_eq!(sbx(&["apply"]), (Some(0), "tenant/ap unchanged\n".into()));
    assert_eq!(sbx(&["diff"]).0, Some(0));
    std::fs::write(&file, tenancy.replace("sandboxes: 3", "sandboxes: 5")).unwrap();
    assert_eq!(sbx(&["apply"]), (Some(0), "tenant/ap configured\n".into()));
    let object = tenants(&_cluster.client).get("ap").await.unwrap();
    assert_eq!(object.data["spec"]["quotas"]["sandboxes"], 5);

    // A set: its label on the Tenant object and in the key's Secret entry; pruned once the
    // file drops them (keys first).
    let set = format!(
        "{}---\napiVersion: sbx.io/v1alpha1\nkind: Tenant\nmetadata: {{name: ap2}}\n\
         spec: {{namespaces: [ap-two]}}\n---\napiVersion: sbx.io/v1alpha1\nkind: ApiKey\n\
         metadata: {{name: ap2-ci}}\nspec: {{role: user, tenant: ap2}}\n",
        tenancy.replace("ap-one, ap-two", "ap-one")
    );
    std::fs::write(&file, &set).unwrap();
    let tokens = config.path().join("tokens");
    std::fs::create_dir(&tokens).unwrap();
    let in_set = [
        "--applyset",
        "tenancy",
        "--token-dir",
        tokens.to_str().unwrap(),
    ];
    let applied = sbx(&[&["apply"][..], &in_set].concat());
    assert_eq!(applied.0, Some(0), "{}", applied.1);
    assert!(
        applied
            .1
            .starts_with("tenant/ap configured\ntenant/ap2 created\napikey/ap2-ci created"),
        "{}",
        applied.1
    );
    let object = tenants(&_cluster.client).get("ap2").await.unwrap();
    assert_eq!(
        object.metadata.labels.unwrap()["sbx.io/apply-set"],
        "tenancy"
    );
    let secrets: Api<Secret> = Api::namespaced(_cluster.client.clone(), "kube-system");
    let stored = secrets.get("sbx-api-keys").await.unwrap().data.unwrap();
    assert!(stored.values().any(|entry| {
        let entry: Value = serde_json::from_slice(&entry.0).unwrap();
        entry["name"] == "ap2-ci" && entry["labels"]["sbx.io/apply-set"] == "tenancy"
    }));
    std::fs::write(&file, set.split("---").next().unwrap()).unwrap();
    let pruned = sbx(&[&["apply", "--prune"][..], &in_set].concat());
    assert_eq!(
        pruned,
        (
            Some(0),
            "tenant/ap unchanged\napikey/ap2-ci pruned\ntenant/ap2 pruned\n".into()
        )
    );
    assert!(
        tenants(&_cluster.client)
            .get_opt("ap2")
            .await
            .unwrap()
            .is_none()
    );
}
