//! Bytes each sandbox's Pod sent, for the `egress_bytes` usage series: the kubelets' stats
//! summary (`GET https://<node>:10250/stats/summary`, the Pod's `network.txBytes`), read
//! straight from the kubelet of each node that runs sandboxes, as metrics-server reads it —
//! with the service's own token, which the kubelet checks by TokenReview and authorises as
//! `nodes/stats` (not through the API server's node proxy, whose `nodes/proxy` would also
//! allow exec into any Pod), and its serving certificate checked against the cluster's CA.
use std::collections::HashMap;
use std::time::Duration;

use futures_util::future::join_all;
use serde::Deserialize;

/// The kubelet's port (`KubeletConfiguration.port`'s default, which nearly every cluster keeps).
pub const KUBELET_PORT: u16 = 10250;
/// How long one node's answer is waited for (metrics-server's default): a busy kubelet may
/// take seconds to sum its node's stats. A node that does not answer in time adds nothing to
/// its Pods' counters this time (the next answer adds what they sent meanwhile), never delays
/// the others'.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Where the service's token comes from.
#[derive(Clone)]
enum Token {
    /// A fixed token (a kubeconfig's).
    Fixed(String),
    /// A file re-read at each use (the Pod's projected ServiceAccount token, which rotates).
    File(String),
}

/// A client of the kubelets' stats summary.
pub struct Kubelets {
    http: reqwest::Client,
    token: Option<Token>,
    /// The nodes whose last read failed (logged once when they start failing and when they
    /// answer again, not at every accrual).
    failing: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Whether the token file could not be read last time (logged once, as a node's failure).
    token_unreadable: std::sync::atomic::AtomicBool,
}

#[derive(Deserialize)]
struct Summary {
    #[serde(default)]
    pods: Vec<PodStats>,
}

#[derive(Deserialize)]
struct PodStats {
    #[serde(rename = "podRef")]
    pod_ref: PodRef,
    #[serde(default)]
    network: Option<NetworkStats>,
}

#[derive(Deserialize)]
struct PodRef {
    name: String,
    namespace: String,
}

#[derive(Deserialize)]
struct NetworkStats {
    #[serde(rename = "txBytes", default)]
    tx_bytes: Option<u64>,
}

impl Kubelets {
    /// A client with the credentials and CA of the service's own Kubernetes configuration;
    /// without a bearer token (a client certificate, say) there is nothing to read with.
    pub fn new(config: &kube::Config) -> Kubelets {
        let token = match (&config.auth_info.token, &config.auth_info.token_file) {
            (Some(token), _) => Some(Token::Fixed(
                secrecy::ExposeSecret::expose_secret(token).to_string(),
            )),
            (None, Some(file)) => Some(Token::File(file.clone())),
            (None, None) => None,
        };
        let mut builder = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(TIMEOUT);
        let certs: Vec<reqwest::Certificate> = config
            .root_cert
            .iter()
            .flatten()
            .filter_map(|der| reqwest::Certificate::from_der(der).ok())
            .collect();
        if !certs.is_empty() {
            builder = builder.tls_certs_only(certs);
        }
        if token.is_none() {
            tracing::warn!(
                "the Kubernetes credentials have no bearer token: egress_bytes is not metered"
            );
        }
        let http = builder.build().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "kubelet client: the cluster's CA is not usable; egress_bytes is not metered");
            reqwest::Client::default()
        });
        Kubelets {
            http,
            token,
            failing: Default::default(),
            token_unreadable: Default::default(),
        }
    }

    fn token(&self) -> Option<String> {
        match self.token.as_ref()? {
            Token::Fixed(t) => Some(t.clone()),
            Token::File(path) => {
                let read = std::fs::read_to_string(path);
                let was = self
                    .token_unreadable
                    .swap(read.is_err(), std::sync::atomic::Ordering::Relaxed);
                match read {
                    Ok(t) => Some(t.trim().to_string()),
                    Err(e) => {
                        if !was {
                            tracing::warn!(%path, error = %e, "cannot read the service account token: egress_bytes is not metered until it can be read");
                        }
                        None
                    }
                }
            }
        }
    }

    /// Bytes sent by each Pod of the nodes at these addresses, by (namespace, Pod name). A
    /// node that does not answer is left out (its Pods have no sample this time).
    pub async fn tx_bytes(&self, nodes: &[String]) -> HashMap<(String, String), u64> {
        let Some(token) = self.token() else {
            return HashMap::new();
        };
        let reads = nodes.iter().map(|address| {
            let token = token.clone();
            async move {
                let url = format!(
                    "https://{}/stats/summary",
                    super::host_port(address, KUBELET_PORT)
                );
                let answer = async {
                    let response = self
                        .http
                        .get(&url)
                        .bearer_auth(&token)
                        .send()
                        .await
                        .map_err(|e| e.to_string())?;
                    let status = response.status();
                    if !status.is_success() {
                        return Err(format!("HTTP {status}"));
                    }
                    response.json::<Summary>().await.map_err(|e| e.to_string())
                }
                .await;
                let mut failing = self.failing.lock().unwrap_or_else(|e| e.into_inner());
                match answer {
                    Ok(summary) => {
                        if failing.remove(address) {
                            tracing::info!(node = %address, "the kubelet's stats summary answers again: egress_bytes is metered");
                        }
                        summary.pods
                    }
                    Err(e) => {
                        if failing.insert(address.clone()) {
                            tracing::warn!(node = %address, error = %e, "cannot read the kubelet's stats summary: its sandboxes' egress_bytes are not metered until it answers");
                        }
                        Vec::new()
                    }
                }
            }
        });
        join_all(reads)
            .await
            .into_iter()
            .flatten()
            .filter_map(|p| {
                let bytes = p.network?.tx_bytes?;
                Some(((p.pod_ref.namespace, p.pod_ref.name), bytes))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_reads_as_bytes_sent_per_pod() {
        let summary: Summary = serde_json::from_value(serde_json::json!({
            "node": {"nodeName": "real-1"},
            "pods": [
                {"podRef": {"name": "a-5d8f", "namespace": "ns", "uid": "1"},
                 "network": {"name": "eth0", "rxBytes": 10, "txBytes": 2048}},
                {"podRef": {"name": "b-77c1", "namespace": "ns", "uid": "2"}}
            ]
        }))
        .unwrap();
        let pods: Vec<_> = summary
            .pods
            .into_iter()
            .map(|p| (p.pod_ref.name, p.network.and_then(|n| n.tx_bytes)))
            .collect();
        assert_eq!(
            pods,
            [
                ("a-5d8f".to_string(), Some(2048)),
                ("b-77c1".to_string(), None)
            ]
        );
    }
}
