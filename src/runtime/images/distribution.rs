//! The store's OCI distribution client: anonymous pulls of manifests and blobs over its own
//! HTTP client, so that every host a pull contacts is checked (issue 43 point 14).
//!
//! A registry names hosts of its own choosing: the token service (the `realm` of its 401's
//! `WWW-Authenticate`) and the targets of redirects (blobs are often served by a CDN). A
//! tenant naming `evil.example/x` could otherwise make the daemon fetch from the host's
//! loopback, the LAN or the cloud's metadata service. So:
//!
//! - every name is resolved by [`GuardedResolver`], which refuses it when any address it
//!   resolves to is not public ([`is_public`]); the connection then goes to the addresses the
//!   check saw (no second lookup a rebinding DNS server could answer differently);
//! - URLs with an IP literal never reach a resolver: [`AddressGuard::check_url`] judges them
//!   before each request and at each redirect hop (reqwest's redirect policy);
//! - registries listed in `[images] privateRegistries` (and, by host, their token services
//!   and redirects on that host) may be on private addresses: an internal mirror, the
//!   tests' loopback registry.
//!
//! Proxies from the environment are not used: the addresses a proxy connects to cannot be
//! checked here.
use std::collections::HashMap;
use std::error::Error as StdError;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use futures_util::StreamExt;
use oci_client::Reference;
use oci_client::client::current_platform_resolver;
use oci_client::manifest::{OciDescriptor, OciImageManifest, OciManifest};
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, WWW_AUTHENTICATE};
use reqwest::{StatusCode, Url};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::MAX_JSON_BYTES;

/// Redirects followed for one request.
const MAX_REDIRECTS: usize = 10;

/// Manifest media types asked for: image manifests and indexes, OCI and Docker.
const MANIFEST_TYPES: &str = "application/vnd.oci.image.manifest.v1+json, \
    application/vnd.docker.distribution.manifest.v2+json, \
    application/vnd.oci.image.index.v1+json, \
    application/vnd.docker.distribution.manifest.list.v2+json";

/// Which host of a pull was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hop {
    /// The registry named by the reference.
    Registry,
    /// A host named by the registry: its token service or a redirect target.
    Named,
}

/// A host refused because it is (or resolves to) an address that is not public.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{host} is at {address}, a {kind} address")]
pub(super) struct Refused {
    /// The host as the URL gave it.
    pub(super) host: String,
    /// The address that made it refused.
    pub(super) address: IpAddr,
    /// What kind of address it is (`loopback`, `private`, …).
    pub(super) kind: &'static str,
}

/// Why a pull failed, before it is turned into a message for the caller.
#[derive(Debug)]
pub(super) enum PullError {
    /// A host of the pull is on an address that is not public.
    Refused(Hop, Refused),
    /// The registry answered with this status (`codes`: the OCI error codes of its body).
    Status { status: u16, codes: Vec<String> },
    /// The token service answered with this status or an unusable body.
    Token(String),
    /// The registry could not be reached.
    Network(reqwest::Error),
    /// Content that does not match its digest.
    Digest {
        /// The digest the manifest or the reference gives.
        expected: String,
        /// The digest of what came.
        actual: String,
    },
    /// A document the store cannot read (why, in our words).
    Invalid(String),
    /// An index without a manifest for this host's platform.
    NoPlatform,
    /// A manifest of a type or schema the store does not handle.
    Unsupported(String),
    /// A blob could not be written.
    Io(std::io::Error),
}

impl From<std::io::Error> for PullError {
    fn from(e: std::io::Error) -> Self {
        PullError::Io(e)
    }
}

