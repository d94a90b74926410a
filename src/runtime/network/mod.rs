//! Sandbox networking for sbxd: one network namespace per sandbox, a veth pair to the host
//! side, NAT to the outside and a per-sandbox egress policy in nftables, changeable live.
//!
//! # Topology
//!
//! The *host side* is the daemon's own network namespace in production, or a namespace named
//! by [`NetworkConfig::host_netns`] (tests put a "router" there so the real host is never
//! touched). Each sandbox owns a `/30` of the pool chosen by its slot number (allocated and
//! persisted by the caller): for slot `s` the subnet starts at `pool + 4 s`, the host end of the
//! veth (`sbxv<s>`) holds `.1` and is the sandbox's default gateway, the sandbox end (`eth0` in
//! the namespace `<netns_prefix><key>`, bind-mounted under `/run/netns` as `ip netns` does)
//! holds `.2`. IPv6 link-local addresses are not generated on either end: sandboxes are
//! IPv4-only.
//!
//! # Rules
//!
//! Everything lives in the table `inet sbx` of the host side. Base chains are rewritten by
//! every [`NetworkManager::new`] (idempotent); per-sandbox objects are left alone, so running
//! sandboxes keep their policy across a daemon restart.
//!
//! * `prerouting` (hook prerouting, priority raw: before conntrack): a packet from `sbxv*`
//!   whose source address is not routed back through the link it came in on is dropped
//!   (strict reverse-path filtering, `fib saddr . iif`). Without it a sandbox granted NET_RAW
//!   could forge "replies" from a server another sandbox talks to, which conntrack would
//!   de-NAT and `from_sandbox` accept as replies before any sandbox chain's source check.
//! * `forward` (hook forward, policy accept: other forwarding on the host is not ours to
//!   judge): packets going out to `sbxv*` go to `to_sandbox` first, then packets coming in
//!   from `sbxv*` to `from_sandbox`. The destination is judged before the sender: an `accept`
//!   in a sender's chain ends the hook, so no sender's policy can let a packet into a sandbox.
//! * `to_sandbox`: only replies and related ICMP errors pass (`return`, on to the sender's
//!   checks); a new connection from another sandbox is rejected (its client fails at once),
//!   one from outside the host dropped. The daemon itself reaches sandboxes through the
//!   output path, which is not filtered.
//! * `from_sandbox`: replies on connections opened *towards* the sandbox (`ct direction
//!   reply`, which includes ICMP errors about them) pass; anything not IPv4 is rejected; DNS
//!   to the resolvers goes to the sandbox's chain (so `DenyAll` refuses it); then every
//!   destination in the set `deny` is rejected, whatever the sandbox's policy says: the
//!   admin's `egressDeny` ([`NetworkConfig::egress_deny`], by default RFC 1918, 100.64.0.0/10,
//!   link-local and 168.63.129.16), the sandbox pool (every other sandbox) and
//!   [`ALWAYS_DENIED`](crate::shared::egress::ALWAYS_DENIED) (link-local, where cloud metadata services live, among them). Then the
//!   verdict map `egress` sends the packet to the sandbox's own chain `sb<slot>`; an interface
//!   with no entry is rejected. Every packet the sandbox originates is judged, not only the
//!   first of a connection, so tightening a policy also cuts connections already open (and an
//!   old connection cannot be used as a side channel).
//! * `sb<slot>`: first drops a spoofed source address; then, by policy:
//!   * `Unrestricted` ("the internet"): DNS to the resolvers, then anything (the `deny` set
//!     has already been refused).
//!   * `DenyAll` (`egress_whitelist: []`): nothing, DNS included.
//!   * `Allow(list)`: DNS (udp/tcp 53) to the configured resolvers plus destinations in the set
//!     `sb<slot>_allow`. A listed CIDR that covers denied ranges (`0.0.0.0/0`, the pool)
//!     opens only what `deny` leaves.
//!
//!   Accepted packets are counted in the named counter `sb<slot>_tx` (kept across policy
//!   changes) for [`NetworkManager::egress_bytes`]. Refused TCP gets a reset, anything else
//!   `reject with icmpx admin-prohibited`, so clients fail at once instead of timing out (a
//!   reset because the kernel rate-limits ICMP errors per destination: with ICMP alone, a
//!   sandbox hitting its policy repeatedly would soon wait a second per connect).
//! * `input` → `to_host`: a sandbox may not reach any address of the host side (its gateway,
//!   the uplink address, other sandboxes' gateways, broadcast: every packet for one of the
//!   host side's own addresses is delivered locally and so meets this chain, not `forward`),
//!   except replies on connections the host opened and DNS to a resolver that is one of the
//!   host's own addresses; that DNS is then judged by the sandbox's chain like forwarded DNS
//!   (so `DenyAll` refuses it too). IPv6 is rejected here and in `from_sandbox` alike.
//! * `postrouting` (nat): sources in the pool are masqueraded when leaving through the uplink
//!   (with no uplink configured: through any interface that is not a sandbox veth).
//!
//! # Cost
//!
//! Attaching is two calls. [`NetworkManager::prepare`] needs no process, so sbxd runs it while
//! the runtime creates the container: one `nft -f -` on the host side (the sandbox's chain,
//! counter and verdict-map entry). [`NetworkManager::plug`] runs once the container's process
//! (and so its network namespace) exists and spawns nothing: the namespace is bound in-process
//! (a bind mount from a throwaway thread), the veth pair is made with its sandbox end created
//! straight inside the namespace (moving a link between namespaces would wait for an RCU
//! grace period), and addresses, links and the default route are set over route netlink, from
//! a socket on the host side and one opened in the sandbox's namespace (~1 ms in all, where
//! two `ip -batch` runs took ~6 ms). Commands for
//! another namespace join it with `setns` between fork and exec. [`NetworkManager::detach`]
//! spawns two at once, `ip -batch -` (delete the veth) and `nft -f -`. Both spend most of
//! their time waiting in the kernel, not working: removing a network device takes 15-35 ms on
//! the project's VMs, and an nft transaction that deletes anything about 10 ms more than one
//! that only adds (a wait for an RCU grace period); a caller may overlap `detach` with the
//! runtime's own delete. `set_egress` is one `nft -f -`, which flushes, so it waits too.
//!
//! `nft` runs one at a time per manager. Each run first reads the table (its cache) and
//! starts over when another transaction committed meanwhile; with 1,000 sandboxes the table
//! takes ~200 ms to read, and a few `nft` at once kept restarting each other for seconds (a
//! create timed out after 15 s). In turn, each transaction is ~10 ms.
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::fs::{self, File};
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;
use serde::Deserialize;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

