//! The test cluster's storage with plain Kubernetes objects, on its real node
//! (`scripts/k8s-testenv`): StorageClass and VolumeSnapshotClass `longhorn` are served by the
//! test env's CSI driver with the real external-provisioner, csi-snapshotter and
//! snapshot-controller, and the real kubelet publishes the volumes. A PVC's volume is a
//! directory on this host that a Pod writes to; a VolumeSnapshot of it is a copy (ready, its
//! restoreSize the bytes it holds); a PVC restored from the snapshot holds what was written
//! before the snapshot and not what was written after; a clone of the PVC holds all of it and
//! its own writes stay its own; deleting the objects removes the directories. No sbx involved:
//! what sbx's kata-qemu-longhorn sandboxes stand on.
mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{cluster, test_registry};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, LogParams, PostParams};
use serde_json::json;

const NAMESPACE: &str = "csi-storage";
/// The driver's name (`scripts/k8s-testenv`: CSI_DRIVER).
const DRIVER: &str = "csi.testenv.sbx.io";
/// The real node's label and taint.
const REAL_LABEL: &str = "sbx.io/testenv-node";

fn volume_snapshots(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NAMESPACE,
        &ApiResource {
            group: "snapshot.storage.k8s.io".into(),
            version: "v1".into(),
            api_version: "snapshot.storage.k8s.io/v1".into(),
            kind: "VolumeSnapshot".into(),
            plural: "volumesnapshots".into(),
        },
    )
}

fn snapshot_contents(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource {
            group: "snapshot.storage.k8s.io".into(),
            version: "v1".into(),
            api_version: "snapshot.storage.k8s.io/v1".into(),
            kind: "VolumeSnapshotContent".into(),
            plural: "volumesnapshotcontents".into(),
        },
    )
}

/// The test env's state dir (the kubeconfig's dir): the driver keeps volumes in
/// `csi/volumes/<PV name>` and snapshots in `csi/snapshots/snapshot-<VolumeSnapshot uid>` (the
/// names the external-provisioner and the csi-snapshotter give them).
fn state_dir() -> PathBuf {
    Path::new(&common::kubeconfig())
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Polls `check` every 100 ms until it gives a value; fails after `limit` saying `what`.
async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            started.elapsed() < limit,
            "{what}: not after {}s",
            limit.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Deletes the namespace when dropped (also when the test fails): its Pods, PVCs and
/// VolumeSnapshots go with it, and so (reclaimPolicy and deletionPolicy Delete) their volumes.
struct NamespaceGuard;

impl Drop for NamespaceGuard {
    fn drop(&mut self) {
        std::thread::spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async {
                    let namespaces: Api<Namespace> = Api::all(cluster().await);
                    let _ = namespaces.delete(NAMESPACE, &DeleteParams::default()).await;
                })
        })
        .join()
        .unwrap();
    }
}

/// A PVC of class longhorn, empty or from `source` (a VolumeSnapshot or a PVC).
fn pvc(name: &str, source: Option<(&str, &str)>) -> PersistentVolumeClaim {
    let mut spec = json!({
        "storageClassName": "longhorn",
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    });
    if let Some((kind, name)) = source {
        spec["dataSource"] = match kind {
            "VolumeSnapshot" => {
                json!({"apiGroup": "snapshot.storage.k8s.io", "kind": kind, "name": name})
            }
            _ => json!({"kind": kind, "name": name}),
        };
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }))
    .unwrap()
}

/// Waits until the PVC is Bound; its PV.
async fn bound(client: &kube::Client, name: &str) -> PersistentVolume {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NAMESPACE);
    let started = Instant::now();
    let volume = wait_for(
        &format!("PVC {name} Bound"),
        Duration::from_secs(60),
        || {
            let pvcs = pvcs.clone();
            async move {
                let pvc = pvcs.get(name).await.unwrap();
                (pvc.status?.phase.as_deref() == Some("Bound")).then(|| pvc.spec?.volume_name)?
            }
        },
    )
    .await;
    eprintln!("PVC {name} Bound after {:?}", started.elapsed());
    let pv = Api::<PersistentVolume>::all(client.clone())
        .get(&volume)
        .await
        .unwrap();
    let csi = pv.spec.clone().unwrap().csi.expect("a CSI volume");
    assert_eq!(csi.driver, DRIVER);
    assert_eq!(
        csi.volume_handle, volume,
        "the volume's id is the PV's name"
    );
    pv
}