/// The kind of a non-public address, `None` for a public one. Refused: unspecified,
/// loopback, RFC 1918, shared (100.64.0.0/10), link-local (cloud metadata), multicast,
/// broadcast and reserved IPv4, the IETF and documentation blocks, Azure's wire server
/// (168.63.129.16); IPv6 loopback, unspecified, unique-local (fc00::/7), link-local,
/// site-local, multicast, documentation, and any IPv4 address embedded (mapped,
/// compatible, NAT64) by its IPv4 verdict.
pub(super) fn non_public_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_kind(v4),
        IpAddr::V6(v6) => v6_kind(v6),
    }
}

fn v4_kind(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    if ip.is_unspecified() || a == 0 {
        Some("unspecified")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared (carrier-grade NAT)")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if ip == Ipv4Addr::new(168, 63, 129, 16) {
        Some("cloud host")
    } else if ip.is_multicast() || a >= 240 {
        Some("multicast or reserved")
    } else if (a, b, c) == (192, 0, 0)
        || (a, b, c) == (192, 0, 2)
        || (a, b, c) == (198, 51, 100)
        || (a, b, c) == (203, 0, 113)
        || (a == 198 && (b == 18 || b == 19))
    {
        Some("reserved")
    } else {
        None
    }
}

fn v6_kind(ip: Ipv6Addr) -> Option<&'static str> {
    let segments = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_kind(v4);
    }
    // NAT64 (64:ff9b::/96) and the deprecated IPv4-compatible form carry an IPv4 address.
    if (segments[0] == 0x64 && segments[1] == 0xff9b && segments[2..6] == [0; 4])
        || (segments[..6] == [0; 6] && !ip.is_loopback() && !ip.is_unspecified())
    {
        let [.., a, b, c, d] = ip.octets();
        return v4_kind(Ipv4Addr::new(a, b, c, d));
    }
    if ip.is_unspecified() {
        Some("unspecified")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if segments[0] & 0xfe00 == 0xfc00 {
        Some("unique-local (private)")
    } else if segments[0] & 0xffc0 == 0xfe80 || segments[0] & 0xffc0 == 0xfec0 {
        Some("link-local")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if segments[0] == 0x2001 && segments[1] == 0xdb8 {
        Some("reserved")
    } else {
        None
    }
}

/// Which hosts may be on private addresses: `[images] privateRegistries`, `host[:port]`.
#[derive(Debug, Default)]
pub(super) struct AddressGuard {
    private: RwLock<Vec<String>>,
}

/// The host of a `host[:port]` entry (brackets of an IPv6 literal removed).
fn entry_host(entry: &str) -> &str {
    if let Some(rest) = entry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match entry.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() && !host.contains(':') => host,
        _ => entry,
    }
}

/// The port of a `host:port` entry, if it has one.
fn entry_port(entry: &str) -> Option<u16> {
    let rest = match entry.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map(|(_, after)| after)?,
        None if entry.matches(':').count() == 1 => entry.split_once(':').map(|(_, p)| p)?,
        None => return None,
    };
    rest.trim_start_matches(':').parse().ok()
}

impl AddressGuard {
    /// Replaces the registries that may be on private addresses.
    pub(super) fn set_private(&self, registries: Vec<String>) {
        let registries = registries
            .into_iter()
            .map(|r| r.trim().to_ascii_lowercase())
            .filter(|r| !r.is_empty())
            .collect();
        *self.private.write().unwrap_or_else(PoisonError::into_inner) = registries;
    }