mod command;
mod link;
mod netns;
mod nft;
mod resolvers;
mod slots;

pub use crate::shared::egress::{Egress, Ipv4Net};
use crate::shared::egress::{LINK_LOCAL, denied_ranges, normalize};
use command::*;
pub use netns::in_netns;
use netns::*;
use nft::*;
use resolvers::*;
use slots::*;
pub use slots::{host_veth_name, slot_addresses};

/// Directory where named network namespaces are bind-mounted (the `ip netns` convention).
pub const NETNS_DIR: &str = "/run/netns";
/// Links one `ip -batch` deletes: well within [`command::COMMAND_TIMEOUT`].
const LINKS_PER_BATCH: usize = 100;

/// The nftables table (family `inet`) that holds every sbx rule on the host side.
pub const NFT_TABLE: &str = "sbx";
/// Prefix of host-side veth names; the slot number follows.
pub const HOST_VETH_PREFIX: &str = "sbxv";
/// Name of the sandbox end of the veth pair, inside the sandbox namespace.
pub const SANDBOX_IFNAME: &str = "eth0";
/// Default address pool.
pub const DEFAULT_POOL: &str = "10.88.0.0/16";
/// Default prefix of sandbox network namespace names.
pub const DEFAULT_NETNS_PREFIX: &str = "sbx-";
/// Longest sandbox key.
pub const KEY_MAX_LEN: usize = 10;

