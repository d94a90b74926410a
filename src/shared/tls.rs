//! TLS between sbx's own components on Kubernetes: replica to replica (a request passed to the
//! replica holding a tenant's quota Lease, with the client's credentials in it) and service to
//! agent (calls carrying the service's token). One private CA, made once ([`generate`]), signs
//! two certificates and is then thrown away (its key is never stored, so nothing can issue
//! more): the replicas' ([`REPLICA_NAME`], server and client: replicas authenticate each
//! other both ways) and the agents' ([`AGENT_NAME`], server only). Peers are addressed by
//! their Pod IP, which changes with each Pod, so a client checks the peer's certificate
//! against the CA and a fixed name instead of the address ([`client_config`]).
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// The name in the replicas' certificate, which every replica checks in another's.
pub const REPLICA_NAME: &str = "sbx-internal";

/// The name in the agents' certificate, which the service checks when it calls an agent.
pub const AGENT_NAME: &str = "sbx-agent";

/// How long the generated certificates are valid, days (rotation: docs/security.md).
const VALID_DAYS: i64 = 3650;

/// One certificate and its key, PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct Pair {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pair").finish_non_exhaustive()
    }
}

/// What [`generate`] makes: the CA's certificate (its key is dropped) and the two pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// The CA's certificate, PEM: what every peer is checked against.
    pub ca_pem: String,
    /// The replicas' pair (server and client authentication, [`REPLICA_NAME`]).
    pub replica: Pair,
    /// The agents' pair (server authentication, [`AGENT_NAME`]).
    pub agent: Pair,
}

/// A new CA and the two certificates it signs (see the module).
pub fn generate() -> Result<Generated, String> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let now = time::OffsetDateTime::now_utc();
    let valid = |params: &mut CertificateParams| {
        params.not_before = now - time::Duration::hours(1);
        params.not_after = now + time::Duration::days(VALID_DAYS);
    };
    let e = |e: rcgen::Error| format!("generating the internal TLS certificates: {e}");
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    // A name of its own: a certificate of another sbx's CA is then an unknown issuer, not
    // a bad signature of this one.
    let mut nonce = [0u8; 8];
    getrandom::fill(&mut nonce).map_err(|e| format!("getrandom: {e}"))?;
    ca.distinguished_name.push(
        DnType::CommonName,
        format!("sbx internal CA {}", hex::encode(nonce)),
    );
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    valid(&mut ca);
    let ca_key = KeyPair::generate().map_err(e)?;
    let ca_cert = ca.self_signed(&ca_key).map_err(e)?;
    let ca_pem = ca_cert.pem();
    let issuer = Issuer::new(ca, ca_key);
    let leaf = |name: &str, usages: Vec<ExtendedKeyUsagePurpose>| -> Result<Pair, String> {
        let mut params = CertificateParams::new(vec![name.to_string()]).map_err(e)?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = usages;
        valid(&mut params);
        let key = KeyPair::generate().map_err(e)?;
        let cert = params.signed_by(&key, &issuer).map_err(e)?;
        Ok(Pair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    };
    Ok(Generated {
        replica: leaf(
            REPLICA_NAME,
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )?,
        agent: leaf(AGENT_NAME, vec![ExtendedKeyUsagePurpose::ServerAuth])?,
        ca_pem,
    })
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn roots(ca_pem: &str) -> Result<Arc<RootCertStore>, String> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| format!("the internal CA certificate: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("the internal CA certificate: {e}"))?;
    }
    if roots.is_empty() {
        return Err("the internal CA certificate: no certificate in the PEM".into());
    }
    Ok(Arc::new(roots))
}

fn chain_and_key(
    pair: &Pair,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let chain = CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the internal TLS certificate: {e}"))?;
    if chain.is_empty() {
        return Err("the internal TLS certificate: no certificate in the PEM".into());
    }
    let key = PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes())
        .map_err(|e| format!("the internal TLS key: {e}"))?;
    Ok((chain, key))
}

/// A server presenting `pair`; with `clients_of` (a CA, PEM), only clients presenting a
/// certificate that CA signed for client authentication complete the handshake. HTTP/1.1
/// and HTTP/2 are offered (ALPN).
pub fn server_config(
    pair: &Pair,
    clients_of: Option<&str>,
) -> Result<Arc<rustls::ServerConfig>, String> {
    let (chain, key) = chain_and_key(pair)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match clients_of {
        Some(ca) => builder.with_client_cert_verifier(
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots(ca)?, provider())
                .build()
                .map_err(|e| format!("the internal TLS client verifier: {e}"))?,
        ),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("the internal TLS certificate and key: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A client that accepts only a server whose certificate `ca` (PEM) signed for `name`
/// (whatever address it was reached at), presenting `identity` when given. HTTP/1.1 only
/// (ALPN): the passed requests and agent calls are one request per connection at a time.
pub fn client_config(
    ca: &str,
    name: &str,
    identity: Option<&Pair>,
) -> Result<rustls::ClientConfig, String> {
    let name = ServerName::try_from(name.to_string())
        .map_err(|e| format!("the internal TLS name {name:?}: {e}"))?;
    let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(roots(ca)?, provider())
        .build()
        .map_err(|e| format!("the internal TLS server verifier: {e}"))?;
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(FixedName { inner, name }));
    let mut config = match identity {
        Some(pair) => {
            let (chain, key) = chain_and_key(pair)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("the internal TLS client certificate: {e}"))?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The CA's usual checks, against a fixed name instead of the address the peer was reached
/// at (a Pod IP no certificate can name in advance).
#[derive(Debug)]
struct FixedName {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl ServerCertVerifier for FixedName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _reached_at: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_material_builds_both_sides() {
        let g = generate().unwrap();
        assert!(g.ca_pem.contains("BEGIN CERTIFICATE"));
        server_config(&g.replica, Some(&g.ca_pem)).unwrap();
        server_config(&g.agent, None).unwrap();
        client_config(&g.ca_pem, REPLICA_NAME, Some(&g.replica)).unwrap();
        client_config(&g.ca_pem, AGENT_NAME, None).unwrap();
        // Nothing can issue more: the CA's key is not part of the material.
        assert_ne!(g.replica.key_pem, g.agent.key_pem);
        assert!(!format!("{g:?}").contains("PRIVATE KEY"));
    }

    #[test]
    fn garbage_is_refused_with_a_reason() {
        let g = generate().unwrap();
        let bad = Pair {
            cert_pem: "nothing".into(),
            key_pem: g.agent.key_pem.clone(),
        };
        assert!(
            server_config(&bad, None)
                .unwrap_err()
                .contains("certificate")
        );
        assert!(
            client_config("nothing", AGENT_NAME, None)
                .unwrap_err()
                .contains("CA")
        );
    }
}
