//! Issue 43, points 11 and 12: what a sandbox's Pod may do (seccomp, capabilities, user,
//! pod-security levels of tenant namespaces, the `dind` sidecar by tenant policy, a Pod a
//! ResourceQuota refuses) and where the daemon may act (reserved and unowned namespaces, its
//! RBAC reaching Secrets only in the namespaces it bound itself in).
use super::*;
use reqwest::Method as M;

/// A key of role `user` on `tenant`.
async fn user_key(daemon: &Daemon, admin: &str, tenant: &str) -> String {
    let (status, body) = call(
        daemon,
        admin,
        M::POST,
        "/api/v1/keys",
        Some(
            json!({"name": format!("{tenant}-user"), "role": "user", "tenant": tenant,
                    "expires_days": 1}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body["data"]["token"].as_str().unwrap().to_string()
}

/// Polls a sandbox until its status is `want`; returns its record.
async fn until_status(daemon: &Daemon, token: &str, ns: &str, name: &str, want: &str) -> Value {
    let started = Instant::now();
    loop {
        let (status, body) = call(
            daemon,
            token,
            M::GET,
            &format!("/api/v1/sandboxes/{name}?namespace={ns}"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        if body["data"]["status"] == want {
            return body["data"].clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "sandbox {ns}/{name} is not {want} after 60 s: {body}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `kubectl auth can-i VERB RESOURCE -n NS` as the daemon's ServiceAccount (impersonated by
/// the cluster's admin): what deploy/rbac.yaml and the daemon's own bindings grant it.
fn daemon_can(verb: &str, resource: &str, namespace: &str) -> bool {
    let kubectl = std::env::var("SBX_TEST_KUBECTL").expect("SBX_TEST_KUBECTL (scripts/test)");
    let kubeconfig = std::env::var("SBX_TEST_KUBECONFIG").expect("SBX_TEST_KUBECONFIG");
    // `pods/exec` is a subresource; `secrets/NAME` one object.
    let (resource, subresource) = match resource.strip_prefix("pods/") {
        Some(sub) => ("pods", vec![format!("--subresource={sub}")]),
        None => (resource, vec![]),
    };
    let out = std::process::Command::new(kubectl)
        .args([
            "--kubeconfig",
            &kubeconfig,
            "auth",
            "can-i",
            verb,
            resource,
            "-n",
            namespace,
            "--as=system:serviceaccount:sbx-system:sbx",
        ])
        .args(subresource)
        .output()
        .expect("run kubectl");
    let answer = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        answer == "yes" || answer == "no",
        "kubectl auth can-i: {answer} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    answer == "yes"
}

/// Point 11: a tenant's sandbox Pod runs the runtime's default seccomp profile, drops every
/// capability but those it asked for, cannot escalate, runs as the image's `USER` unless a
/// non-root flag says otherwise, and its namespace enforces pod-security `baseline` (warn and
/// audit too). A capability the tenant-user allow-list grants but baseline refuses (NET_RAW)
/// is a 403 naming the setting, before anything is made; once an admin allows it, the
/// namespace is enforced at `privileged` and the sandbox runs. `hostUsers: false` follows
/// the nodes: none of this cluster's reports user-namespace support (containerd 1.6), so
/// `auto` leaves it out and `always` puts it in. On f3e7c26 the Pod had no seccomp profile,
/// `runAsUser: 0` whatever the image said, and the namespace no pod-security labels.
#[tokio::test]
async fn sandbox_pods_are_hardened_and_tenant_namespaces_enforce_baseline() {
    let cluster = Cluster::take(&["hd-a"]).await;
    let client = cluster.client.clone();
    let daemon = start();
    let admin = bootstrap_token(&client).await;
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/tenants",
        Some(json!({"name": "hd", "spec": {"namespaces": ["hd-a"]}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let user = user_key(&daemon, &admin, "hd").await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let labels = namespaces
        .get("hd-a")
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap();
    for mode in ["enforce", "warn", "audit"] {
        assert_eq!(
            labels
                .get(&format!("pod-security.kubernetes.io/{mode}"))
                .map(String::as_str),
            Some("baseline"),
            "{labels:?}"
        );
    }
    let create = |name: &'static str, extra: Value| {
        let (daemon, user) = (&daemon, user.clone());
        async move {
            let mut body = json!({"name": name, "namespace": "hd-a", "image": "busybox:1.36",
                                  "limits": {"cpu": "250m", "memory": "128Mi"}});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            call(daemon, &user, M::POST, "/api/v1/sandboxes", Some(body)).await
        }
    };
    let (status, body) = create("plain", json!({"cap_add": ["NET_BIND_SERVICE"]})).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = create("nonroot", json!({"pod_non_root": true})).await;
    assert_eq!(status, 201, "{body}");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "hd-a");
    let plain = serde_json::to_value(d_template(&deployments, "plain").await).unwrap();
    assert_eq!(
        plain["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    assert!(plain["securityContext"]["runAsUser"].is_null(), "{plain}");
    assert!(plain["hostUsers"].is_null(), "{plain}");
    let main = &plain["containers"][0]["securityContext"];
    assert_eq!(
        main["capabilities"],
        json!({"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]})
    );
    assert_eq!(main["allowPrivilegeEscalation"], false);
    assert!(main["privileged"].is_null());
    let nonroot = serde_json::to_value(d_template(&deployments, "nonroot").await).unwrap();
    assert_eq!(nonroot["securityContext"]["runAsUser"], 65532);
    assert_eq!(
        nonroot["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    // The namespace's admission (baseline) took both Pods: they run.
    until_status(&daemon, &user, "hd-a", "plain", "Running").await;
    until_status(&daemon, &user, "hd-a", "nonroot", "Running").await;

    // NET_RAW: in the tenant-user allow-list, outside baseline.
    let (status, body) = create("raw", json!({"cap_add": ["NET_RAW"]})).await;
    assert_eq!(status, 403, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("NET_RAW") && message.contains("allowedCapabilities"),
        "{body}"
    );
    assert!(deployments.get_opt("raw").await.unwrap().is_none());
    let (status, body) = call(
        &daemon,
        &admin,
        M::PATCH,
        "/api/v1/tenants/hd",
        Some(json!({"spec": {"limits": {"allowedCapabilities": ["NET_RAW"]}}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let labels = namespaces
        .get("hd-a")
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap();
    assert_eq!(labels["pod-security.kubernetes.io/enforce"], "privileged");
    assert_eq!(labels["pod-security.kubernetes.io/warn"], "baseline");
    let (status, body) = create("raw", json!({"cap_add": ["NET_RAW"]})).await;
    assert_eq!(status, 201, "{body}");
    until_status(&daemon, &user, "hd-a", "raw", "Running").await;
    drop(daemon);

    // `always`: the Pod asks for a user namespace of its own.
    let daemon = Daemon::start_on_kubernetes("[kubernetes]\nuserNamespaces = \"always\"\n");
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/sandboxes",
        Some(
            json!({"name": "userns", "namespace": "hd-a", "image": "busybox:1.36",
                    "limits": {"cpu": "250m", "memory": "128Mi"}}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let userns = serde_json::to_value(d_template(&deployments, "userns").await).unwrap();
    assert_eq!(userns["hostUsers"], false, "{userns}");
}

/// Point 11: the `dind` sidecar (a privileged container) only where the tenant's policy
/// allows it, for every role: 403 naming `limits.allowDind` and nothing made otherwise. With
/// it, in a single-namespace tenant whose backstop ResourceQuota limits CPU and memory, the
/// restored sandbox starts: the sidecar has requests and limits of its own. A Pod the quota
/// does refuse (a second sidecar over its CPU) is Failed with the quota's reason instead of
/// Pending for ever. On f3e7c26 the restore answered 201 and no Pod was ever made (the quota
/// refused the sidecar without limits), the sandbox Pending with no reason.
#[tokio::test]
async fn dind_follows_the_tenant_policy_and_a_quota_never_blocks_a_pod_silently() {
    let cluster = Cluster::take(&["qd-a"]).await;
    let client = cluster.client.clone();
    let daemon = start();
    let admin = bootstrap_token(&client).await;
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/tenants",
        Some(json!({"name": "qd", "spec": {"namespaces": ["qd-a"],
                    "quotas": {"vcpu": "1500m", "memory": "8Gi"}}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "qd-a");
    let hard = quotas
        .get("sbx-tenant-quota")
        .await
        .unwrap()
        .spec
        .unwrap()
        .hard
        .unwrap();
    assert!(hard.contains_key("limits.cpu"), "{hard:?}");
    let post = |path: &'static str, body: Value| {
        let (daemon, admin) = (&daemon, admin.clone());
        async move { call(daemon, &admin, M::POST, path, Some(body)).await }
    };
    let (status, body) = post(
        "/api/v1/sandboxes",
        json!({"name": "src", "namespace": "qd-a", "image": "busybox:1.36",
               "limits": {"cpu": "250m", "memory": "128Mi"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = post(
        "/api/v1/sandboxes/src/snapshot",
        json!({"snapshot_name": "snap", "namespace": "qd-a"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "qd-a");
    let restore = json!({"new_sandbox_name": "docker", "namespace": "qd-a",
                         "overrides": {"sidecar": "dind"}});
    // Not allowed: refused for the admin too (the namespace enforces baseline).
    let (status, body) = post("/api/v1/snapshots/snap/restore", restore.clone()).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("allowDind"),
        "{body}"
    );
    assert!(deployments.get_opt("docker").await.unwrap().is_none());
    let (status, body) = call(
        &daemon,
        &admin,
        M::PATCH,
        "/api/v1/tenants/qd",
        Some(json!({"spec": {"limits": {"allowDind": true}}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let labels = namespaces
        .get("qd-a")
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap();
    assert_eq!(labels["pod-security.kubernetes.io/enforce"], "privileged");
    let (status, body) = post("/api/v1/snapshots/snap/restore", restore).await;
    assert_eq!(status, 201, "{body}");
    let pod = serde_json::to_value(d_template(&deployments, "docker").await).unwrap();
    assert_eq!(pod["containers"][1]["name"], "dind");
    assert_eq!(
        pod["containers"][1]["resources"],
        json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}})
    );
    until_status(&daemon, &admin, "qd-a", "docker", "Running").await;

    // A Pod the quota's admission refuses: a second sidecar's CPU, which the backstop quota
    // counts (1.5 CPU used of 1.5) and sbx's own check does not (0.75): Failed, saying so.
    let (status, body) = post(
        "/api/v1/snapshots/snap/restore",
        json!({"new_sandbox_name": "docker2", "namespace": "qd-a",
               "overrides": {"sidecar": "dind"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let refused = until_status(&daemon, &admin, "qd-a", "docker2", "Failed").await;
    let reason = refused["error_message"].as_str().unwrap();
    assert!(
        reason.contains("cannot be created")
            && reason.contains("exceeded quota")
            && reason.contains("sbx-tenant-quota"),
        "{refused}"
    );
}

/// Point 12: `kube-*` and `sbx-*` namespaces are refused to everyone (403 for sandboxes and
/// lists, 400 as a tenant's, `default` too); in production mode a namespace no tenant owns is
/// refused even to an admin; the daemon's ServiceAccount reads Secrets and writes sandbox
/// objects only in the namespaces it bound itself in (a tenant's), not in `kube-public`,
/// `default` or a namespace of no tenant. On f3e7c26 an admin's sandbox in kube-system was
/// made, and the ClusterRole let the daemon read every Secret of the cluster; deploy/ had no
/// admission policy.
#[tokio::test]
async fn reserved_and_unowned_namespaces_are_refused_and_rbac_stops_at_tenants() {
    let cluster = Cluster::take(&["rs-a", "rs-free"]).await;
    let client = cluster.client.clone();
    let daemon = Daemon::start_on_kubernetes("mode = \"production\"\n");
    let admin = bootstrap_token(&client).await;
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/tenants",
        Some(json!({"name": "rs", "spec": {"namespaces": ["rs-a"]}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    for ns in ["kube-system", "sbx-system", "default"] {
        let (status, body) = call(
            &daemon,
            &admin,
            M::POST,
            "/api/v1/tenants",
            Some(json!({"name": "grab", "spec": {"namespaces": [ns]}})),
        )
        .await;
        assert_eq!(status, 400, "{ns}: {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(ns),
            "{body}"
        );
    }
    let user = user_key(&daemon, &admin, "rs").await;
    let sandbox = |ns: &str| {
        json!({"name": "box", "namespace": ns, "image": "busybox:1.36",
               "limits": {"cpu": "250m", "memory": "128Mi"}})
    };
    for (who, token) in [("user", &user), ("admin", &admin)] {
        for ns in ["kube-system", "sbx-system"] {
            let (status, body) = call(
                &daemon,
                token,
                M::POST,
                "/api/v1/sandboxes",
                Some(sandbox(ns)),
            )
            .await;
            assert_eq!(
                (status, body["error"]["code"].as_str()),
                (403, Some("Forbidden")),
                "{who} in {ns}: {body}"
            );
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("reserved"),
                "{body}"
            );
            let (status, body) = call(
                &daemon,
                token,
                M::GET,
                &format!("/api/v1/sandboxes?namespace={ns}"),
                None,
            )
            .await;
            assert_eq!(status, 403, "{who} lists {ns}: {body}");
        }
    }
    // Production: a namespace of no tenant, even for the admin.
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/sandboxes",
        Some(sandbox("rs-free")),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not owned by a tenant"),
        "{body}"
    );
    let in_system: Api<Deployment> = Api::namespaced(client.clone(), "kube-system");
    assert!(in_system.get_opt("box").await.unwrap().is_none());
    let (status, body) = call(
        &daemon,
        &user,
        M::POST,
        "/api/v1/sandboxes",
        Some(sandbox("rs-a")),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    // The RBAC: Secrets and sandbox writes in the tenant's namespace (bound by the daemon),
    // nowhere else.
    assert!(daemon_can("get", "secrets", "rs-a"));
    assert!(daemon_can("create", "deployments.apps", "rs-a"));
    assert!(daemon_can("create", "pods/exec", "rs-a"));
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &Default::default(),
            &serde_json::from_value(json!({"metadata": {"name": "rs-free"}})).unwrap(),
        )
        .await
        .unwrap();
    for ns in ["rs-free", "kube-public", "default"] {
        assert!(!daemon_can("get", "secrets", ns), "secrets in {ns}");
        assert!(
            !daemon_can("create", "deployments.apps", ns),
            "deployments in {ns}"
        );
        assert!(!daemon_can("create", "pods/exec", ns), "exec in {ns}");
    }
    // kube-system: only its own Secrets, by name.
    assert!(!daemon_can("get", "secrets", "kube-system"));
    assert!(!daemon_can("list", "secrets", "kube-system"));
    assert!(daemon_can("get", "secrets/sbx-api-keys", "kube-system"));

    // RBAC cannot limit `create rolebindings` or `patch namespaces` by namespace; deploy/'s
    // admission policy does: the ServiceAccount cannot bind itself into kube-* or sbx-*,
    // label such a namespace as a tenant's, or bind anything but its own tenant rules.
    common::apply_deploy_file("admission.yaml", &[]).await;
    let kubectl = std::env::var("SBX_TEST_KUBECTL").unwrap();
    let kubeconfig = std::env::var("SBX_TEST_KUBECONFIG").unwrap();
    let as_daemon = |args: &[&str]| {
        let out = std::process::Command::new(&kubectl)
            .args([
                "--kubeconfig",
                &kubeconfig,
                "--as=system:serviceaccount:sbx-system:sbx",
            ])
            .args(args)
            .output()
            .expect("run kubectl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let bind = |ns: &'static str, account: &'static str| {
        as_daemon(&[
            "create",
            "rolebinding",
            "sbx-tenant",
            "--clusterrole=sbx-tenant",
            &format!("--serviceaccount={account}"),
            "-n",
            ns,
        ])
    };
    // The policy takes effect within a moment of being applied.
    let started = Instant::now();
    let (made, why) = loop {
        let (made, why) = bind("kube-public", "sbx-system:sbx");
        if !made || started.elapsed() > Duration::from_secs(10) {
            break (made, why);
        }
        let _ = as_daemon(&["delete", "rolebinding", "sbx-tenant", "-n", "kube-public"]);
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        !made && why.contains("ValidatingAdmissionPolicy 'sbx-daemon'"),
        "{why}"
    );
    let (made, why) = bind("rs-free", "rs-free:default");
    assert!(!made && why.contains("nothing else"), "{why}");
    let (made, why) = as_daemon(&["label", "namespace", "kube-public", "sbx.io/tenant=rs"]);
    assert!(!made && why.contains("sbx-daemon"), "{why}");
    // Its own binding in a tenant's namespace stays allowed (the daemon made it above).
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::namespaced(client.clone(), "rs-a");
    assert!(bindings.get_opt("sbx-tenant").await.unwrap().is_some());
}
