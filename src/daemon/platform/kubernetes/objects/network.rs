//! NetworkPolicies sbx writes: the default deny of every tenant namespace, and the blocks of a
//! sandbox's own policy (its egress allow-list minus what no sandbox may reach, plus DNS to
//! the cluster's resolver). NetworkPolicies only add what they allow: in a tenant namespace a
//! sandbox gets nothing but what its own policy allows.
use serde_json::{Value, json};

use super::names::{MANAGED_LABEL, SANDBOX_LABEL, TENANT_LABEL};
use crate::shared::egress::{Egress, Ipv4Net, normalize};

/// Name of the default-deny NetworkPolicy of every tenant namespace.
pub const DEFAULT_DENY: &str = "sbx-default-deny";

/// The default deny of a tenant namespace: every Pod there, no ingress and no egress, but
/// what a policy of its own allows (a sandbox's: its egress list and DNS).
pub fn default_deny_object(namespace: &str, tenant: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": DEFAULT_DENY,
            "namespace": namespace,
            "labels": {
                MANAGED_LABEL: crate::daemon::platform::kubernetes::FIELD_MANAGER,
                TENANT_LABEL: tenant,
            },
        },
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
        },
    })
}

/// Each network of `allowed` that some range of `deny` does not cover whole, with the ranges
/// of `deny` inside it (a NetworkPolicy's `except` must be a strict subset of its `cidr`: CIDRs
/// nest or are disjoint, so a denied range is either inside, around or apart).
pub fn allowed_blocks(allowed: &[Ipv4Net], deny: &[Ipv4Net]) -> Vec<(Ipv4Net, Vec<Ipv4Net>)> {
    allowed
        .iter()
        .filter(|a| !deny.iter().any(|d| d.covers(a)))
        .map(|a| {
            let inside: Vec<Ipv4Net> = deny.iter().filter(|d| a.covers(d)).copied().collect();
            (*a, normalize(inside))
        })
        .collect()
}

/// The cluster's resolver: the `kube-dns` Pods (CoreDNS keeps the label) of `kube-system`, on
/// port 53. A Pod's query to the DNS Service reaches them by their Pod address, which the
/// ranges denied to sandboxes usually hold.
fn dns_rule() -> Value {
    json!({
        "to": [{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }],
        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
    })
}

/// The egress rules of a sandbox's policy: `[]` (`DenyAll`) nothing; a list its networks and
/// no list (`Unrestricted`) the internet (`0.0.0.0/0`), each minus `deny`, plus DNS to the
/// cluster's resolver.
pub fn egress_rules(egress: &Egress, deny: &[Ipv4Net]) -> Vec<Value> {
    let internet = [Ipv4Net::new(std::net::Ipv4Addr::UNSPECIFIED, 0).expect("0.0.0.0/0")];
    let allowed: &[Ipv4Net] = match egress {
        Egress::DenyAll => return Vec::new(),
        Egress::Unrestricted => &internet,
        Egress::Allow(nets) => nets,
    };
    let blocks: Vec<Value> = allowed_blocks(allowed, deny)
        .into_iter()
        .map(|(cidr, except)| {
            let mut block = json!({"cidr": cidr.to_string()});
            if !except.is_empty() {
                block["except"] = json!(except.iter().map(ToString::to_string).collect::<Vec<_>>());
            }
            json!({"ipBlock": block})
        })
        .collect();
    let mut rules = Vec::new();
    if !blocks.is_empty() {
        rules.push(json!({"to": blocks}));
    }
    rules.push(dns_rule());
    rules
}

/// Annotation of a sandbox's NetworkPolicy: its tenant's `egressDeny` when it was written,
/// so that the leader rewrites the policy when the tenant's list changes.
pub const TENANT_DENY_ANNOTATION: &str = "sbx.io/tenant-egress-deny";