    /// Whether a name (as the resolver sees it: no port) belongs to a private registry.
    fn trusts_host(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.private
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|entry| entry_host(entry) == host)
    }

    /// Whether `host` at `port` is a private registry's: an entry with a port matches that
    /// port only.
    fn trusts(&self, host: &str, port: Option<u16>) -> bool {
        let host = host.to_ascii_lowercase();
        self.private
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|entry| {
                entry_host(entry) == host && entry_port(entry).is_none_or(|p| Some(p) == port)
            })
    }

    /// Refuses a URL whose host is an IP literal that is not public (names are judged by
    /// [`GuardedResolver`] when they are resolved), and any scheme but `http` and `https`.
    pub(super) fn check_url(&self, url: &Url) -> Result<(), Refused> {
        let ip = match url.host() {
            Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
            Some(url::Host::Domain(_)) if matches!(url.scheme(), "http" | "https") => {
                return Ok(());
            }
            _ => {
                return Err(Refused {
                    host: url.as_str().chars().take(60).collect(),
                    address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                    kind: "non-HTTP",
                });
            }
        };
        let Some(kind) = non_public_kind(ip) else {
            return Ok(());
        };
        if self.trusts(&ip.to_string(), url.port_or_known_default()) {
            return Ok(());
        }
        Err(Refused {
            host: url.host_str().unwrap_or_default().to_string(),
            address: ip,
            kind,
        })
    }
}