/// Runs `script` in a busybox Pod on the real node with the PVC at /data, until it exits 0;
/// its output.
async fn run(client: &kube::Client, name: &str, claim: &str, script: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "nodeSelector": {REAL_LABEL: "real"},
            "tolerations": [{"key": REAL_LABEL, "operator": "Equal", "value": "real", "effect": "NoSchedule"}],
            "securityContext": {"runAsUser": 0},
            "containers": [{
                "name": "main",
                "image": format!("{}/sbx-test/busybox:latest", test_registry()),
                "command": ["sh", "-c", script],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        },
    }))
    .unwrap();
    // Refused until the namespace's `default` ServiceAccount exists (~1 s after the namespace).
    wait_for(
        &format!("Pod {name} created"),
        Duration::from_secs(20),
        || {
            let (pods, pod) = (pods.clone(), pod.clone());
            async move {
                match pods.create(&PostParams::default(), &pod).await {
                    Ok(_) => Some(()),
                    Err(kube::Error::Api(e)) if e.message.contains("service account") => None,
                    Err(e) => panic!("create Pod {name}: {e}"),
                }
            }
        },
    )
    .await;
    let started = Instant::now();
    let phase = wait_for(&format!("Pod {name} done"), Duration::from_secs(90), || {
        let pods = pods.clone();
        async move {
            let phase = pods.get(name).await.unwrap().status?.phase?;
            matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
        }
    })
    .await;
    let log = pods.logs(name, &LogParams::default()).await.unwrap();
    assert_eq!(phase, "Succeeded", "Pod {name}: {log}");
    let node = pods.get(name).await.unwrap().spec.unwrap().node_name;
    assert_eq!(
        node,
        std::env::var("SBX_TEST_REAL_NODE").ok(),
        "Pod {name}'s node"
    );
    eprintln!("Pod {name} done after {:?}", started.elapsed());
    pods.delete(name, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    log
}

