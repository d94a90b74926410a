//! Issue 43, points 4 and 5: the NetworkPolicies sbx writes. Every tenant namespace denies
//! all ingress and egress by default (kept by the leader); each sandbox's own policy allows
//! its egress list, or the internet when it has none, minus the denied ranges (RFC 1918,
//! 100.64.0.0/10, link-local, 168.63.129.16 and the always-denied blocks), plus DNS; a bare
//! address is /32 and IPv6 is refused before anything is made. The test cluster's network
//! plugin (bridge) does not enforce NetworkPolicy: these tests check the objects the API
//! server holds, not the traffic.
use super::*;

/// The ranges a sandbox's policy excepts with the default `[kubernetes] egressDeny`, as the
/// API server keeps them (sorted by address).
const DENIED: [&str; 9] = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "168.63.129.16/32",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "224.0.0.0/4",
    "240.0.0.0/4",
];

/// The DNS rule every sandbox with egress has: the cluster's resolver Pods, port 53.
fn dns_rule() -> Value {
    json!({
        "to": [{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }],
        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
    })
}

/// A NetworkPolicy's spec as JSON; panics naming it when it is missing.
async fn policy_spec(policies: &Api<NetworkPolicy>, name: &str) -> Value {
    let policy = policies
        .get_opt(name)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no NetworkPolicy {name}"));
    serde_json::to_value(policy.spec.unwrap()).unwrap()
}

/// Waits (up to `within`) until the NetworkPolicy `name` exists again; its spec.
async fn until_back(policies: &Api<NetworkPolicy>, name: &str, within: Duration) -> Value {
    let started = Instant::now();
    loop {
        if let Some(policy) = policies.get_opt(name).await.unwrap() {
            return serde_json::to_value(policy.spec.unwrap()).unwrap();
        }
        assert!(
            started.elapsed() < within,
            "NetworkPolicy {name} not put back within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Point 4: a tenant's namespaces get the default deny (both directions, every Pod) when the
/// tenant is created and when it gains one; deleted by hand, the leader puts it back, and a
/// sandbox's own policy likewise. On today's main no such policy is made.
#[tokio::test]
async fn tenant_namespaces_deny_by_default_and_the_leader_keeps_it() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&["np-a", "np-b"]).await;
    let client = cluster.client.clone();
    let daemon = start();
    let admin = bootstrap_token(&client).await;
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/tenants",
        Some(json!({"name": "np", "spec": {"namespaces": ["np-a"]}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let deny_all = json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]});
    let in_a: Api<NetworkPolicy> = Api::namespaced(client.clone(), "np-a");
    assert_eq!(policy_spec(&in_a, "sbx-default-deny").await, deny_all);
    let labels = in_a
        .get("sbx-default-deny")
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap();
    assert_eq!(labels["sbx.io/tenant"], "np");
    // A namespace the tenant gains gets it with the update.
    let (status, body) = call(
        &daemon,
        &admin,
        M::PATCH,
        "/api/v1/tenants/np",
        Some(json!({"spec": {"namespaces": ["np-a", "np-b"]}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let in_b: Api<NetworkPolicy> = Api::namespaced(client.clone(), "np-b");
    assert_eq!(policy_spec(&in_b, "sbx-default-deny").await, deny_all);

    // Deleted by hand (an operator, or anything else holding the permission): the leader
    // (this single replica, once it holds the Lease) puts it back within its next checks.
    in_a.delete("sbx-default-deny", &DeleteParams::default())
        .await
        .unwrap();
    assert!(in_a.get_opt("sbx-default-deny").await.unwrap().is_none());
    let back = until_back(&in_a, "sbx-default-deny", Duration::from_secs(40)).await;
    assert_eq!(back, deny_all);

    // A sandbox's own policy too (once the sandbox is older than its create's grace).
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/sandboxes",
        Some(json!({"name": "kept", "namespace": "np-a", "image": "busybox"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let made = policy_spec(&in_a, "kept-egress").await;
    in_a.delete("kept-egress", &DeleteParams::default())
        .await
        .unwrap();
    let back = until_back(&in_a, "kept-egress", Duration::from_secs(60)).await;
    assert_eq!(back, made);
    assert_eq!(back["egress"][0]["to"][0]["ipBlock"]["cidr"], "0.0.0.0/0");
    let (status, _) = call(
        &daemon,
        &admin,
        M::DELETE,
        "/api/v1/sandboxes/kept?namespace=np-a",
        None,
    )
    .await;
    assert_eq!(status, 200);
}

/// Points 4 and 5: each sandbox's policy selects its Pods, allows no ingress, and allows
/// egress to its list minus the denied ranges (as `except` within each block, or the block
/// dropped when a denied range covers it), plus DNS; no list is the internet minus the same
/// ranges, not everything. A bare address reaches `ipBlock.cidr` as /32; IPv6 is a 400 before
/// any object is made. On today's main a sandbox with no list has no policy, a list is passed
/// as it is (no `except`, a bare address refused by the API server after the Deployment was
/// posted).
#[tokio::test]
async fn sandbox_egress_is_its_list_minus_the_denied_ranges() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&["eg-ns"]).await;
    let client = cluster.client.clone();
    let daemon = start();
    let admin = bootstrap_token(&client).await;
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), "eg-ns");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "eg-ns");
    let create = |name: &'static str, list: Option<Value>| {
        let (daemon, admin) = (&daemon, admin.clone());
        async move {
            let mut body = json!({"name": name, "namespace": "eg-ns", "image": "busybox"});
            if let Some(list) = list {
                body["egress_whitelist"] = list;
            }
            call(daemon, &admin, M::POST, "/api/v1/sandboxes", Some(body)).await
        }
    };
    let internet = json!([
        {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": DENIED}}]},
        dns_rule(),
    ]);

    // No list: the internet, not the cluster, the node's network or the metadata service.
    let (status, body) = create("open", None).await;
    assert_eq!(status, 201, "{body}");
    let open = policy_spec(&policies, "open-egress").await;
    assert_eq!(
        open["podSelector"],
        json!({"matchLabels": {"sbx.io/sandbox": "open"}})
    );
    assert_eq!(open["policyTypes"], json!(["Ingress", "Egress"]));
    assert!(open.get("ingress").is_none(), "{open}");
    assert_eq!(open["egress"], internet);

    // Everything, asked for: the same.
    let (status, body) = create("everything", Some(json!(["0.0.0.0/0"]))).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        policy_spec(&policies, "everything-egress").await["egress"],
        internet
    );

    // A private range the tenant asked for: denied whole, only DNS is left.
    let (status, body) = create("private", Some(json!(["10.20.0.0/16"]))).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        policy_spec(&policies, "private-egress").await["egress"],
        json!([dns_rule()])
    );

    // A bare address is /32; a block around denied ranges excepts them.
    let (status, body) = create("bare", Some(json!(["8.8.8.8", "192.0.0.0/2"]))).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        policy_spec(&policies, "bare-egress").await["egress"],
        json!([
            {"to": [
                {"ipBlock": {"cidr": "8.8.8.8/32"}},
                {"ipBlock": {"cidr": "192.0.0.0/2", "except": ["192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4"]}},
            ]},
            dns_rule(),
        ])
    );

    // IPv6: refused as on the local platform, nothing made.
    let (status, body) = create("six", Some(json!(["2001:db8::/32"]))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("BadRequest")),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("2001:db8::/32") && message.contains("IPv6"),
        "{body}"
    );
    assert!(deployments.get_opt("six").await.unwrap().is_none());
    assert!(policies.get_opt("six-egress").await.unwrap().is_none());

    for name in ["open", "everything", "private", "bare"] {
        let (status, _) = call(
            &daemon,
            &admin,
            M::DELETE,
            &format!("/api/v1/sandboxes/{name}?namespace=eg-ns"),
            None,
        )
        .await;
        assert_eq!(status, 200);
        assert!(
            policies
                .get_opt(&format!("{name}-egress"))
                .await
                .unwrap()
                .is_none()
        );
    }
}