/// The HTTP client's resolver: a name resolving to any address that is not public is refused
/// (unless it is a private registry's); the connection uses the addresses checked here.
struct GuardedResolver {
    guard: Arc<AddressGuard>,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.guard.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addresses: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if !guard.trusts_host(&host) {
                for address in &addresses {
                    if let Some(kind) = non_public_kind(address.ip()) {
                        return Err(Box::new(Refused {
                            host,
                            address: address.ip(),
                            kind,
                        })
                            as Box<dyn StdError + Send + Sync>);
                    }
                }
            }
            Ok(Box::new(addresses.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The [`Refused`] somewhere in an error's chain of causes, if any.
fn refused_in(error: &(dyn StdError + 'static)) -> Option<Refused> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(refused) = e.downcast_ref::<Refused>() {
            return Some(refused.clone());
        }
        cause = e.source();
    }
    None
}

/// An anonymous OCI distribution client whose every connection passes the [`AddressGuard`].
pub(super) struct Distribution {
    http: reqwest::Client,
    guard: Arc<AddressGuard>,
    insecure: Vec<String>,
    /// Bearer tokens from registries' token services, by `registry/repository`.
    tokens: Mutex<HashMap<String, String>>,
}

impl Distribution {
    /// A client; `insecure` registries (`host:port`) are reached over plain HTTP.
    pub(super) fn new(insecure: Vec<String>) -> Distribution {
        let guard = Arc::new(AddressGuard::default());
        let hops = guard.clone();
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= MAX_REDIRECTS {
                return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
            }
            match hops.check_url(attempt.url()) {
                Ok(()) => attempt.follow(),
                Err(refused) => attempt.error(refused),
            }
        });
        let builder = reqwest::Client::builder()
            .dns_resolver(Arc::new(GuardedResolver {
                guard: guard.clone(),
            }))
            .redirect(redirects)
            .no_proxy()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(120))
            .user_agent(concat!("sbx/", env!("CARGO_PKG_VERSION")));
        // Building fails only when the TLS backend cannot start; a client that can reach
        // nothing then reports that on each pull instead of stopping the daemon.
        let http = builder.build().unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot build the registry HTTP client");
            reqwest::Client::new()
        });
        Distribution {
            http,
            guard,
            insecure,
            tokens: Mutex::new(HashMap::new()),
        }
    }

    /// The guard, to set the private registries.
    pub(super) fn guard(&self) -> &AddressGuard {
        &self.guard
    }

    /// Whether `registry` is listed as plain HTTP.
    pub(super) fn is_insecure(&self, registry: &str) -> bool {
        self.insecure.iter().any(|r| r == registry)
    }

    fn base(&self, reference: &Reference) -> String {
        let registry = reference.resolve_registry();
        let scheme = if self.is_insecure(registry) {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{registry}/v2/{}", reference.repository())
    }

    fn token_key(reference: &Reference) -> String {
        format!(
            "{}/{}",
            reference.resolve_registry(),
            reference.repository()
        )
    }

    /// A GET of `url` (accepting `accept`), with the repository's bearer token once a token
    /// service gave one; on a 401 with a Bearer challenge, fetches a token anonymously and
    /// asks again.
    async fn get(
        &self,
        reference: &Reference,
        url: &str,
        accept: &str,
    ) -> Result<reqwest::Response, PullError> {
        let url = Url::parse(url).map_err(|e| PullError::Invalid(format!("bad URL: {e}")))?;
        self.guard
            .check_url(&url)
            .map_err(|r| PullError::Refused(Hop::Registry, r))?;
        let key = Self::token_key(reference);
        let host = url.host_str().unwrap_or_default().to_string();
        let mut retried = false;
        loop {
            let token = self
                .tokens
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&key)
                .cloned();
            let mut request = self.http.get(url.clone()).header(ACCEPT, accept);
            if let Some(token) = &token {
                request = request.header(AUTHORIZATION, format!("Bearer {token}"));
            }
            let response = request.send().await.map_err(|e| network_at(e, &host))?;
            if response.status() != StatusCode::UNAUTHORIZED || retried {
                return Ok(response);
            }
            let Some(challenge) = bearer_challenge(response.headers()) else {
                return Ok(response);
            };
            let token = self.token(reference, &challenge).await?;
            self.tokens
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(key.clone(), token);
            retried = true;
        }
    }

    /// An anonymous pull token from the token service a registry's challenge names.
    async fn token(
        &self,
        reference: &Reference,
        challenge: &Challenge,
    ) -> Result<String, PullError> {
        let mut realm = Url::parse(&challenge.realm)
            .map_err(|_| PullError::Token("its token service URL is not valid".into()))?;
        self.guard
            .check_url(&realm)
            .map_err(|r| PullError::Refused(Hop::Named, r))?;
        {
            let mut query = realm.query_pairs_mut();
            query.append_pair(
                "scope",
                &format!("repository:{}:pull", reference.repository()),
            );
            if let Some(service) = &challenge.service {
                query.append_pair("service", service);
            }
        }
        let response = self
            .http
            .get(realm)
            .send()
            .await
            .map_err(|e| match refused_in(&e) {
                Some(refused) => PullError::Refused(Hop::Named, refused),
                None => PullError::Token(format!(
                    "its token service cannot be reached ({})",
                    phrase(&e)
                )),
            })?;
        let status = response.status();
        if !status.is_success() {
            return Err(PullError::Token(format!(
                "its token service answered HTTP {}",
                status.as_u16()
            )));
        }
        let body = read_capped(response, MAX_JSON_BYTES).await?;
        #[derive(serde::Deserialize)]
        struct TokenDoc {
            token: Option<String>,
            access_token: Option<String>,
        }
        let doc: TokenDoc = serde_json::from_slice(&body)
            .map_err(|_| PullError::Token("its token service sent no token".into()))?;
        doc.token
            .or(doc.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| PullError::Token("its token service sent no token".into()))
    }

    /// One manifest (image or index) by tag or digest: the bytes, verified against the
    /// digest when the reference names one, and their digest.
    async fn manifest(
        &self,
        reference: &Reference,
        tag_or_digest: &str,
    ) -> Result<(Vec<u8>, String), PullError> {
        let url = format!("{}/manifests/{tag_or_digest}", self.base(reference));
        let response = self.get(reference, &url, MANIFEST_TYPES).await?;
        let response = check_status(response).await?;
        let body = read_capped(response, MAX_JSON_BYTES).await?;
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&body)));
        if tag_or_digest.starts_with("sha256:") && tag_or_digest != digest {
            return Err(PullError::Digest {
                expected: tag_or_digest.to_string(),
                actual: digest,
            });
        }
        Ok((body, digest))
    }

    /// The image manifest for this host's platform (from an index if the reference names
    /// one), its digest, and the image config's bytes.
    pub(super) async fn pull_manifest_and_config(
        &self,
        reference: &Reference,
    ) -> Result<(OciImageManifest, String, Vec<u8>), PullError> {
        let wanted = reference
            .digest()
            .or(reference.tag())
            .unwrap_or("latest")
            .to_string();
        let (body, digest) = self.manifest(reference, &wanted).await?;
        let (manifest, digest) = match parse_manifest(&body)? {
            OciManifest::Image(manifest) => (manifest, digest),
            OciManifest::ImageIndex(index) => {
                let platform_digest =
                    current_platform_resolver(&index.manifests).ok_or(PullError::NoPlatform)?;
                let (body, digest) = self.manifest(reference, &platform_digest).await?;
                match parse_manifest(&body)? {
                    OciManifest::Image(manifest) => (manifest, digest),
                    OciManifest::ImageIndex(_) => {
                        return Err(PullError::Invalid(
                            "its index points at another index".into(),
                        ));
                    }
                }
            }
        };
        let mut config = Vec::new();
        self.blob(reference, &manifest.config, |chunk| {
            config.extend_from_slice(chunk);
            Ok(())
        })
        .await?;
        Ok((manifest, digest, config))
    }

    /// Streams a blob into `file`, verified against the descriptor's digest and size.
    pub(super) async fn pull_blob(
        &self,
        reference: &Reference,
        descriptor: &OciDescriptor,
        file: tokio::fs::File,
    ) -> Result<(), PullError> {
        let mut out = tokio::io::BufWriter::new(file);
        let url = format!("{}/blobs/{}", self.base(reference), descriptor.digest);
        let response = self.get(reference, &url, "*/*").await?;
        let response = check_status(response).await?;
        let mut hasher = Sha256::new();
        let mut received = 0u64;
        let limit = u64::try_from(descriptor.size).ok().filter(|s| *s > 0);
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(network)?;
            received += chunk.len() as u64;
            if limit.is_some_and(|l| received > l) {
                return Err(PullError::Invalid(
                    "a blob is larger than its descriptor says".into(),
                ));
            }
            hasher.update(&chunk);
            out.write_all(&chunk).await?;
        }
        out.flush().await?;
        verify(&descriptor.digest, hasher)
    }

    /// A small blob (the config), passed chunk by chunk to `sink`, capped and verified.
    async fn blob(
        &self,
        reference: &Reference,
        descriptor: &OciDescriptor,
        mut sink: impl FnMut(&[u8]) -> Result<(), PullError>,
    ) -> Result<(), PullError> {
        let url = format!("{}/blobs/{}", self.base(reference), descriptor.digest);
        let response = self.get(reference, &url, "*/*").await?;
        let response = check_status(response).await?;
        let body = read_capped(response, MAX_JSON_BYTES).await?;
        let mut hasher = Sha256::new();
        hasher.update(&body);
        verify(&descriptor.digest, hasher)?;
        sink(&body)
    }
}