/// Configuration (from the daemon config file section `[network]`, camelCase keys).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NetworkConfig {
    /// Name of an existing network namespace that plays the host/router side (veth host ends,
    /// forwarding, NAT, nftables). None = the daemon's own namespace. Tests set this.
    pub host_netns: Option<String>,
    /// Address pool for sandboxes, default "10.88.0.0/16"; each sandbox gets a /30 by slot.
    pub pool: String,
    /// Interface that NAT goes out of; None = masquerade on any interface that is not a
    /// sandbox veth.
    pub uplink: Option<String>,
    /// DNS servers sandboxes may always reach (and get in /etc/resolv.conf); None = the
    /// non-loopback nameservers of the host's /etc/resolv.conf (or systemd-resolved's upstream
    /// list when the host only points at a local stub).
    pub dns: Option<Vec<Ipv4Addr>>,
    /// Prefix of sandbox namespace names (`<prefix><key>` under /run/netns), default "sbx-".
    /// [`NetworkManager::cleanup_stale`] removes only namespaces with this prefix, so two
    /// managers on one machine (tests) must use different prefixes.
    pub netns_prefix: String,
    /// Destinations no sandbox may reach whatever its `egress_whitelist` says (IPv4 CIDRs or
    /// bare addresses); None = [`DEFAULT_EGRESS_DENY`] (RFC 1918, 100.64.0.0/10, link-local,
    /// 168.63.129.16). The sandbox pool, the host side's own addresses and [`ALWAYS_DENIED`](crate::shared::egress::ALWAYS_DENIED)
    /// are refused in any case; `[]` leaves only those.
    pub egress_deny: Option<Vec<String>>,
}

impl NetworkConfig {
    /// What no sandbox reaches but the pool: the admin's deny list
    /// ([`egress_deny`](Self::egress_deny), or its default) and [`ALWAYS_DENIED`](crate::shared::egress::ALWAYS_DENIED). The daemon
    /// calls it at start-up so that a bad entry stops it there, naming the setting.
    pub fn deny_list(&self) -> Result<Vec<Ipv4Net>, NetworkError> {
        denied_ranges(self.egress_deny.as_deref()).map_err(NetworkError::Config)
    }
}

impl Default for NetworkConfig {
    fn default() -> Self {
        Self {
            host_netns: None,
            pool: DEFAULT_POOL.to_owned(),
            uplink: None,
            dns: None,
            netns_prefix: DEFAULT_NETNS_PREFIX.to_owned(),
            egress_deny: None,
        }
    }
}

/// What [`NetworkManager::attach`] set up for one sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Name of the sandbox namespace (`<netns_prefix><key>`).
    pub netns_name: String,
    /// Its bind mount, for the OCI config's network namespace path.
    pub netns_path: PathBuf,
    /// The sandbox's address on `eth0`.
    pub address: Ipv4Addr,
    /// Its default gateway (the host end of the veth).
    pub gateway: Ipv4Addr,
    /// Prefix length of the point-to-point subnet (30).
    pub prefix_len: u8,
    /// Host end of the veth pair, on the host side.
    pub host_veth: String,
    /// Slot in the pool.
    pub slot: u32,
    /// Resolvers for the sandbox's /etc/resolv.conf.
    pub dns: Vec<Ipv4Addr>,
}

