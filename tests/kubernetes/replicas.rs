//! Two replicas against one cluster: quotas, and reads from each replica's watch caches.
use super::*;

/// Two replicas against one cluster: a tenant's quota holds across them (the per-tenant quota
/// Lease), and a tenant's network limits become the bandwidth annotations of its Pods.
#[tokio::test]
async fn quotas_hold_across_replicas() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&["q-ns", "sq-ns"]).await;
    let client = cluster.client.clone();
    let first = start();
    let admin = bootstrap_token(&client).await;
    let (status, body) = call(
        &first,
        &admin,
        M::POST,
        "/api/v1/tenants",
        Some(
            json!({"name": "quota", "spec": {"namespaces": ["q-ns"], "quotas": {"sandboxes": 5},
            "limits": {"network": {"egressBps": "100M", "ingressBps": "200M"}}}}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // The second replica reads the keys and tenants from the cluster at start.
    let second = start();
    let replicas = [&first, &second];
    let creates = (0..20).map(|i| {
        let (daemon, admin) = (replicas[i % 2], admin.clone());
        async move {
            call(
                daemon,
                &admin,
                M::POST,
                "/api/v1/sandboxes",
                Some(
                    json!({"name": format!("q{i}"), "namespace": "q-ns", "image": "busybox",
                            "backend": "kata-firecracker-devmapper"}),
                ),
            )
            .await
        }
    });
    let outcomes = futures_util::future::join_all(creates).await;
    let made = outcomes.iter().filter(|(s, _)| *s == 201).count();
    let refused = outcomes
        .iter()
        .filter(|(s, b)| *s == 403 && b["error"]["code"] == "QuotaExceeded")
        .count();
    assert_eq!((made, refused), (5, 15), "{outcomes:?}");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "q-ns");
    assert_eq!(
        deployments
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len(),
        5
    );
    // The replica that took the quota Lease kept it between its checks, and the other passed
    // its creates there instead of waiting for the Lease.
    let mut checks = std::collections::BTreeMap::new();
    for daemon in replicas {
        for line in super::tenants::series(daemon, &admin, "sbx_quota_checks_total", "lease=").await
        {
            let lease = line.split('"').nth(1).unwrap().to_string();
            *checks.entry(lease).or_insert(0.0) += super::tenants::value(&line);
        }
    }
    assert!(
        checks.get("claimed").is_some_and(|n| *n >= 1.0),
        "{checks:?}"
    );
    assert!(
        checks.get("passed").is_some_and(|n| *n >= 1.0),
        "{checks:?}"
    );
    // The quota Lease is given up once its holder has had no check for a while (3 s). It
    // names where its last holder served.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "kube-system");
    let started = Instant::now();
    let lease = loop {
        let lease = leases.get("sbx-quota-quota").await.unwrap();
        let held = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            .is_some_and(|h| !h.is_empty());
        if !held {
            break lease;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the quota Lease is still held"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let url = lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("sbx.io/holder-url"))
        .cloned();
    assert!(
        url.as_ref()
            .is_some_and(|u| replicas.iter().any(|d| &d.url == u)),
        "{url:?}"
    );
    // It is labelled as sbx's: the replicas watch it (a claim starts from it as another
    // replica left it).
    assert_eq!(
        lease
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app.kubernetes.io/managed-by"))
            .map(String::as_str),
        Some("sbx")
    );
    // It records the revisions up to which a holder's caches must have seen the writes made
    // under it (the next check reads the usage from its own caches once they are there).
    let writes = lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("sbx.io/quota-writes"))
        .expect("the quota Lease records the writes made under it");
    let recorded: Vec<(&str, u64)> = writes
        .split(',')
        .filter_map(|part| {
            let (kind, revision) = part.split_once('=')?;
            Some((kind, revision.parse().ok()?))
        })
        .collect();
    assert_eq!(
        recorded.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        ["deployments", "sbxd", "sbxdSnapshots", "volumeSnapshots"],
        "{writes}"
    );
    assert!(recorded[0].1 > 0, "{writes}");
    // Network limits: the bandwidth annotations on the Pod template.
    let made = outcomes
        .iter()
        .position(|(s, _)| *s == 201)
        .map(|i| format!("q{i}"))
        .unwrap();
    let template = deployments.get(&made).await.unwrap().spec.template;
    let annotations = template.metadata.unwrap().annotations.unwrap();
    assert_eq!(annotations["kubernetes.io/egress-bandwidth"], "100M");
    assert_eq!(annotations["kubernetes.io/ingress-bandwidth"], "200M");
    // A delete on one replica frees its slot for a create on the other at once, whether or
    // not the other's watch has seen the delete yet (a refusal from memory is checked again
    // against the API server).
    for (i, daemon) in [&first, &second, &first].into_iter().enumerate() {
        let made = deployments.list(&Default::default()).await.unwrap().items[0]
            .metadata
            .name
            .clone()
            .unwrap();
        let path = format!("/api/v1/sandboxes/{made}?namespace=q-ns");
        let (status, body) = call(daemon, &admin, M::DELETE, &path, None).await;
        assert_eq!(status, 200, "{body}");
        let other = if std::ptr::eq(daemon, &first) {
            &second
        } else {
            &first
        };
        let (status, body) = call(
            other,
            &admin,
            M::POST,
            "/api/v1/sandboxes",
            Some(
                json!({"name": format!("again{i}"), "namespace": "q-ns", "image": "busybox",
                        "backend": "kata-firecracker-devmapper"}),
            ),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        let (status, body) = call(
            daemon,
            &admin,
            M::POST,
            "/api/v1/sandboxes",
            Some(
                json!({"name": format!("over{i}"), "namespace": "q-ns", "image": "busybox",
                        "backend": "kata-firecracker-devmapper"}),
            ),
        )
        .await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (403, Some("QuotaExceeded")),
            "{body}"
        );
    }

    // snapshotStorage counts the VolumeSnapshots' restoreSize (the bytes the CSI driver
    // copied: a few KiB of an empty volume here): a second snapshot would be above a quota of
    // one byte.
    drop_namespace(&client, "sq-ns").await;
    let (status, body) = call(
        &first,
        &admin,
        M::POST,
        "/api/v1/tenants",
        Some(json!({"name": "snapq", "spec": {"namespaces": ["sq-ns"],
                    "quotas": {"snapshotStorage": "1"}}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        &first,
        &admin,
        M::POST,
        "/api/v1/sandboxes",
        Some(json!({"name": "sq", "namespace": "sq-ns", "image": "busybox"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let snapshot = |daemon, name: &str| {
        call(
            daemon,
            &admin,
            M::POST,
            "/api/v1/sandboxes/sq/snapshot",
            Some(json!({"snapshot_name": name, "namespace": "sq-ns"})),
        )
    };
    let (status, body) = snapshot(&first, "sq-1").await;
    assert_eq!(status, 201, "{body}");
    let snapshots = volume_snapshots(&client, "sq-ns");
    let started = Instant::now();
    while snapshots.get("sq-1").await.unwrap().data["status"]["readyToUse"] != json!(true) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "sq-1 never ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // On the other replica, once it has seen the new tenant (it watches the Tenant objects).
    let snapq = "/api/v1/tenants/snapq";
    eventually(
        || get_status(&second, &admin, snapq),
        200,
        "snapq on the replica",
    )
    .await;
    let (status, body) = snapshot(&second, "sq-2").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("QuotaExceeded")),
        "{body}"
    );
}

/// Creates a kata-firecracker-devmapper sandbox (no PVC) `name` in `namespace`.
async fn create_in(
    daemon: &Daemon,
    token: &str,
    namespace: &str,
    name: &str,
) -> (u16, serde_json::Value) {
    call(
        daemon,
        token,
        reqwest::Method::POST,
        "/api/v1/sandboxes",
        Some(
            json!({"name": name, "namespace": namespace, "image": "busybox",
                    "backend": "kata-firecracker-devmapper"}),
        ),
    )
    .await
}

/// A replica that dies holding a tenant's quota Lease (kept between its checks): a create of
/// that tenant on another replica is passed to it, finds it gone, and is checked where it
/// arrived once the dead replica's claim has run out; the quota stays exact (the new holder
/// counts from the API server: the dead one left no record of its writes).
#[tokio::test]
async fn a_dead_holders_tenant_is_checked_where_its_creates_arrive() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&["dq-ns"]).await;
    let client = cluster.client.clone();
    let mut first = start();
    let admin = bootstrap_token(&client).await;
    let (status, body) = call(
        &first,
        &admin,
        M::POST,
        "/api/v1/tenants",
        Some(
            json!({"name": "deadq", "spec": {"namespaces": ["dq-ns"], "quotas": {"sandboxes": 3}}}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let second = start();
    eventually(
        || get_status(&second, &admin, "/api/v1/tenants/deadq"),
        200,
        "deadq on the second replica",
    )
    .await;
    let (status, body) = create_in(&first, &admin, "dq-ns", "dq0").await;
    assert_eq!(status, 201, "{body}");
    first.kill9();
    let (status, body) = create_in(&second, &admin, "dq-ns", "dq1").await;
    assert_eq!(status, 201, "{body}");
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "kube-system");
    let lease = leases.get("sbx-quota-deadq").await.unwrap();
    assert_eq!(
        lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("sbx.io/holder-url")),
        Some(&second.url),
        "the second replica holds the Lease now"
    );
    let (status, body) = create_in(&second, &admin, "dq-ns", "dq2").await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = create_in(&second, &admin, "dq-ns", "dq3").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("QuotaExceeded")),
        "{body}"
    );
    let passed = super::tenants::series(&second, &admin, "sbx_quota_checks_total", "passed").await;
    assert!(
        passed.iter().any(|l| super::tenants::value(l) >= 1.0),
        "{passed:?}"
    );
}

/// Reads come from each replica's watch caches (sandbox Deployments, their Pods, sandbox
/// VolumeSnapshots): what one replica writes shows on the other, what is deleted behind sbx's
/// back goes from both, and a VolumeSnapshot that is not sbx's is never listed.
#[tokio::test]
async fn every_replica_reads_what_the_cluster_holds() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&["rd-ns"]).await;
    let client = cluster.client.clone();
    let first = start();
    let admin = bootstrap_token(&client).await;
    let second = start();
    let (status, body) = call(
        &first,
        &admin,
        M::POST,
        "/api/v1/sandboxes",
        Some(json!({"name": "w", "namespace": "rd-ns", "image": "busybox:1.36"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let snapshots = volume_snapshots(&client, "rd-ns");
    let foreign: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
        "metadata": {"name": "foreign", "namespace": "rd-ns"},
        "spec": {"volumeSnapshotClassName": "longhorn",
                 "source": {"persistentVolumeClaimName": "w-root-lh"}}}))
    .unwrap();
    snapshots
        .create(&Default::default(), &foreign)
        .await
        .unwrap();
    let (status, body) = call(
        &first,
        &admin,
        M::POST,
        "/api/v1/sandboxes/w/snapshot",
        Some(json!({"snapshot_name": "s", "namespace": "rd-ns"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // The writer reads its own writes at once; the other replica once its watch shows them.
    let status_of = |daemon, path| get_status(daemon, &admin, path);
    for path in [
        "/api/v1/sandboxes/w?namespace=rd-ns",
        "/api/v1/snapshots/s?namespace=rd-ns",
    ] {
        assert_eq!(status_of(&first, path).await, 200, "{path} on the writer");
        eventually(|| status_of(&second, path), 200, path).await;
    }
    for daemon in [&first, &second] {
        let (status, body) = call(
            daemon,
            &admin,
            M::GET,
            "/api/v1/snapshots?namespace=rd-ns",
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let names: Vec<&str> = body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["s"], "the foreign VolumeSnapshot is not sbx's");
    }
    // Deleted behind sbx's back: gone from both replicas.
    snapshots.delete("s", &Default::default()).await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "rd-ns");
    deployments.delete("w", &Default::default()).await.unwrap();
    for daemon in [&first, &second] {
        for path in [
            "/api/v1/sandboxes/w?namespace=rd-ns",
            "/api/v1/snapshots/s?namespace=rd-ns",
        ] {
            eventually(|| status_of(daemon, path), 404, path).await;
        }
    }
}

/// Internal TLS (issue 43, point 19) between two replicas: the first to start makes the
/// certificates (the Secret `kube-system/sbx-internal-tls`, the agents' pair copied to the
/// agents' namespace) and the other reads them; a tenant's creates are passed to the holder
/// of its quota Lease at its `https` internal listener, which refuses plain HTTP and a client
/// without the replicas' certificate before any request is read.
#[tokio::test]
async fn passed_requests_go_over_internal_tls() {
    use k8s_openapi::api::core::v1::Secret;
    use reqwest::Method as M;
    const AGENTS: &str = "tls-agents";
    let cluster = Cluster::take(&["tls-ns", AGENTS]).await;
    let client = cluster.client.clone();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &Default::default(),
            &serde_json::from_value(json!({"metadata": {"name": AGENTS}})).unwrap(),
        )
        .await
        .unwrap();
    // What deploy/rbac.yaml grants in `sbx-agent`, in this test's agents' namespace.
    common::grant_agents_role_in(AGENTS).await;
    let config = format!(
        "[kubernetes]\ninternalTls = true\ninternalListen = \"127.0.0.1:0\"\nagentNamespace = \"{AGENTS}\"\n"
    );
    let first = Daemon::start_on_kubernetes(&config);
    let second = Daemon::start_on_kubernetes(&config);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    let made = secrets.get("sbx-internal-tls").await.unwrap();
    let data = made.data.unwrap();
    for key in ["ca.crt", "tls.crt", "tls.key", "agent.crt", "agent.key"] {
        assert!(data.contains_key(key), "no {key}");
    }
    assert!(
        !data.keys().any(|k| k.starts_with("ca.key")),
        "the CA's key is kept"
    );
    let agents: Api<Secret> = Api::namespaced(client.clone(), AGENTS);
    let copied = agents.get("sbx-agent-tls").await.unwrap().data.unwrap();
    assert_eq!(copied["ca.crt"], data["ca.crt"]);
    assert_eq!(copied["tls.crt"], data["agent.crt"]);
    assert!(
        !copied.contains_key("agent.key") && copied["tls.key"] != data["tls.key"],
        "the agents got the replicas' key"
    );

    let admin = bootstrap_token(&client).await;
    let (status, body) = call(
        &first,
        &admin,
        M::POST,
        "/api/v1/tenants",
        Some(
            json!({"name": "tls", "spec": {"namespaces": ["tls-ns"], "quotas": {"sandboxes": 5}}}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let replicas = [&first, &second];
    let creates = (0..20).map(|i| {
        let (daemon, admin) = (replicas[i % 2], admin.clone());
        async move {
            call(
                daemon,
                &admin,
                M::POST,
                "/api/v1/sandboxes",
                Some(
                    json!({"name": format!("t{i}"), "namespace": "tls-ns", "image": "busybox",
                            "backend": "kata-firecracker-devmapper"}),
                ),
            )
            .await
        }
    });
    let outcomes = futures_util::future::join_all(creates).await;
    let made = outcomes.iter().filter(|(s, _)| *s == 201).count();
    assert_eq!(made, 5, "{outcomes:?}");
    let mut passed = 0.0;
    for daemon in replicas {
        for line in super::tenants::series(daemon, &admin, "sbx_quota_checks_total", "lease=").await
        {
            if line.contains("lease=\"passed\"") {
                passed += super::tenants::value(&line);
            }
        }
    }
    assert!(passed >= 1.0, "no create was passed to the Lease's holder");
    // The holder named itself at its internal listener, over https.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "kube-system");
    let url = leases
        .get("sbx-quota-tls")
        .await
        .unwrap()
        .metadata
        .annotations
        .and_then(|a| a.get("sbx.io/holder-url").cloned())
        .expect("the holder's URL");
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    assert!(replicas.iter().all(|d| d.url != url), "{url}");
    // There, plain HTTP and a TLS client without the replicas' certificate get no answer.
    let plain = reqwest::Client::new()
        .get(format!("{}/health", url.replacen("https", "http", 1)))
        .send()
        .await;
    assert!(plain.is_err(), "{plain:?}");
    let ca = String::from_utf8(data["ca.crt"].0.clone()).unwrap();
    let anonymous = reqwest::Client::builder()
        .tls_backend_preconfigured(
            sbx::shared::tls::client_config(&ca, sbx::shared::tls::REPLICA_NAME, None).unwrap(),
        )
        .build()
        .unwrap()
        .get(format!("{url}/health"))
        .send()
        .await;
    assert!(anonymous.is_err(), "{anonymous:?}");
    drop((first, second));
    drop(cluster);
}