/// The error of a request to `host` (the registry's own) that did not get an answer: a
/// refused host (the registry, or one it redirected to), else the network.
fn network_at(e: reqwest::Error, host: &str) -> PullError {
    match refused_in(&e) {
        Some(refused) => {
            let hop = if !e.is_redirect() && refused.host.eq_ignore_ascii_case(host) {
                Hop::Registry
            } else {
                Hop::Named
            };
            PullError::Refused(hop, refused)
        }
        None => PullError::Network(e),
    }
}

/// [`network_at`] for a body being read: any refusal is of a host the registry named.
fn network(e: reqwest::Error) -> PullError {
    network_at(e, "")
}

/// A short, fixed phrase for a network failure (the details are logged, not sent).
pub(super) fn phrase(e: &reqwest::Error) -> &'static str {
    let cause = crate::shared::io::root_cause(e).to_ascii_lowercase();
    if e.is_timeout() || cause.contains("timed out") {
        "timed out"
    } else if cause.contains("refused") {
        "connection refused"
    } else if cause.contains("lookup") || cause.contains("resolve") || cause.contains("dns") {
        "the name does not resolve"
    } else if cause.contains("unreachable") || cause.contains("no route") {
        "no route to it"
    } else if e.is_redirect() {
        "too many redirects"
    } else if cause.contains("tls")
        || cause.contains("certificate")
        || cause.contains("handshake")
        || cause.contains("invalid http version")
        || cause.contains("corrupt message")
    {
        "TLS failed"
    } else {
        "the connection failed"
    }
}