#[tokio::test]
async fn volumes_snapshots_and_clones_carry_the_bytes() {
    std::env::var("SBX_TEST_REAL_NODE").expect(
        "SBX_TEST_REAL_NODE is not set: run scripts/test, or \
         `eval \"$(scripts/k8s-testenv start)\"` (it starts the real node)",
    );
    let client = cluster().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    // What an earlier run left goes first.
    if namespaces.get_opt(NAMESPACE).await.unwrap().is_some() {
        let _ = namespaces.delete(NAMESPACE, &DeleteParams::default()).await;
        wait_for(
            "the old namespace gone",
            Duration::from_secs(120),
            || async {
                namespaces
                    .get_opt(NAMESPACE)
                    .await
                    .unwrap()
                    .is_none()
                    .then_some(())
            },
        )
        .await;
    }
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap(),
        )
        .await
        .unwrap();
    let _guard = NamespaceGuard;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NAMESPACE);
    let snapshots = volume_snapshots(&client);
    let volumes = state_dir().join("csi/volumes");

    // A PVC of class longhorn: provisioned at once (Immediate), a directory on this host.
    pvcs.create(&PostParams::default(), &pvc("data", None))
        .await
        .unwrap();
    let data_pv = bound(&client, "data").await;
    let data_dir = volumes.join(data_pv.metadata.name.as_ref().unwrap());
    assert!(data_dir.is_dir(), "{} is not there", data_dir.display());

    // A Pod on the real node writes to it: the bytes land in that directory.
    let out = run(
        &client,
        "writer",
        "data",
        "echo before >/data/file && mkdir /data/d && head -c 1048576 /dev/urandom >/data/d/blob \
         && sync && hostname",
    )
    .await;
    assert_eq!(out.trim(), "writer");
    assert_eq!(
        std::fs::read_to_string(data_dir.join("file")).unwrap(),
        "before\n"
    );
    assert_eq!(
        std::fs::metadata(data_dir.join("d/blob")).unwrap().len(),
        1 << 20
    );

    // A VolumeSnapshot: a copy, ready, its restoreSize the bytes it holds.
    let snapshot: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
        "metadata": {"name": "snap", "namespace": NAMESPACE},
        "spec": {"volumeSnapshotClassName": "longhorn", "source": {"persistentVolumeClaimName": "data"}},
    }))
    .unwrap();
    snapshots
        .create(&PostParams::default(), &snapshot)
        .await
        .unwrap();
    let started = Instant::now();
    let status = wait_for("VolumeSnapshot snap ready", Duration::from_secs(60), || {
        let snapshots = snapshots.clone();
        async move {
            let status = snapshots.get("snap").await.unwrap().data["status"].clone();
            (status["readyToUse"] == json!(true)).then_some(status)
        }
    })
    .await;
    eprintln!("VolumeSnapshot snap ready after {:?}", started.elapsed());
    let restore_size: k8s_openapi::apimachinery::pkg::api::resource::Quantity =
        serde_json::from_value(status["restoreSize"].clone()).unwrap();
    let restore_bytes = parse_bytes(&restore_size.0);
    assert!(
        ((1 << 20) + 7..(1 << 20) + 64 * 1024).contains(&restore_bytes),
        "restoreSize {restore_bytes}: the file, the blob and their directories"
    );
    let content = status["boundVolumeSnapshotContentName"]
        .as_str()
        .unwrap()
        .to_string();
    let handle =
        snapshot_contents(&client).get(&content).await.unwrap().data["status"]["snapshotHandle"]
            .as_str()
            .unwrap()
            .to_string();
    let uid = snapshots.get("snap").await.unwrap().metadata.uid.unwrap();
    assert_eq!(
        handle,
        format!("snapshot-{uid}"),
        "the snapshot's id is the csi-snapshotter's name for it"
    );
    let snapshot_dir = state_dir().join("csi/snapshots").join(&handle);
    assert_eq!(
        std::fs::read_to_string(snapshot_dir.join("file")).unwrap(),
        "before\n"
    );

    // Written after the snapshot: not in a restore of it.
    run(
        &client,
        "writer2",
        "data",
        "echo after >/data/file && echo new >/data/new && sync",
    )
    .await;

    // A PVC restored from the snapshot and a clone of the PVC.
    pvcs.create(
        &PostParams::default(),
        &pvc("restored", Some(("VolumeSnapshot", "snap"))),
    )
    .await
    .unwrap();
    pvcs.create(
        &PostParams::default(),
        &pvc("clone", Some(("PersistentVolumeClaim", "data"))),
    )
    .await
    .unwrap();
    let restored_pv = bound(&client, "restored").await;
    let clone_pv = bound(&client, "clone").await;
    let read = "cat /data/file; ls /data; wc -c </data/d/blob; md5sum /data/d/blob | cut -d' ' -f1";
    let blob_md5 = run(&client, "read-data", "data", read).await;
    let blob_md5 = blob_md5.lines().last().unwrap().to_string();
    let out = run(&client, "read-restored", "restored", read).await;
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["before", "d", "file", "1048576", blob_md5.as_str()],
        "the restore holds what was written before the snapshot, nothing after"
    );
    let out = run(
        &client,
        "read-clone",
        "clone",
        &format!("{read}; echo mine >/data/file"),
    )
    .await;
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["after", "d", "file", "new", "1048576", blob_md5.as_str()],
        "the clone holds everything its source held"
    );
    assert_eq!(
        std::fs::read_to_string(data_dir.join("file")).unwrap(),
        "after\n",
        "the clone's writes stay its own"
    );
    assert_eq!(
        std::fs::read_to_string(
            volumes
                .join(clone_pv.metadata.name.as_ref().unwrap())
                .join("file")
        )
        .unwrap(),
        "mine\n"
    );

    // Deleting the objects removes the directories (reclaimPolicy and deletionPolicy Delete).
    snapshots
        .delete("snap", &DeleteParams::default())
        .await
        .unwrap();
    for name in ["data", "restored", "clone"] {
        pvcs.delete(name, &DeleteParams::default()).await.unwrap();
    }
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let mut dirs = vec![snapshot_dir];
    for pv in [&data_pv, &restored_pv, &clone_pv] {
        let name = pv.metadata.name.clone().unwrap();
        dirs.push(volumes.join(&name));
        wait_for(
            &format!("PV {name} deleted"),
            Duration::from_secs(60),
            || {
                let (pvs, name) = (pvs.clone(), name.clone());
                async move { pvs.get_opt(&name).await.unwrap().is_none().then_some(()) }
            },
        )
        .await;
    }
    wait_for(
        "VolumeSnapshotContent deleted",
        Duration::from_secs(60),
        || {
            let content = content.clone();
            let contents = snapshot_contents(&client);
            async move {
                contents
                    .get_opt(&content)
                    .await
                    .unwrap()
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
    for dir in dirs {
        assert!(!dir.exists(), "{} is still there", dir.display());
    }
}

/// Bytes of a quantity ("1049600", "1Mi", "2Gi", "1k").
fn parse_bytes(q: &str) -> u64 {
    let (digits, unit) = q.split_at(q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len()));
    let n: u64 = digits.parse().unwrap();
    n * match unit {
        "" => 1,
        "k" => 1000,
        "Ki" => 1 << 10,
        "M" => 1000 * 1000,
        "Mi" => 1 << 20,
        "G" => 1000 * 1000 * 1000,
        "Gi" => 1 << 30,
        other => panic!("unit {other} of {q}"),
    }
}
