//! Sandbox networking (netns, veth, NAT, nftables egress).
//!
//! TEMPORARY placeholder written by the lead so the tree compiles while the network helper
//! works; the helper replaces this whole file.
use std::net::Ipv4Addr;
use std::path::PathBuf;

/// Configuration.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkConfig {
    /// Host netns.
    pub host_netns: Option<String>,
    /// Pool.
    #[serde(default)]
    pub pool: String,
    /// Uplink.
    pub uplink: Option<String>,
    /// DNS.
    pub dns: Option<Vec<Ipv4Addr>>,
}

/// Egress policy.
pub enum Egress {
    /// Anything.
    Unrestricted,
}

impl Egress {
    /// From the whitelist.
    pub fn from_whitelist(_list: Option<&[String]>) -> Result<Egress, String> {
        Ok(Egress::Unrestricted)
    }
}

/// Attachment.
pub struct Attachment {
    /// Netns path.
    pub netns_path: PathBuf,
    /// Address.
    pub address: Ipv4Addr,
}

/// Errors.
#[derive(Debug, thiserror::Error)]
#[error("network: {0}")]
pub struct NetworkError(String);

/// Manager.
pub struct NetworkManager;

impl NetworkManager {
    /// New.
    pub async fn new(_config: NetworkConfig) -> Result<NetworkManager, NetworkError> {
        Err(NetworkError("placeholder".into()))
    }
    /// Attach.
    pub async fn attach(
        &self,
        _key: &str,
        _slot: u32,
        _egress: &Egress,
    ) -> Result<Attachment, NetworkError> {
        Err(NetworkError("placeholder".into()))
    }
    /// Detach.
    pub async fn detach(&self, _key: &str, _slot: u32) -> Result<(), NetworkError> {
        Ok(())
    }
    /// Cleanup.
    pub async fn cleanup_stale(
        &self,
        _keep: &[(String, u32)],
    ) -> Result<Vec<String>, NetworkError> {
        Ok(vec![])
    }
    /// resolv.conf.
    pub fn resolv_conf(&self) -> String {
        String::new()
    }
}