/// Why a network operation failed.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// The `[network]` configuration cannot be used.
    #[error("invalid network configuration: {0}")]
    Config(String),
    /// The sandbox key is not 1-10 characters of `[a-z0-9]`.
    #[error("invalid sandbox network key {0:?}: expected 1-10 characters of [a-z0-9]")]
    InvalidKey(String),
    /// The slot has no /30 in the pool.
    #[error("slot {slot} does not fit the address pool {pool} ({capacity} slots)")]
    SlotOutOfRange {
        /// The slot asked for.
        slot: u32,
        /// The pool.
        pool: Ipv4Net,
        /// How many /30 slots the pool holds.
        capacity: u64,
    },
    /// `attach` found the sandbox's namespace already there (a leftover: detach or
    /// `cleanup_stale` first).
    #[error("network namespace {0} already exists")]
    AlreadyExists(String),
    /// The slot's veth or nft objects exist already (another sandbox, or a leftover: detach
    /// it or run `cleanup_stale` first).
    #[error("slot {0} is in use: its veth or nft objects exist already")]
    SlotInUse(u32),
    /// The sandbox has no nft objects (never attached, or detached).
    #[error("sandbox network in slot {0} is not attached")]
    NotAttached(u32),
    /// An `ip` or `nft` command failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// Command line, with the namespace it ran in.
        command: String,
        /// Exit status.
        status: String,
        /// Its standard error, plus the batch line that failed when `ip` names one.
        stderr: String,
    },
    /// A system call or file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A command's output could not be understood.
    #[error("unexpected output from `{command}`: {detail}")]
    Output {
        /// Command line.
        command: String,
        /// What was wrong.
        detail: String,
    },
}

fn io_error(context: impl Into<String>) -> impl FnOnce(io::Error) -> NetworkError {
    let context = context.into();
    move |source| NetworkError::Io { context, source }
}

/// Per-sandbox networking on the host side; the module documentation has the rules.
#[derive(Debug, Clone)]
pub struct NetworkManager {
    /// Bind mount of the host-side namespace; None = the daemon's own.
    host_netns: Option<PathBuf>,
    pool: Ipv4Net,
    uplink: Option<String>,
    dns: Vec<Ipv4Addr>,
    /// Every destination refused before a sandbox's own policy is read: the admin's deny
    /// list, the pool and [`ALWAYS_DENIED`](crate::shared::egress::ALWAYS_DENIED), normalized (disjoint, for an nft interval set).
    deny: Vec<Ipv4Net>,
    netns_prefix: String,
    /// Whether the kernel has IPv6 (then link-local address generation is turned off on both
    /// veth ends).
    ipv6: bool,
    /// Held by each `nft` run (see "Cost" above).
    nft_turn: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// Route-netlink connection on the host side, opened on first use.
    host_link: std::sync::Arc<tokio::sync::OnceCell<rtnetlink::Handle>>,
}

impl NetworkManager {
    /// Prepares the host side once: validates the configuration, makes `/run/netns` a shared
    /// mount (as `ip netns` does), enables `ip_forward` in the host-side namespace and installs
    /// the base of table `inet sbx`. Idempotent: the base chains are flushed and rewritten in
    /// one transaction; per-sandbox objects are kept.
    pub async fn new(config: NetworkConfig) -> Result<NetworkManager, NetworkError> {
        let manager = Self::from_config(config, resolvers_from_host)?;
        in_netns(None, prepare_netns_dir)
            .await?
            .map_err(io_error(format!("prepare {NETNS_DIR}")))?;
        in_netns(manager.host_netns.clone(), || {
            fs::write("/proc/sys/net/ipv4/ip_forward", "1")
        })
        .await?
        .map_err(io_error(
            "enable net.ipv4.ip_forward in the host-side namespace",
        ))?;
        manager
            .nft(&base_script(
                manager.pool,
                manager.uplink.as_deref(),
                &manager.dns,
                &manager.deny,
            ))
            .await?;
        Ok(manager)
    }

