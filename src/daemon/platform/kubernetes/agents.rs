//! The nodes' agents (`sbx agent`, the DaemonSet of `deploy/agent.yaml`), as the service
//! calls them: found as the agent Pods of the configured namespace (one per node, on the
//! node's address: they run in the host's network namespace), called with the service's
//! ServiceAccount token for the agents' audience, every node at once, each with its own
//! time limit: a slow or missing agent is that node's error entry and never holds up the
//! others.
use std::collections::HashMap;

use futures_util::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use crate::daemon::config::AgentSettings;
use crate::daemon::platform::{PlatformError, PlatformResult};
use crate::shared::agent::{AgentFault, STORAGE_PATH};
use crate::shared::envelope::ErrorEnvelope;
use crate::shared::models::node::{NodeStorage, NodeStorageEntry};

/// The labels of the agent Pods (`deploy/agent.yaml`).
pub const AGENT_SELECTOR: &str = "app.kubernetes.io/name=sbx,app.kubernetes.io/component=agent";

/// Where a node's agent is, or why it cannot be called.
#[derive(Debug, Clone, PartialEq)]
enum Located {
    /// Its address (the Pod's IP: the node's).
    At(String),
    /// Why there is nothing to call.
    Missing(String),
}

/// How long where the agents are is reused (a list of their Pods per sandbox call would cost
/// more than the call); an agent that does not answer, or a node whose agent was missing,
/// makes the next call look again.
const LOCATIONS_TTL: std::time::Duration = std::time::Duration::from_secs(2);

/// A client of the nodes' agents.
pub struct Agents {
    /// `https` (the agents' certificate checked against the internal CA) or `http`.
    scheme: &'static str,
    http: reqwest::Client,
    stream_http: reqwest::Client,
    settings: AgentSettings,
    located: std::sync::Mutex<Option<(std::time::Instant, HashMap<String, Located>)>>,
}

impl Agents {
    /// A client with the `[kubernetes]` agent settings, over TLS with `tls`: only an agent
    /// presenting the agents' certificate of the internal CA is called (the token is sent
    /// after the handshake), and the client presents the replicas' certificate (the agents
    /// admit no one else).
    pub fn new(
        settings: &AgentSettings,
        tls: Option<&crate::shared::tls::Generated>,
    ) -> PlatformResult<Agents> {
        let builder = || -> PlatformResult<reqwest::ClientBuilder> {
            // Idle connections are dropped before the agent closes them.
            let builder = reqwest::Client::builder().pool_idle_timeout(
                crate::agent::HEADER_READ_TIMEOUT
                    .saturating_sub(std::time::Duration::from_secs(10)),
            );
            Ok(match tls {
                Some(tls) => builder.tls_backend_preconfigured(
                    crate::shared::tls::client_config(
                        &tls.ca_pem,
                        crate::shared::tls::AGENT_NAME,
                        Some(&tls.replica),
                    )
                    .map_err(PlatformError::Unavailable)?,
                ),
                None => builder,
            })
        };
        let built = |b: reqwest::Result<reqwest::Client>| {
            b.map_err(|e| PlatformError::Unavailable(format!("a client of the agents: {e}")))
        };
        let http = built(
            builder()?
                .timeout(settings.timeout)
                .connect_timeout(settings.timeout)
                .build(),
        )?;
        // A stream lives as long as its command: only connecting is bounded.
        let stream_http = built(
            builder()?
                .connect_timeout(settings.timeout)
                .http1_only()
                .build(),
        )?;
        Ok(Agents {
            scheme: if tls.is_some() { "https" } else { "http" },
            http,
            stream_http,
            settings: settings.clone(),
            located: std::sync::Mutex::new(None),
        })
    }

    /// [`Agents::locate`], reused for [`LOCATIONS_TTL`].
    async fn located(&self, client: &kube::Client) -> PlatformResult<HashMap<String, Located>> {
        if let Some((at, found)) = self.located.lock().expect("agents lock").as_ref() {
            if at.elapsed() < LOCATIONS_TTL {
                return Ok(found.clone());
            }
        }
        let found = self.locate(client).await?;
        *self.located.lock().expect("agents lock") =
            Some((std::time::Instant::now(), found.clone()));
        Ok(found)
    }

    fn forget_locations(&self) {
        *self.located.lock().expect("agents lock") = None;
    }