/// Point 3 on Kubernetes: a tenant's `limits.egressDeny` joins the excepted ranges of its
/// sandboxes' policies (a block it covers, or one inside the sandbox's own list); when the
/// admin changes it, the leader writes the policies of the tenant's running sandboxes again.
#[tokio::test]
async fn a_tenants_deny_list_joins_its_sandboxes_policies_and_follows_its_changes() {
    use reqwest::Method as M;
    let cluster = Cluster::take(&["np-deny"]).await;
    let client = cluster.client.clone();
    let daemon = start();
    let admin = bootstrap_token(&client).await;
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/tenants",
        Some(json!({"name": "npd", "spec": {
            "namespaces": ["np-deny"],
            "limits": {"egressDeny": ["203.0.113.0/24", "8.8.8.8"]},
        }})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/sandboxes",
        Some(
            json!({"name": "dn", "namespace": "np-deny", "image": "busybox",
                    "egress_whitelist": ["8.8.8.0/24", "203.0.113.0/24"]}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let in_ns: Api<NetworkPolicy> = Api::namespaced(client.clone(), "np-deny");
    let spec = policy_spec(&in_ns, "dn-egress").await;
    // 203.0.113.0/24 is denied whole: its block is gone; 8.8.8.8 is excepted in its block.
    assert_eq!(
        spec["egress"][0]["to"],
        json!([{"ipBlock": {"cidr": "8.8.8.0/24", "except": ["8.8.8.8/32"]}}]),
        "{spec}"
    );
    // The admin changes the list: the leader rewrites the policy within its next checks.
    let (status, body) = call(
        &daemon,
        &admin,
        M::PATCH,
        "/api/v1/tenants/npd",
        Some(json!({"spec": {"limits": {"egressDeny": ["8.8.8.0/25"]}}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let started = Instant::now();
    let rewritten = loop {
        let spec = policy_spec(&in_ns, "dn-egress").await;
        if spec["egress"][0]["to"]
            .as_array()
            .is_some_and(|b| b.len() == 2)
        {
            break spec;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the policy was not rewritten for the new list: {spec}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(
        rewritten["egress"][0]["to"],
        json!([
            {"ipBlock": {"cidr": "8.8.8.0/24", "except": ["8.8.8.0/25"]}},
            {"ipBlock": {"cidr": "203.0.113.0/24"}},
        ]),
        "{rewritten}"
    );
    // A bad entry is the admin's 400.
    let (status, body) = call(
        &daemon,
        &admin,
        M::PATCH,
        "/api/v1/tenants/npd",
        Some(json!({"spec": {"limits": {"egressDeny": ["fd00::/8"]}}})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = call(
        &daemon,
        &admin,
        M::DELETE,
        "/api/v1/sandboxes/dn?namespace=np-deny",
        None,
    )
    .await;
    assert_eq!(status, 200);
}
