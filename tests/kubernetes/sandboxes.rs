//! Sandboxes as Deployments (with their root PVCs, env Secrets and NetworkPolicies).
use super::*;

#[tokio::test]
async fn sandboxes_are_deployments() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&["sb-ns"]).await;
    let client = cluster.client.clone();
    let daemon = start();
    let admin = bootstrap_token(&client).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "sb-ns");
    let create = |body: Value| {
        let (daemon, admin) = (&daemon, admin.clone());
        async move { call(daemon, &admin, M::POST, "/api/v1/sandboxes", Some(body)).await }
    };
    let (status, body) = create(json!({
        "name": "web", "namespace": "sb-ns", "image": "busybox:1.36",
        "limits": {"cpu": "500m", "memory": "256Mi"}, "cap_add": ["NET_BIND_SERVICE"],
    }))
    .await;
    assert_eq!(status, 201, "{body}");
    // The Deployment: the backend's RuntimeClass, the limits, the user and capabilities.
    let d = deployments.get("web").await.unwrap();
    assert_eq!(d.spec.replicas, Some(1));
    let pod = d.spec.template.spec.clone().unwrap();
    assert_eq!(pod.runtime_class_name.as_deref(), Some("kata-qemu"));
    assert_eq!(pod.automount_service_account_token, Some(false));
    let container = &pod.containers[0];
    assert_eq!(container.image.as_deref(), Some("busybox:1.36"));
    let limits = container.resources.clone().unwrap().limits.unwrap();
    assert_eq!(
        (limits["cpu"].0.as_str(), limits["memory"].0.as_str()),
        ("500m", "256Mi")
    );
    let caps = container
        .security_context
        .clone()
        .unwrap()
        .capabilities
        .unwrap();
    assert_eq!(caps.drop.unwrap(), ["ALL"]);
    assert_eq!(caps.add.unwrap(), ["NET_BIND_SERVICE"]);
    assert_eq!(
        d.metadata.annotations.unwrap()["sbx.io/backend"],
        "kata-qemu-longhorn"
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    assert!(
        namespaces.get("sb-ns").await.is_ok(),
        "the namespace was created"
    );

    let get = |name: &'static str| {
        let (daemon, admin) = (&daemon, admin.clone());
        async move {
            call(
                daemon,
                &admin,
                M::GET,
                &format!("/api/v1/sandboxes/{name}?namespace=sb-ns"),
                None,
            )
            .await
        }
    };
    let (status, body) = get("web").await;
    assert_eq!(status, 200, "{body}");
    // Pending until KWOK reports the Pod, which may already have happened (a loaded machine
    // takes longer to get here than the controllers take).
    let state = (
        body["data"]["status"].as_str(),
        body["data"]["ready"].as_str(),
    );
    assert!(
        [
            (Some("Pending"), Some("False")),
            (Some("Running"), Some("True"))
        ]
        .contains(&state),
        "{body}"
    );
    assert_eq!(body["data"]["backend"], "kata-qemu-longhorn");
    // The controllers make its ReplicaSet and Pod, the scheduler places it on a KWOK node and
    // KWOK (playing the kubelet) reports it Running and Ready.
    let running = |name: &'static str| {
        let get = &get;
        async move {
            let started = Instant::now();
            loop {
                let (_, body) = get(name).await;
                if body["data"]["status"] == "Running" && body["data"]["ready"] == "True" {
                    return body;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "{name}: {body}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    running("web").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "sb-ns");
    let web_pods = pods
        .list(&ListParams::default().labels("sbx.io/sandbox=web"))
        .await
        .unwrap()
        .items;
    assert_eq!(web_pods.len(), 1);
    assert!(
        web_pods[0]
            .spec
            .as_ref()
            .unwrap()
            .node_name
            .as_deref()
            .is_some_and(|n| n.starts_with("node-")),
        "{:?}",
        web_pods[0].spec
    );
    // kql: the root PVC `<sandbox>-root-lh` (class longhorn), mounted in the container.
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "sb-ns");
    let pvc = pvcs.get("web-root-lh").await.unwrap().spec.unwrap();
    assert_eq!(pvc.storage_class_name.as_deref(), Some("longhorn"));
    assert_eq!(
        pvc.resources.unwrap().requests.unwrap()["storage"].0,
        "10Gi"
    );
    let mounts = d_template(&deployments, "web").await.containers[0]
        .volume_mounts
        .clone()
        .unwrap();
    assert_eq!(mounts[0].mount_path, "/workspace");

    // A container that keeps crashing (KWOK reports the image `sbx-test/crashloop` as the
    // kubelet reports a crash loop): Failed with the kubelet's reason, restarts counted.
    let (status, body) =
        create(json!({"name": "crashy", "namespace": "sb-ns", "image": "sbx-test/crashloop"}))
            .await;
    assert_eq!(status, 201, "{body}");
    let started = Instant::now();
    let body = loop {
        let (_, body) = get("crashy").await;
        if body["data"]["status"] == "Failed" {
            break body;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(body["data"]["restarts"].as_i64().unwrap() >= 3, "{body}");
    assert!(
        body["data"]["error_message"]
            .as_str()
            .unwrap()
            .starts_with("CrashLoopBackOff"),
        "{body}"
    );
    assert_eq!(
        call(
            &daemon,
            &admin,
            M::DELETE,
            "/api/v1/sandboxes/crashy?namespace=sb-ns",
            None
        )
        .await
        .0,
        200
    );

    // The other backend, a non-root sandbox, and what is refused.
    let (status, body) = create(json!({"name": "fc", "namespace": "sb-ns", "image": "busybox", "backend": "kata-firecracker-devmapper", "pod_non_root": true})).await;
    assert_eq!(status, 201, "{body}");
    let pod = deployments
        .get("fc")
        .await
        .unwrap()
        .spec
        .template
        .spec
        .unwrap();
    assert_eq!(pod.runtime_class_name.as_deref(), Some("kata-fc"));
    let security = pod.security_context.unwrap();
    assert_eq!(
        (security.run_as_user, security.fs_group),
        (Some(65532), Some(65532))
    );
    for (body, says) in [
        (
            json!({"name": "web", "namespace": "sb-ns", "image": "busybox"}),
            "already exists",
        ),
        (
            json!({"name": "x", "namespace": "sb-ns", "image": "busybox", "backend": "sbxd-fc"}),
            "kata-qemu-longhorn",
        ),
    ] {
        let (status, response) = create(body.clone()).await;
        assert_eq!(status, 400, "{body} -> {response}");
        assert!(
            response["error"]["message"]
                .as_str()
                .unwrap()
                .contains(says),
            "{response}"
        );
    }
    // env_file -> a Secret the container reads; before_script -> a postStart hook and the
    // readiness probe waiting for it; egress_whitelist -> a NetworkPolicy (+ DNS).
    let env_dir = tempfile::tempdir().unwrap();
    let env_file = env_dir.path().join("app.env");
    std::fs::write(&env_file, "TOKEN=s3cret\nMODE=test\n").unwrap();
    let (status, body) = create(json!({
        "name": "full", "namespace": "sb-ns", "image": "busybox",
        "env_file": env_file.to_str().unwrap(), "before_script": "echo prepared > /tmp/p",
        "egress_whitelist": ["10.20.0.0/16"],
    }))
    .await;
    assert_eq!(status, 201, "{body}");
    let pod = deployments
        .get("full")
        .await
        .unwrap()
        .spec
        .template
        .spec
        .unwrap();
    let container = &pod.containers[0];
    assert_eq!(
        container.env_from.clone().unwrap()[0]
            .secret_ref
            .clone()
            .unwrap()
            .name,
        "full-env"
    );
    let hook = container
        .lifecycle
        .clone()
        .unwrap()
        .post_start
        .unwrap()
        .exec
        .unwrap()
        .command
        .unwrap();
    assert!(hook[2].contains("echo prepared > /tmp/p"), "{hook:?}");
    assert!(container.readiness_probe.is_some());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "sb-ns");
    let env = secrets.get("full-env").await.unwrap().data.unwrap();
    assert_eq!(env["TOKEN"].0, b"s3cret");
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), "sb-ns");
    let policy =
        serde_json::to_value(policies.get("full-egress").await.unwrap().spec.unwrap()).unwrap();
    // 10.20.0.0/16 lies in RFC 1918, which no sandbox reaches (issue 43): DNS alone is left
    // (tests/kubernetes/network.rs checks the lists).
    assert_eq!(policy["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(policy["egress"].as_array().unwrap().len(), 1, "{policy}");
    assert_eq!(policy["egress"][0]["ports"][0]["port"], 53);
    let (status, _) = create(
        json!({"name": "sealed", "namespace": "sb-ns", "image": "busybox", "egress_whitelist": []}),
    )
    .await;
    assert_eq!(status, 201);
    let sealed =
        serde_json::to_value(policies.get("sealed-egress").await.unwrap().spec.unwrap()).unwrap();
    assert!(
        sealed
            .get("egress")
            .is_none_or(|e| e.as_array().is_some_and(|a| a.is_empty())),
        "{sealed}"
    );
    for name in ["full", "sealed"] {
        let (status, _) = call(
            &daemon,
            &admin,
            M::DELETE,
            &format!("/api/v1/sandboxes/{name}?namespace=sb-ns"),
            None,
        )
        .await;
        assert_eq!(status, 200);
    }
    assert!(secrets.get_opt("full-env").await.unwrap().is_none());
    assert!(policies.get_opt("full-egress").await.unwrap().is_none());
    assert!(policies.get_opt("sealed-egress").await.unwrap().is_none());

    let (status, body) = call(
        &daemon,
        &admin,
        M::GET,
        "/api/v1/sandboxes?all_namespaces=true",
        None,
    )
    .await;
    assert_eq!(status, 200);
    let names: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["namespace"] == "sb-ns")
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fc", "web"], "{body}");

    // Pause scales to zero, resume back to one; pausing a paused sandbox changes nothing.
    let pause = |path: &'static str| {
        let (daemon, admin) = (&daemon, admin.clone());
        async move {
            call(
                daemon,
                &admin,
                M::POST,
                path,
                Some(json!({"namespace": "sb-ns"})),
            )
            .await
        }
    };
    assert_eq!(pause("/api/v1/sandboxes/web/pause").await.0, 200);
    assert_eq!(deployments.get("web").await.unwrap().spec.replicas, Some(0));
    assert_eq!(get("web").await.1["data"]["status"], "Paused");
    assert_eq!(pause("/api/v1/sandboxes/web/pause").await.0, 200);
    assert_eq!(pause("/api/v1/sandboxes/web/resume").await.0, 200);
    assert_eq!(deployments.get("web").await.unwrap().spec.replicas, Some(1));
    // Exec goes through the API server to the node (KWOK runs it on the test host).
    running("web").await;
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/sandboxes/web/exec?namespace=sb-ns",
        Some(json!({"command": "echo through-the-apiserver; exit 7"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["data"]["exit_code"], &body["data"]["stdout"]),
        (&json!(7), &json!("through-the-apiserver\n")),
        "{body}"
    );
    // Delete: the Deployment goes.
    for name in ["web", "fc"] {
        let (status, body) = call(
            &daemon,
            &admin,
            M::DELETE,
            &format!("/api/v1/sandboxes/{name}?namespace=sb-ns"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    assert!(deployments.get_opt("web").await.unwrap().is_none());
    // The root PVC goes too (once its Pod is gone: PVC protection holds it until then).
    let started = Instant::now();
    while pvcs.get_opt("web-root-lh").await.unwrap().is_some() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "web-root-lh stays"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(get("web").await.0, 404);
}

/// A create POSTs the Deployment and the root PVC together: two creates of one name at once
/// leave one sandbox with one volume (the losing create hands its PVC over or deletes it),
/// never a volume of no sandbox; the loser is told the name is taken.
#[tokio::test]
async fn two_creates_of_one_name_at_once_leave_one_sandbox_and_one_volume() {
    use reqwest::Method as M;
    const ROUNDS: usize = 12;
    let cluster = Cluster::take(&["sb-race"]).await;
    let client = cluster.client.clone();
    let daemon = start();
    let admin = bootstrap_token(&client).await;
    let create = |name: String| {
        let (daemon, admin) = (&daemon, admin.clone());
        async move {
            let body = json!({"name": name, "namespace": "sb-race", "image": "busybox:1.36"});
            call(daemon, &admin, M::POST, "/api/v1/sandboxes", Some(body)).await
        }
    };
    for round in 0..ROUNDS {
        let name = format!("race-{round}");
        let (a, b) = tokio::join!(create(name.clone()), create(name.clone()));
        let mut statuses = [a.0, b.0];
        statuses.sort();
        assert_eq!(statuses, [201, 400], "{name}: {a:?} {b:?}");
        let loser = if a.0 == 400 { &a.1 } else { &b.1 };
        assert!(
            loser["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("already exists")),
            "{loser}"
        );
    }
    eprintln!(
        "PVCs handed over: {}",
        daemon.log_text().matches("handed its PVC over").count()
    );
    // Every sandbox has its Deployment and exactly its own PVC, live; no other PVC exists.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "sb-race");
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "sb-race");
    let mut names: Vec<String> = (0..ROUNDS).map(|r| format!("race-{r}")).collect();
    names.sort();
    let mut made: Vec<String> = deployments
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    made.sort();
    assert_eq!(made, names);
    let mut volumes = Vec::new();
    for pvc in pvcs.list(&ListParams::default()).await.unwrap().items {
        assert!(
            pvc.metadata.deletion_timestamp.is_none(),
            "{:?} is being deleted",
            pvc.metadata.name
        );
        volumes.push(pvc.metadata.name.unwrap());
    }
    volumes.sort();
    let wanted: Vec<String> = names.iter().map(|n| format!("{n}-root-lh")).collect();
    assert_eq!(volumes, wanted);
    // And each one runs on its volume.
    for name in &names {
        let started = Instant::now();
        loop {
            let (status, body) = call(
                &daemon,
                &admin,
                M::GET,
                &format!("/api/v1/sandboxes/{name}?namespace=sb-race"),
                None,
            )
            .await;
            assert_eq!(status, 200, "{body}");
            if body["data"]["status"] == "Running" {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{name} never ran: {body}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