/// The value of [`TENANT_DENY_ANNOTATION`] for a tenant's deny list.
pub fn tenant_deny_text(tenant_deny: &[Ipv4Net]) -> String {
    tenant_deny
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A sandbox's own NetworkPolicy (DESIGN §4): no ingress; egress as its allow-list says
/// (`[]`: nothing; a list: those networks; no list: the internet), minus `deny` (the pod,
/// Service and node ranges of the cluster, RFC 1918 and link-local by default) and
/// `tenant_deny` (its tenant's `egressDeny`), plus DNS to the cluster's resolver unless `[]`.
/// Named `<sandbox>-egress` for the objects made before it also denied ingress.
pub fn egress_policy_object(
    namespace: &str,
    sandbox: &str,
    egress: &Egress,
    deny: &[Ipv4Net],
    tenant_deny: &[Ipv4Net],
) -> Value {
    let deny = crate::shared::egress::normalize(deny.iter().chain(tenant_deny).copied().collect());
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": super::sandboxes::egress_policy(sandbox),
            "namespace": namespace,
            "labels": super::sandboxes::labels(sandbox),
            "annotations": {TENANT_DENY_ANNOTATION: tenant_deny_text(tenant_deny)},
        },
        "spec": {
            "podSelector": {"matchLabels": {SANDBOX_LABEL: sandbox}},
            "policyTypes": ["Ingress", "Egress"],
            "egress": egress_rules(egress, &deny),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> Ipv4Net {
        s.parse().unwrap()
    }

    fn defaults() -> Vec<Ipv4Net> {
        crate::shared::egress::denied_ranges(None).unwrap()
    }

    #[test]
    fn the_internet_is_everything_but_the_denied_ranges() {
        let rules = egress_rules(&Egress::Unrestricted, &defaults());
        assert_eq!(rules.len(), 2, "{rules:?}");
        let block = &rules[0]["to"][0]["ipBlock"];
        assert_eq!(block["cidr"], "0.0.0.0/0");
        assert_eq!(
            block["except"],
            json!([
                "0.0.0.0/8",
                "10.0.0.0/8",
                "100.64.0.0/10",
                "168.63.129.16/32",
                "169.254.0.0/16",
                "172.16.0.0/12",
                "192.168.0.0/16",
                "224.0.0.0/4",
                "240.0.0.0/4",
            ])
        );
        assert_eq!(rules[1], dns_rule());
    }

    #[test]
    fn a_list_loses_what_is_denied() {
        let deny = defaults();
        // Inside a denied range: gone, only DNS is left.
        let private = Egress::from_whitelist(Some(&["10.20.0.0/16".to_string()])).unwrap();
        assert_eq!(egress_rules(&private, &deny), vec![dns_rule()]);
        // Around denied ranges: they are its except; apart from them: as it is.
        let list: Vec<String> = ["8.8.8.8", "128.0.0.0/1", "10.0.0.0/8", "160.0.0.0/3"]
            .map(String::from)
            .to_vec();
        let blocks = allowed_blocks(
            &match Egress::from_whitelist(Some(&list)).unwrap() {
                Egress::Allow(nets) => nets,
                other => panic!("{other:?}"),
            },
            &deny,
        );
        assert_eq!(
            blocks,
            vec![
                (net("8.8.8.8/32"), vec![]),
                (
                    net("128.0.0.0/1"),
                    vec![
                        net("168.63.129.16/32"),
                        net("169.254.0.0/16"),
                        net("172.16.0.0/12"),
                        net("192.168.0.0/16"),
                        net("224.0.0.0/4"),
                        net("240.0.0.0/4"),
                    ]
                ),
            ]
        );
        // Every except is a strict subset of its cidr, as the API server requires.
        for (cidr, except) in &blocks {
            for e in except {
                assert!(cidr.covers(e) && e.prefix_len() > cidr.prefix_len());
            }
        }
        assert!(egress_rules(&Egress::DenyAll, &deny).is_empty());
    }

    #[test]
    fn a_tenant_namespace_denies_everything_by_default() {
        let policy = default_deny_object("acme-dev", "acme");
        assert_eq!(policy["metadata"]["name"], DEFAULT_DENY);
        assert_eq!(policy["metadata"]["labels"][TENANT_LABEL], "acme");
        assert_eq!(policy["spec"]["podSelector"], json!({}));
        assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert!(policy["spec"].get("ingress").is_none() && policy["spec"].get("egress").is_none());
    }
}
