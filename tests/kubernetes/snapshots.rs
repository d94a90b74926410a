//! Snapshots as VolumeSnapshots; forks, restores and GC.
use super::*;

/// Snapshots are VolumeSnapshots of the root PVC with the `sbx.io/*` annotations; a fork is a
/// PVC cloned from one (the test cluster's CSI driver and sidecars: PVCs bind and snapshots
/// become ready, except a PVC cloned from a snapshot named `never-binds`, the driver's injected
/// fault, which stays Pending); a restore rebuilds the sandbox from the annotations with its
/// overrides; GC deletes leftover fork snapshots; one replica holds the leader Lease.
#[tokio::test]
async fn snapshots_are_volume_snapshots() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&["vs-ns"]).await;
    let client = cluster.client.clone();
    let daemon = Daemon::start_on_kubernetes("[kubernetes]\nforkTimeout = \"4s\"\n");
    let admin = bootstrap_token(&client).await;
    let post = |path: String, body: Value| {
        let (daemon, admin) = (&daemon, admin.clone());
        async move { call(daemon, &admin, M::POST, &path, Some(body)).await }
    };
    let env_dir = tempfile::tempdir().unwrap();
    let env_file = env_dir.path().join("app.env");
    std::fs::write(&env_file, "TOKEN=s3cret\n").unwrap();
    let (status, body) = post(
        "/api/v1/sandboxes".into(),
        json!({"name": "src", "namespace": "vs-ns", "image": "busybox:1.36",
               "limits": {"cpu": "500m", "memory": "256Mi"}, "env_file": env_file.to_str().unwrap()}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let snapshots = volume_snapshots(&client, "vs-ns");
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "vs-ns");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "vs-ns");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "vs-ns");

    // A named snapshot: class longhorn, the root PVC as source, the annotations a restore
    // reads, and a copy of the env Secret.
    let (status, body) = post(
        "/api/v1/sandboxes/src/snapshot".into(),
        json!({"snapshot_name": "s1", "namespace": "vs-ns"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let s1 = snapshots.get("s1").await.unwrap();
    // The 201 comes once the driver has cut it: its point in time is taken.
    assert!(
        s1.data["status"]["creationTime"].is_string(),
        "answered before the CSI driver cut it: {:?}",
        s1.data["status"]
    );
    assert_eq!(s1.data["spec"]["volumeSnapshotClassName"], "longhorn");
    assert_eq!(
        s1.data["spec"]["source"]["persistentVolumeClaimName"],
        "src-root-lh"
    );
    let a = s1.metadata.annotations.clone().unwrap();
    for (key, value) in [
        ("sbx.io/kind", "named"),
        ("sbx.io/source-sandbox", "src"),
        ("sbx.io/source-image", "busybox:1.36"),
        ("sbx.io/source-backend", "kata-qemu-longhorn"),
        ("sbx.io/source-cpu", "500m"),
        ("sbx.io/source-memory", "256Mi"),
    ] {
        assert_eq!(a.get(key).map(String::as_str), Some(value), "{key}: {a:?}");
    }
    assert_eq!(
        secrets.get("s1.snapshot-env").await.unwrap().data.unwrap()["TOKEN"].0,
        b"s3cret"
    );

    // Fork: a PVC cloned from a `fork` snapshot, Bound before the clone's Deployment exists;
    // the snapshot deleted once it is; the env Secret copied.
    let (status, body) = post(
        "/api/v1/sandboxes/src/fork".into(),
        json!({"new_name": "cl", "namespace": "vs-ns"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let clone_pvc = pvcs.get("cl-root-lh").await.unwrap();
    let source = clone_pvc.spec.unwrap().data_source.unwrap();
    assert_eq!(source.kind, "VolumeSnapshot");
    assert!(source.name.starts_with("src-fork-"), "{source:?}");
    assert_eq!(clone_pvc.status.unwrap().phase.as_deref(), Some("Bound"));
    assert!(snapshots.get_opt(&source.name).await.unwrap().is_none());
    assert!(deployments.get_opt("cl").await.unwrap().is_some());
    assert_eq!(
        secrets.get("cl-env").await.unwrap().data.unwrap()["TOKEN"].0,
        b"s3cret"
    );
    // A clone whose PVC never binds: 504 after forkTimeout, and nothing of it is left.
    let started = Instant::now();
    let (status, body) = post(
        "/api/v1/sandboxes/src/fork".into(),
        json!({"new_name": "nb", "namespace": "vs-ns", "snapshot": "never-binds"}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (504, Some("GatewayTimeout")),
        "{body}"
    );
    assert!(started.elapsed() >= Duration::from_secs(4));
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nb-root-lh"),
        "{body}"
    );
    assert!(pvcs.get_opt("nb-root-lh").await.unwrap().is_none());
    assert!(deployments.get_opt("nb").await.unwrap().is_none());
    assert!(snapshots.get_opt("never-binds").await.unwrap().is_none());
    // Warm fork is sbxd's.
    let (status, _) = post(
        "/api/v1/sandboxes/src/fork".into(),
        json!({"new_name": "w", "namespace": "vs-ns", "warm": true}),
    )
    .await;
    assert_eq!(status, 400);

    // Restore with overrides: they win over the annotations.
    let (status, body) = post(
        "/api/v1/snapshots/s1/restore".into(),
        json!({"new_sandbox_name": "re", "namespace": "vs-ns", "overrides": {
            "image": "alpine:3.20", "limits": {"cpu": "250m"}, "root_disk_size": "20Gi",
            "sidecar": "docker", "cmd": ["sleep", "1d"]}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let pod = d_template(&deployments, "re").await;
    let main = &pod.containers[0];
    assert_eq!(main.image.as_deref(), Some("alpine:3.20"));
    assert_eq!(main.args.clone().unwrap(), ["sleep", "1d"]);
    let limits = main.resources.clone().unwrap().limits.unwrap();
    assert_eq!(
        (limits["cpu"].0.as_str(), limits["memory"].0.as_str()),
        ("250m", "256Mi")
    );
    assert_eq!(pod.containers[1].name, "dind");
    // The sidecar's log is readable by its container's name; a container the sandbox does
    // not have is a 400 naming those it has (issue 14, defect 8).
    let started = Instant::now();
    let (status, body) = loop {
        let (status, body) = call(
            &daemon,
            &admin,
            M::GET,
            "/api/v1/sandboxes/re/logs?namespace=vs-ns&container=dind",
            None,
        )
        .await;
        // 404 until the restored sandbox's Pod exists.
        if status != 404 || started.elapsed() > Duration::from_secs(20) {
            break (status, body);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, 200, "{body}");
    assert!(body["data"]["logs"].is_string(), "{body}");
    let (status, body) = call(
        &daemon,
        &admin,
        M::GET,
        "/api/v1/sandboxes/re/logs?namespace=vs-ns&container=nope",
        None,
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("its containers: sandbox, dind"),
        "{body}"
    );
    let re_pvc = pvcs.get("re-root-lh").await.unwrap().spec.unwrap();
    assert_eq!(re_pvc.data_source.unwrap().name, "s1");
    assert_eq!(
        re_pvc.resources.unwrap().requests.unwrap()["storage"].0,
        "20Gi"
    );
    assert_eq!(
        secrets.get("re-env").await.unwrap().data.unwrap()["TOKEN"].0,
        b"s3cret"
    );
    // A snapshot without sbx.io/source-image needs an image override; one taken on kfd
    // cannot be restored.
    for (name, annotations) in [
        (
            "bare",
            json!({"sbx.io/kind": "named", "sbx.io/source-sandbox": "src"}),
        ),
        (
            "fc-snap",
            json!({"sbx.io/kind": "named", "sbx.io/source-sandbox": "src",
                   "sbx.io/source-image": "busybox", "sbx.io/source-backend": "kata-firecracker-devmapper"}),
        ),
    ] {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "sbx"}, "annotations": annotations},
            "spec": {"volumeSnapshotClassName": "longhorn", "source": {"persistentVolumeClaimName": "src-root-lh"}},
        }))
        .unwrap();
        snapshots
            .create(&Default::default(), &object)
            .await
            .unwrap();
        let (status, body) = post(
            format!("/api/v1/snapshots/{name}/restore"),
            json!({"new_sandbox_name": "r2", "namespace": "vs-ns"}),
        )
        .await;
        assert_eq!(status, 400, "{name}: {body}");
    }
    let (status, body) = post(
        "/api/v1/snapshots/bare/restore".into(),
        json!({"new_sandbox_name": "r2", "namespace": "vs-ns", "overrides": {"image": "busybox:1.36"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    // kfd has no root volume: no snapshot, no fork.
    let (status, _) = post(
        "/api/v1/sandboxes".into(),
        json!({"name": "fc", "namespace": "vs-ns", "image": "busybox", "backend": "kata-firecracker-devmapper"}),
    )
    .await;
    assert_eq!(status, 201);
    assert!(pvcs.get_opt("fc-root-lh").await.unwrap().is_none());
    for (path, body) in [
        (
            "/api/v1/sandboxes/fc/snapshot",
            json!({"snapshot_name": "x", "namespace": "vs-ns"}),
        ),
        (
            "/api/v1/sandboxes/fc/fork",
            json!({"new_name": "x", "namespace": "vs-ns"}),
        ),
    ] {
        let (status, response) = post(path.into(), body).await;
        assert_eq!(status, 400, "{path}: {response}");
    }
    // A source whose root PVC is gone: fork is 404.
    pvcs.delete("re-root-lh", &Default::default())
        .await
        .unwrap();
    let (status, body) = post(
        "/api/v1/sandboxes/re/fork".into(),
        json!({"new_name": "x", "namespace": "vs-ns"}),
    )
    .await;
    assert_eq!(status, 404, "{body}");

    // GC: a `fork` snapshot left behind an hour ago goes; named ones stay.
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
        "metadata": {"name": "src-fork-1", "labels": {"app.kubernetes.io/managed-by": "sbx"},
                     "annotations": {"sbx.io/kind": "fork", "sbx.io/source-sandbox": "src"}},
        "spec": {"volumeSnapshotClassName": "longhorn", "source": {"persistentVolumeClaimName": "src-root-lh"}},
    }))
    .unwrap();
    snapshots
        .create(&Default::default(), &object)
        .await
        .unwrap();
    let started = Instant::now();
    while snapshots.get("src-fork-1").await.unwrap().data["status"]["readyToUse"] != json!(true) {
        assert!(started.elapsed() < Duration::from_secs(30));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let hour_ago = json!({"status": {"creationTime": "2020-01-01T00:00:00Z"}});
    snapshots
        .patch_status(
            "src-fork-1",
            &PatchParams::default(),
            &Patch::Merge(&hour_ago),
        )
        .await
        .unwrap();
    let (status, body) = post(
        "/api/v1/snapshots/gc".into(),
        json!({"namespace": "vs-ns", "dry_run": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["results"][0]["name"], "src-fork-1", "{body}");
    assert_eq!(body["data"]["results"][0]["deleted"], false, "{body}");
    assert!(snapshots.get_opt("src-fork-1").await.unwrap().is_some());
    let (_, body) = post("/api/v1/snapshots/gc".into(), json!({"namespace": "vs-ns"})).await;
    assert_eq!(
        body["data"]["results"].as_array().unwrap().len(),
        1,
        "{body}"
    );
    assert_eq!(body["data"]["results"][0]["deleted"], true, "{body}");
    assert!(snapshots.get_opt("src-fork-1").await.unwrap().is_none());
    assert!(snapshots.get_opt("s1").await.unwrap().is_some());

    // Snapshot delete takes its env copy along.
    let (status, _) = call(
        &daemon,
        &admin,
        M::DELETE,
        "/api/v1/snapshots/s1?namespace=vs-ns",
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert!(secrets.get_opt("s1.snapshot-env").await.unwrap().is_none());

    // The leader Lease is this (only) replica's.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "kube-system");
    let started = Instant::now();
    loop {
        let holder = leases
            .get_opt("sbx-leader")
            .await
            .unwrap()
            .and_then(|l| l.spec?.holder_identity);
        if holder.is_some_and(|h| h.contains(&format!("-{}-", daemon.pid()))) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no leader");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, body) = call(
        &daemon,
        &admin,
        M::DELETE,
        "/api/v1/sandboxes?namespace=vs-ns",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
}