    /// Each node's agent, from the agent Pods of the configured namespace.
    async fn locate(&self, client: &kube::Client) -> PlatformResult<HashMap<String, Located>> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &self.settings.namespace);
        let list = pods
            .list(&ListParams::default().labels(AGENT_SELECTOR))
            .await
            .map_err(|e| super::kube_error("list the sbx agent Pods", e))?;
        let mut found = HashMap::new();
        for pod in list.items {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                continue;
            };
            let status = pod.status.as_ref();
            let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
            let ip = status.and_then(|s| s.pod_ip.clone());
            let located = match (phase, ip) {
                ("Running", Some(ip)) => Located::At(ip),
                (phase, _) => Located::Missing(format!(
                    "the sbx agent on this node is not running (Pod {}/{name}: {phase})",
                    self.settings.namespace
                )),
            };
            // A Pod being replaced and its successor: the running one wins.
            if !matches!(found.get(&node), Some(Located::At(_))) {
                found.insert(node, located);
            }
        }
        Ok(found)
    }

    /// The nodes whose agent runs now.
    pub async fn running(&self, client: &kube::Client) -> PlatformResult<Vec<String>> {
        let mut nodes: Vec<String> = self
            .located(client)
            .await?
            .into_iter()
            .filter(|(_, at)| matches!(at, Located::At(_)))
            .map(|(node, _)| node)
            .collect();
        nodes.sort();
        Ok(nodes)
    }

    /// The address of `node`'s agent and the token to call it with; a 503 naming the node when
    /// it has none that runs.
    async fn address(&self, client: &kube::Client, node: &str) -> PlatformResult<(String, String)> {
        let unreachable = |why: String| PlatformError::Unavailable(format!("node {node}: {why}"));
        let mut found = self.located(client).await?;
        if !matches!(found.get(node), Some(Located::At(_))) {
            // Only where agents are is reused: one that was missing may have come back.
            self.forget_locations();
            found = self.located(client).await?;
        }
        let ip = match found.remove(node) {
            Some(Located::At(ip)) => ip,
            Some(Located::Missing(why)) => return Err(unreachable(why)),
            None => {
                return Err(unreachable(format!(
                    "no sbx agent runs on this node (no agent Pod in namespace {})",
                    self.settings.namespace
                )));
            }
        };
        let token = self.token().map_err(unreachable)?;
        Ok((super::host_port(&ip, self.settings.port), token))
    }

    /// Opens a streamed exec on `node`'s agent (`path` with its query): the session, its
    /// refusal as the platform error it stands for, or a 503 naming the node.
    pub async fn stream(
        &self,
        client: &kube::Client,
        node: &str,
        path: &str,
    ) -> PlatformResult<crate::shared::exec_stream::ExecSession> {
        let unreachable = |why: String| PlatformError::Unavailable(format!("node {node}: {why}"));
        let (address, token) = self.address(client, node).await?;
        let request = self
            .stream_http
            .get(format!("{}://{address}{path}", self.scheme))
            .bearer_auth(token);
        match crate::shared::exec_stream::connect(request).await {
            Ok(socket) => Ok(crate::shared::exec_stream::client_session(socket)),
            Err((0, reason)) => {
                self.forget_locations();
                Err(unreachable(format!(
                    "its sbx agent at {address} cannot be reached: {}",
                    String::from_utf8_lossy(&reason)
                )))
            }
            Err((status, body)) => Err(match serde_json::from_slice::<AgentFault>(&body) {
                Ok(fault) => PlatformError::from_fault(fault),
                Err(_) => unreachable(format!(
                    "its sbx agent answered HTTP {status}: {}",
                    String::from_utf8_lossy(&body)
                )),
            }),
        }
    }

    /// Reads a body `node`'s agent streams (`path` with its query, a followed log) as it
    /// comes: its chunks until it ends or the receiver is dropped; a refusal as the platform
    /// error it stands for, or a 503 naming the node.
    pub async fn follow(
        &self,
        client: &kube::Client,
        node: &str,
        path: &str,
    ) -> PlatformResult<tokio::sync::mpsc::Receiver<bytes::Bytes>> {
        use futures_util::StreamExt;
        let unreachable = |why: String| PlatformError::Unavailable(format!("node {node}: {why}"));
        let (address, token) = self.address(client, node).await?;
        let response = self
            .stream_http
            .get(format!("{}://{address}{path}", self.scheme))
            .bearer_auth(token)
            .send()
            .await
            .map_err(|e| {
                self.forget_locations();
                unreachable(format!(
                    "its sbx agent at {address} cannot be reached: {}",
                    crate::shared::io::root_cause(&e)
                ))
            })?;
        let status = response.status();
        if !status.is_success() {
            let body = response.bytes().await.unwrap_or_default();
            return Err(match serde_json::from_slice::<AgentFault>(&body) {
                Ok(fault) => PlatformError::from_fault(fault),
                Err(_) => unreachable(format!(
                    "its sbx agent answered HTTP {}: {}",
                    status.as_u16(),
                    String::from_utf8_lossy(&body)
                )),
            });
        }
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            let mut body = response.bytes_stream();
            loop {
                tokio::select! {
                    chunk = body.next() => match chunk {
                        Some(Ok(chunk)) => {
                            if tx.send(chunk).await.is_err() {
                                return;
                            }
                        }
                        _ => return,
                    },
                    _ = tx.closed() => return,
                }
            }
        });
        Ok(rx)
    }

    /// Calls `node`'s agent (`path` with its query), within the agents' time limit (or
    /// `timeout`): its answer, its refusal as the platform error it stands for, or a 503
    /// naming the node when there is no agent to call or it does not answer.
    pub async fn call<T: serde::de::DeserializeOwned>(
        &self,
        client: &kube::Client,
        node: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
        timeout: Option<std::time::Duration>,
    ) -> PlatformResult<T> {
        let unreachable = |why: String| PlatformError::Unavailable(format!("node {node}: {why}"));
        let (address, token) = self.address(client, node).await?;
        let mut request = self
            .http
            .request(method, format!("{}://{address}{path}", self.scheme))
            .bearer_auth(token)
            .timeout(timeout.unwrap_or(self.settings.timeout));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.map_err(|e| {
            // Perhaps a new Pod of the agent, elsewhere: look again next time.
            self.forget_locations();
            unreachable(if e.is_timeout() {
                format!(
                    "its sbx agent at {address} did not answer in {} s",
                    timeout.unwrap_or(self.settings.timeout).as_secs_f64()
                )
            } else {
                format!(
                    "its sbx agent at {address} cannot be reached: {}",
                    crate::shared::io::root_cause(&e)
                )
            })
        })?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| unreachable(format!("its sbx agent's answer broke off: {e}")))?;
        if !status.is_success() {
            return Err(match serde_json::from_slice::<AgentFault>(&body) {
                Ok(fault) => PlatformError::from_fault(fault),
                Err(_) => {
                    let message = serde_json::from_slice::<ErrorEnvelope>(&body)
                        .map(|e| e.error.message)
                        .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned());
                    unreachable(format!(
                        "its sbx agent answered HTTP {}: {message}",
                        status.as_u16()
                    ))
                }
            });
        }
        serde_json::from_slice(&body).map_err(|e| {
            PlatformError::Store(format!(
                "node {node}: an unreadable answer of its sbx agent: {e}"
            ))
        })
    }

    fn token(&self) -> Result<String, String> {
        std::fs::read_to_string(&self.settings.token_file)
            .map(|t| t.trim().to_string())
            .map_err(|e| {
                format!(
                    "the service has no token to call agents with ({}: {e})",
                    self.settings.token_file.display()
                )
            })
    }

    /// The storage of each of `nodes`, every node present: what its agent reports, or an error
    /// entry saying why it could not.
    pub async fn storage(
        &self,
        client: &kube::Client,
        nodes: Vec<String>,
    ) -> PlatformResult<NodeStorage> {
        let located = self.locate(client).await?;
        let token = self.token();
        let calls = nodes.into_iter().map(|node| {
            let where_ = located.get(&node).cloned().unwrap_or_else(|| {
                Located::Missing(format!(
                    "no sbx agent runs on this node (no agent Pod in namespace {})",
                    self.settings.namespace
                ))
            });
            let token = token.clone();
            async move {
                let entry = match (where_, token) {
                    (Located::Missing(why), _) => Err(why),
                    (Located::At(_), Err(why)) => Err(why),
                    (Located::At(ip), Ok(token)) => self.call_storage(&ip, &token).await,
                };
                let entry = entry.unwrap_or_else(|error| NodeStorageEntry::Unreachable { error });
                (node, entry)
            }
        });
        Ok(join_all(calls).await.into_iter().collect())
    }

    async fn call_storage(&self, ip: &str, token: &str) -> Result<NodeStorageEntry, String> {
        let address = super::host_port(ip, self.settings.port);
        let failed = |what: String| format!("sbx agent at {address}: {what}");
        let response = self
            .http
            .get(format!("{}://{address}{STORAGE_PATH}", self.scheme))
            .bearer_auth(token)
            .send()
            .await
            .map_err(|e| {
                failed(if e.is_timeout() {
                    format!("no answer in {} s", self.settings.timeout.as_secs_f64())
                } else {
                    crate::shared::io::root_cause(&e)
                })
            })?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| failed(e.to_string()))?;
        if !status.is_success() {
            let message = serde_json::from_slice::<ErrorEnvelope>(&body)
                .map(|e| e.error.message)
                .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned());
            return Err(failed(format!("HTTP {}: {message}", status.as_u16())));
        }
        match serde_json::from_slice::<NodeStorageEntry>(&body) {
            Ok(entry @ NodeStorageEntry::Pools { .. }) => Ok(entry),
            Ok(NodeStorageEntry::Unreachable { error }) => Err(failed(error)),
            Err(e) => Err(failed(format!("unreadable answer: {e}"))),
        }
    }
}