    /// Checks the configuration without touching the system (`resolvers` supplies the default
    /// DNS servers).
    fn from_config(
        config: NetworkConfig,
        resolvers: impl FnOnce() -> Vec<Ipv4Addr>,
    ) -> Result<NetworkManager, NetworkError> {
        let pool: Ipv4Net = config
            .pool
            .parse()
            .map_err(|e| NetworkError::Config(format!("pool {:?}: {e}", config.pool)))?;
        if pool.prefix_len() > 30 {
            return Err(NetworkError::Config(format!(
                "pool {pool} is too small: each sandbox needs a /30"
            )));
        }
        if pool.overlaps(&LINK_LOCAL) || pool.contains(Ipv4Addr::LOCALHOST) {
            return Err(NetworkError::Config(format!(
                "pool {pool} overlaps the link-local or loopback range"
            )));
        }
        let prefix = &config.netns_prefix;
        if prefix.is_empty()
            || prefix.len() > 64
            || prefix.starts_with('.')
            || !prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(NetworkError::Config(format!(
                "netnsPrefix {prefix:?} must be 1-64 characters of [A-Za-z0-9_.-], not starting with '.'"
            )));
        }
        if let Some(uplink) = config.uplink.as_ref().filter(|u| !valid_ifname(u)) {
            return Err(NetworkError::Config(format!(
                "uplink {uplink:?} is not an interface name"
            )));
        }
        let host_netns = match &config.host_netns {
            None => None,
            Some(name) => {
                if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                    return Err(NetworkError::Config(format!(
                        "hostNetns {name:?} is not a namespace name"
                    )));
                }
                let path = Path::new(NETNS_DIR).join(name);
                if !path.exists() {
                    return Err(NetworkError::Config(format!(
                        "hostNetns {name:?}: {} does not exist",
                        path.display()
                    )));
                }
                Some(path)
            }
        };
        let deny = normalize(config.deny_list()?.into_iter().chain([pool]).collect());
        let dns = match config.dns {
            Some(dns) => dns,
            None => resolvers(),
        };
        if let Some(bad) = dns
            .iter()
            .find(|ip| ip.is_loopback() || ip.is_unspecified() || ip.is_multicast())
        {
            return Err(NetworkError::Config(format!(
                "dns server {bad} cannot be reached from a sandbox"
            )));
        }
        Ok(NetworkManager {
            host_netns,
            pool,
            uplink: config.uplink,
            dns,
            deny,
            netns_prefix: config.netns_prefix,
            ipv6: Path::new("/proc/sys/net/ipv6").exists(),
            nft_turn: std::sync::Arc::default(),
            host_link: std::sync::Arc::default(),
        })
    }

    /// The resolvers sandboxes get.
    pub fn dns(&self) -> &[Ipv4Addr] {
        &self.dns
    }

    /// Destinations refused to every sandbox before its own policy (see [`NetworkConfig::egress_deny`]).
    pub fn denied(&self) -> &[Ipv4Net] {
        &self.deny
    }

    /// The sandbox address pool.
    pub fn pool(&self) -> Ipv4Net {
        self.pool
    }

    /// How many sandboxes (slots `0..capacity`) the pool holds.
    pub fn capacity(&self) -> u64 {
        self.pool.size() / 4
    }

    /// Name of the sandbox namespace for `key`.
    pub fn netns_name(&self, key: &str) -> String {
        format!("{}{key}", self.netns_prefix)
    }

    /// What `attach` sets up (or set up) for `key` in `slot`, without touching the system.
    pub fn attachment(&self, key: &str, slot: u32) -> Result<Attachment, NetworkError> {
        check_key(key)?;
        let (gateway, address) = slot_addresses(self.pool, slot)?;
        let netns_name = self.netns_name(key);
        Ok(Attachment {
            netns_path: Path::new(NETNS_DIR).join(&netns_name),
            netns_name,
            address,
            gateway,
            prefix_len: 30,
            host_veth: host_veth_name(slot),
            slot,
            dns: self.dns.clone(),
        })
    }

    /// Creates the namespace `<netns_prefix><key>`, the veth pair (host end `sbxv<slot>` on the
    /// host side, `eth0` in the sandbox), addresses from the slot's /30, `lo` up, the default
    /// route via the host end and the sandbox's egress policy. On failure whatever was made is
    /// removed again.
    pub async fn attach(
        &self,
        key: &str,
        slot: u32,
        egress: &Egress,
    ) -> Result<Attachment, NetworkError> {
        let att = self.prepare(key, slot, egress).await?;
        if let Err(error) = self.plug(&att, None).await {
            if let Err(undo) = self.clear_slot(slot).await {
                tracing::warn!(error = %undo, key, slot, "could not undo a failed network attach");
            }
            return Err(error);
        }
        Ok(att)
    }

    /// The half of a sandbox network that needs no process yet (a caller runs it while the
    /// runtime creates the container): the sandbox's nft objects with its egress policy, and
    /// the check that no leftover holds the slot's veth name ([`NetworkError::SlotInUse`]
    /// then). Removed again on failure. [`plug`](Self::plug) makes the rest.
    pub async fn prepare(
        &self,
        key: &str,
        slot: u32,
        egress: &Egress,
    ) -> Result<Attachment, NetworkError> {
        let att = self.attachment(key, slot)?;
        let host = self.host_link().await?;
        let script = sandbox_script(&att, egress, true);
        let (veth_taken, rules) =
            tokio::join!(link::exists(&host, &att.host_veth), self.nft(&script));
        let rules_taken = matches!(&rules, Err(NetworkError::Command { stderr, .. }) if stderr.contains("File exists"));
        let veth_taken = match veth_taken {
            Ok(taken) => taken,
            Err(e) => {
                if rules.is_ok() {
                    let _ = self.nft(&remove_script(&[slot])).await;
                }
                return Err(e);
            }
        };
        match rules {
            Ok(_) if veth_taken => {
                // Ours to undo: the rules this call made.
                if let Err(undo) = self.nft(&remove_script(&[slot])).await {
                    tracing::warn!(error = %undo, key, slot, "could not undo a failed network prepare");
                }
                Err(NetworkError::SlotInUse(slot))
            }
            Ok(_) => Ok(att),
            Err(_) if rules_taken => Err(NetworkError::SlotInUse(slot)),
            Err(e) => Err(e),
        }
    }

    /// Plugs a prepared slot into the sandbox: binds the network namespace of process `pid`
    /// (the runtime creates it inside the sandbox's user namespace; None: a new one) as
    /// `<netns_prefix><key>`, makes the veth pair (host end `sbxv<slot>`, `eth0` inside) and
    /// configures both ends. On failure what this call made is
    /// removed again; the prepared rules stay for the caller ([`detach`](Self::detach)
    /// removes all).
    pub async fn plug(&self, att: &Attachment, pid: Option<u32>) -> Result<(), NetworkError> {
        let host = self.host_link().await?;
        let source = pid.map(|pid| PathBuf::from(format!("/proc/{pid}/ns/net")));
        let path = att.netns_path.clone();
        in_netns(None, move || create_netns(&path, source.as_deref()))
            .await?
            .map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => NetworkError::AlreadyExists(att.netns_name.clone()),
                _ => io_error(format!(
                    "create network namespace {}",
                    att.netns_path.display()
                ))(e),
            })?;
        let (made_veth, plugged) = link::plug(&host, att, self.ipv6).await;
        let Err(error) = plugged else {
            return Ok(());
        };
        let undo = async {
            if made_veth {
                self.delete_links(std::slice::from_ref(&att.host_veth))
                    .await?;
            }
            delete_netns(&att.netns_path)
                .map_err(io_error(format!("remove {}", att.netns_path.display())))
                .map(drop)
        };
        if let Err(undo) = undo.await {
            tracing::warn!(error = %undo, netns = %att.netns_name, "could not undo a failed network plug");
        }
        Err(if link::name_taken(&error) && !made_veth {
            NetworkError::SlotInUse(att.slot)
        } else {
            error
        })
    }

    /// Removes the host-side veth and the nft objects of a slot (not the namespace, which is
    /// named by sandbox): for a caller that owns the slot and finds it held by leftovers
    /// ([`NetworkError::SlotInUse`]). Idempotent.
    pub async fn clear_slot(&self, slot: u32) -> Result<(), NetworkError> {
        let (veth, script) = ([host_veth_name(slot)], remove_script(&[slot]));
        let (links, rules) = tokio::join!(self.delete_links(&veth), self.nft(&script));
        links.and(rules).map(drop)
    }

    /// The host side's route-netlink connection.
    async fn host_link(&self) -> Result<rtnetlink::Handle, NetworkError> {
        self.host_link
            .get_or_try_init(|| link::connect(self.host_netns.clone()))
            .await
            .cloned()
    }

    /// Replaces the sandbox's egress policy in one nft transaction; connections the new policy
    /// refuses are cut at their next packet.
    pub async fn set_egress(
        &self,
        key: &str,
        slot: u32,
        egress: &Egress,
    ) -> Result<(), NetworkError> {
        let att = self.attachment(key, slot)?;
        let script = sandbox_script(&att, egress, false);
        match self.nft(&script).await {
            Err(NetworkError::Command { stderr, .. })
                if stderr.contains("No such file or directory") =>
            {
                Err(NetworkError::NotAttached(slot))
            }
            other => other.map(drop),
        }
    }

    /// Removes everything attach made: the veth pair, the sandbox's nft objects and, last,
    /// the namespace's bind mount. Idempotent: missing pieces are not errors. The namespace
    /// goes only once the rest is gone, so that a removal cut short (a crash) leaves it as
    /// the mark by which the next start finds the rest.
    pub async fn detach(&self, key: &str, slot: u32) -> Result<(), NetworkError> {
        let att = self.attachment(key, slot)?;
        // The veth before the namespace: deleting it takes both ends down at once, whereas
        // the namespace going away would only drop its end later, asynchronously.
        self.clear_slot(slot).await?;
        delete_netns(&att.netns_path)
            .map_err(io_error(format!("remove {}", att.netns_path.display())))
            .map(drop)
    }

    /// Removes namespaces (with this manager's prefix), host veths and nft objects of sandboxes
    /// not in `keep` (leftovers of a crash); returns what it removed, one line per piece.
    pub async fn cleanup_stale(&self, keep: &[(String, u32)]) -> Result<Vec<String>, NetworkError> {
        let keep_keys: HashSet<&str> = keep.iter().map(|(k, _)| k.as_str()).collect();
        let keep_slots: HashSet<u32> = keep.iter().map(|(_, s)| *s).collect();
        let mut removed = Vec::new();

        let names = in_netns(self.host_netns.clone(), list_interfaces)
            .await?
            .map_err(io_error("list the interfaces of the host side"))?;
        let stale_veths: Vec<String> = names
            .into_iter()
            .filter(|name| {
                parse_slot(name, HOST_VETH_PREFIX, "").is_some_and(|s| !keep_slots.contains(&s))
            })
            .collect();
        self.delete_links(&stale_veths).await?;
        removed.extend(stale_veths.iter().map(|v| format!("veth {v}")));

        let namespaces = sandbox_netns(&self.netns_prefix, self.host_netns.as_deref())
            .map_err(io_error(format!("read {NETNS_DIR}")))?;
        for (key, path) in namespaces {
            if check_key(&key).is_err() || keep_keys.contains(key.as_str()) {
                continue;
            }
            if delete_netns(&path).map_err(io_error(format!("remove {}", path.display())))? {
                removed.push(format!("netns {}{key}", self.netns_prefix));
            }
        }

        let listing = self.nft_list(&["table", "inet", NFT_TABLE]).await?;
        let stale_slots: Vec<u32> = nft_sandbox_slots(&listing)?
            .into_iter()
            .filter(|s| !keep_slots.contains(s))
            .collect();
        if !stale_slots.is_empty() {
            self.nft(&remove_script(&stale_slots)).await?;
            removed.extend(
                stale_slots
                    .iter()
                    .map(|s| format!("nft objects of slot {s}")),
            );
        }
        Ok(removed)
    }

    /// Bytes the sandbox sent that its policy let through (forwarded traffic and DNS), from the
    /// counter `sb<slot>_tx`; kept across policy changes, starts at zero at attach.
    pub async fn egress_bytes(&self, key: &str, slot: u32) -> Result<u64, NetworkError> {
        check_key(key)?;
        slot_addresses(self.pool, slot)?;
        let counter = counter_name(slot);
        let out = match self
            .nft_list(&["counter", "inet", NFT_TABLE, &counter])
            .await
        {
            Err(NetworkError::Command { stderr, .. })
                if stderr.contains("No such file or directory") =>
            {
                return Err(NetworkError::NotAttached(slot));
            }
            other => other?,
        };
        counters(&out)?
            .remove(&slot)
            .ok_or(NetworkError::NotAttached(slot))
    }

    /// [`egress_bytes`](Self::egress_bytes) of every attached sandbox by slot, in one call (for
    /// periodic metering).
    pub async fn egress_bytes_all(&self) -> Result<BTreeMap<u32, u64>, NetworkError> {
        let out = self
            .nft_list(&["counters", "table", "inet", NFT_TABLE])
            .await?;
        counters(&out)
    }

    /// Bytes each sandbox has sent, by slot: the receive counter of the host end of its veth
    /// (every packet the sandbox sent, whatever its fate). Starts at zero with the veth.
    pub async fn veth_rx_bytes_all(&self) -> Result<BTreeMap<u32, u64>, NetworkError> {
        let out = run(
            IP,
            &["-j", "-s", "link", "show", "type", "veth"],
            self.host_netns.as_deref(),
            "",
        )
        .await?;
        veth_rx_bytes(&out)
    }

    /// Content for the sandbox's /etc/resolv.conf.
    pub fn resolv_conf(&self) -> String {
        if self.dns.is_empty() {
            return "# sbx: no DNS resolver configured\n".to_owned();
        }
        let mut out = String::from("# Generated by sbx\n");
        for server in &self.dns {
            out.push_str(&format!("nameserver {server}\n"));
        }
        out
    }

    /// Deletes host-side links by name in one `ip -batch`; absent ones are fine.
    /// Deletes these links (missing ones are no error), [`LINKS_PER_BATCH`] per `ip` run: the
    /// kernel takes 15-35 ms per veth, and a crash can leave a thousand.
    async fn delete_links(&self, names: &[String]) -> Result<(), NetworkError> {
        for chunk in names.chunks(LINKS_PER_BATCH) {
            let batch: String = chunk.iter().map(|n| format!("link del {n}\n")).collect();
            let args = ["-force", "-batch", "-"];
            match run(IP, &args, self.host_netns.as_deref(), &batch).await {
                Err(NetworkError::Command { stderr, .. })
                    if stderr.lines().all(|l| {
                        l.starts_with("Cannot find device") || l.starts_with("Command failed")
                    }) => {}
                other => other.map(drop)?,
            }
        }
        Ok(())
    }

    async fn nft(&self, script: &str) -> Result<String, NetworkError> {
        let _turn = self.nft_turn.lock().await;
        run(NFT, &["-f", "-"], self.host_netns.as_deref(), script).await
    }

    /// `nft -j list <what>` (nft prints nothing for a `list` read from a script file).
    async fn nft_list(&self, what: &[&str]) -> Result<String, NetworkError> {
        let args: Vec<&str> = ["-j", "list"].iter().chain(what).copied().collect();
        let _turn = self.nft_turn.lock().await;
        run(NFT, &args, self.host_netns.as_deref(), "").await
    }
}

/// Whether the host side holds sandbox network pieces that an earlier run may have left: a
/// namespace with the configured prefix, a host veth of a slot, or the `inet sbx` table.
/// Touches nothing (the daemon leaves a host where sbx never ran a sandbox alone).
pub async fn leftovers_exist(config: &NetworkConfig) -> bool {
    let host_netns = config
        .host_netns
        .as_ref()
        .map(|name| Path::new(NETNS_DIR).join(name));
    if sandbox_netns(&config.netns_prefix, host_netns.as_deref()).is_ok_and(|n| !n.is_empty()) {
        return true;
    }
    if host_netns.as_deref().is_some_and(|p| !p.exists()) {
        return false;
    }
    let veths = matches!(
        in_netns(host_netns.clone(), list_interfaces).await,
        Ok(Ok(names)) if names.iter().any(|n| parse_slot(n, HOST_VETH_PREFIX, "").is_some())
    );
    veths
        || run(
            NFT,
            &["list", "table", "inet", NFT_TABLE],
            host_netns.as_deref(),
            "",
        )
        .await
        .is_ok()
}

#[cfg(test)]
mod tests;