/// A non-2xx answer as [`PullError::Status`] with the OCI error codes of its body.
async fn check_status(response: reqwest::Response) -> Result<reqwest::Response, PullError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = read_capped(response, 64 * 1024).await.unwrap_or_default();
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        code: String,
    }
    let codes = serde_json::from_slice::<Envelope>(&body)
        .map(|e| e.errors.into_iter().map(|e| e.code).collect())
        .unwrap_or_default();
    tracing::warn!(status = status.as_u16(), body = %super::clip(&String::from_utf8_lossy(&body), 500),
        "registry refused a request");
    Err(PullError::Status {
        status: status.as_u16(),
        codes,
    })
}

/// The body, at most `limit` bytes (more is [`PullError::Invalid`]).
async fn read_capped(response: reqwest::Response, limit: u64) -> Result<Vec<u8>, PullError> {
    if response.content_length().is_some_and(|l| l > limit) {
        return Err(PullError::Invalid(format!(
            "a document is larger than {} MiB",
            limit >> 20
        )));
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(network)?;
        if body.len() as u64 + chunk.len() as u64 > limit {
            return Err(PullError::Invalid(format!(
                "a document is larger than {} MiB",
                limit >> 20
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn verify(expected: &str, hasher: Sha256) -> Result<(), PullError> {
    let Some(_) = expected.strip_prefix("sha256:") else {
        return Err(PullError::Unsupported(format!(
            "digest algorithm of {}",
            super::clip(expected, 80)
        )));
    };
    let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
    if actual != expected {
        return Err(PullError::Digest {
            expected: expected.to_string(),
            actual,
        });
    }
    Ok(())
}

fn parse_manifest(body: &[u8]) -> Result<OciManifest, PullError> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Versioned {
        schema_version: i64,
        #[serde(default)]
        media_type: Option<String>,
    }
    // serde's messages quote the document: logged, not sent.
    let invalid = |e: serde_json::Error| {
        tracing::warn!(error = %e, "a registry sent a manifest that does not parse");
        PullError::Invalid("its manifest is not a valid image manifest or index".into())
    };
    let versioned: Versioned = serde_json::from_slice(body).map_err(invalid)?;
    if versioned.schema_version != 2 {
        return Err(PullError::Unsupported(format!(
            "manifest schema version {}; only version 2 is supported",
            versioned.schema_version
        )));
    }
    if let Some(media_type) = versioned.media_type {
        if !MANIFEST_TYPES.split(", ").any(|t| t == media_type) {
            return Err(PullError::Unsupported(format!(
                "manifest type {}",
                super::clip(&media_type, 100)
            )));
        }
    }
    serde_json::from_slice(body).map_err(invalid)
}

/// A `WWW-Authenticate: Bearer realm=…[, service=…]` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Challenge {
    realm: String,
    service: Option<String>,
}

fn bearer_challenge(headers: &HeaderMap) -> Option<Challenge> {
    for value in headers.get_all(WWW_AUTHENTICATE) {
        let Ok(text) = value.to_str() else { continue };
        let Ok(challenges) = http_auth::parse_challenges(text) else {
            continue;
        };
        for challenge in challenges {
            if !challenge.scheme.eq_ignore_ascii_case("bearer") {
                continue;
            }
            let param = |name: &str| {
                challenge
                    .params
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.to_unescaped())
            };
            if let Some(realm) = param("realm") {
                return Some(Challenge {
                    realm,
                    service: param("service"),
                });
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;
