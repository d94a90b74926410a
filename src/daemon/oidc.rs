//! OIDC bearer tokens: the issuer's discovery document and JWKS (fetched on first use and
//! again when a token names a key id not seen yet: key rotation), RS256 and ES256
//! signatures, `iss`, `aud`, `exp` and `nbf` checked, groups and username from configurable
//! claims.
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;

use crate::daemon::error::ServiceError;
use crate::shared::models::identity::OidcDiscovery;

/// `[oidc]` section of the configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OidcConfig {
    /// Issuer URL; `<issuer>/.well-known/openid-configuration` names the JWKS. `https`, or
    /// `http` on a loopback address.
    pub issuer: String,
    /// Client id that clients request tokens for.
    pub client_id: String,
    /// Expected `aud`; the client id when not given.
    #[serde(default)]
    pub audience: Option<String>,
    /// Claim holding the groups (default `groups`).
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// Claim holding the username matched by `user` bindings (default
    /// `preferred_username`, then `email` when `email_verified` is true).
    #[serde(default = "default_username_claim")]
    pub username_claim: String,
}

fn default_groups_claim() -> String {
    "groups".into()
}
fn default_username_claim() -> String {
    "preferred_username".into()
}

impl OidcConfig {
    /// The `aud` tokens must carry.
    pub fn audience(&self) -> &str {
        self.audience.as_deref().unwrap_or(&self.client_id)
    }

    /// What `GET /api/v1/auth/oidc` serves.
    pub fn discovery(&self) -> OidcDiscovery {
        OidcDiscovery {
            issuer: self.issuer.clone(),
            client_id: self.client_id.clone(),
            audience: self.audience().to_string(),
        }
    }

    /// Refuses an issuer that is not `https` (or `http` on loopback).
    pub fn validate(&self) -> Result<(), String> {
        let url = reqwest::Url::parse(&self.issuer)
            .map_err(|e| format!("[oidc] issuer '{}': {e}", self.issuer))?;
        let host = url
            .host_str()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        match url.scheme() {
            "https" => Ok(()),
            "http" if loopback => Ok(()),
            _ => Err(format!(
                "[oidc] issuer '{}' must be https (plain http only on loopback)",
                self.issuer
            )),
        }
    }
}

/// What a verified token says about its bearer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcIdentity {
    /// `sub`.
    pub subject: String,
    /// `iss`.
    pub issuer: String,
    /// The groups claim (empty when absent).
    pub groups: Vec<String>,
    /// The username claim, if any.
    pub username: Option<String>,
}

struct Keys {
    set: JwkSet,
    fetched: Option<Instant>,
}

/// Fetches again at most this often when a token names an unknown key id.
const MIN_REFETCH: Duration = Duration::from_secs(1);
/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY_SECONDS: u64 = 30;

/// Verifies bearer JWTs against one issuer.
pub struct OidcVerifier {
    config: OidcConfig,
    http: reqwest::Client,
    keys: tokio::sync::RwLock<Keys>,
    fetch: tokio::sync::Mutex<()>,
}

/// Whether a bearer credential looks like a JWT (three dot-separated parts), not an API key.
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3
}

fn unauthorized(message: impl Into<String>) -> ServiceError {
    ServiceError::unauthorized(message)
}

impl OidcVerifier {
    /// A verifier for `config`; nothing is fetched until the first token.
    pub fn new(config: OidcConfig) -> OidcVerifier {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        OidcVerifier {
            config,
            http,
            keys: tokio::sync::RwLock::new(Keys {
                set: JwkSet { keys: Vec::new() },
                fetched: None,
            }),
            fetch: tokio::sync::Mutex::new(()),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("{url}: HTTP {}", response.status()));
        }
        response.json().await.map_err(|e| format!("{url}: {e}"))
    }

    /// Fetches the discovery document and the JWKS again (at most every [`MIN_REFETCH`]).
    async fn refresh(&self) -> Result<(), String> {
        let _one = self.fetch.lock().await;
        if let Some(at) = self.keys.read().await.fetched {
            if at.elapsed() < MIN_REFETCH {
                return Ok(());
            }
        }
        let discovery_url = format!(
            "{}/.well-known/openid-configuration",
            self.config.issuer.trim_end_matches('/')
        );
        let discovery = self.get_json(&discovery_url).await?;
        let jwks_uri = discovery["jwks_uri"]
            .as_str()
            .ok_or_else(|| format!("{discovery_url} names no jwks_uri"))?
            .to_string();
        let set: JwkSet = serde_json::from_value(self.get_json(&jwks_uri).await?)
            .map_err(|e| format!("{jwks_uri}: not a JWK set: {e}"))?;
        tracing::info!(issuer = %self.config.issuer, keys = set.keys.len(), "OIDC signing keys fetched");
        *self.keys.write().await = Keys {
            set,
            fetched: Some(Instant::now()),
        };
        Ok(())
    }

    async fn key_for(&self, kid: Option<&str>) -> Result<Option<DecodingKey>, String> {
        let keys = self.keys.read().await;
        let jwk = match kid {
            Some(kid) => keys.set.find(kid),
            // No kid: only unambiguous with one key.
            None if keys.set.keys.len() == 1 => keys.set.keys.first(),
            None => None,
        };
        jwk.map(|j| DecodingKey::from_jwk(j).map_err(|e| format!("unusable signing key: {e}")))
            .transpose()
    }

    /// Verifies a token: 401 with the reason when it is not valid.
    pub async fn verify(&self, token: &str) -> Result<OidcIdentity, ServiceError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| unauthorized(format!("invalid bearer token: {e}")))?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(unauthorized(format!(
                "token algorithm {:?} is not accepted (RS256, ES256)",
                header.alg
            )));
        }
        let kid = header.kid.as_deref();
        let mut key = self.key_for(kid).await.map_err(unauthorized)?;
        if key.is_none() {
            // A key not seen yet: the issuer may have rotated its keys.
            if let Err(e) = self.refresh().await {
                tracing::warn!(error = %e, "fetching the OIDC signing keys");
                return Err(ServiceError::unauthorized(format!(
                    "cannot verify the token: the issuer's keys are unavailable ({e})"
                )));
            }
            key = self.key_for(kid).await.map_err(unauthorized)?;
        }
        let Some(key) = key else {
            return Err(unauthorized(format!(
                "token signed with an unknown key{}",
                kid.map(|k| format!(" '{k}'")).unwrap_or_default()
            )));
        };
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[self.config.issuer.as_str()]);
        validation.set_audience(&[self.config.audience()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECONDS;
        let data = jsonwebtoken::decode::<Value>(token, &key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind;
            unauthorized(match e.kind() {
                ErrorKind::ExpiredSignature => "token expired".to_string(),
                ErrorKind::ImmatureSignature => "token not valid yet (nbf)".to_string(),
                ErrorKind::InvalidAudience => {
                    format!("token audience is not '{}'", self.config.audience())
                }
                ErrorKind::InvalidIssuer => {
                    format!("token issuer is not '{}'", self.config.issuer)
                }
                ErrorKind::InvalidSignature => "token signature is invalid".to_string(),
                _ => format!("invalid bearer token: {e}"),
            })
        })?;
        let claims = data.claims;
        let subject = claims["sub"]
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| unauthorized("token has no sub"))?
            .to_string();
        let groups = match &claims[&self.config.groups_claim] {
            Value::Array(items) => items
                .iter()
                .filter_map(|g| g.as_str().map(str::to_string))
                .collect(),
            Value::String(one) => vec![one.clone()],
            _ => Vec::new(),
        };
        // An address the issuer has not verified is whatever the user typed: it names no one,
        // so it never matches a `user` binding (issue 43 point 20), as the configured claim or
        // as the fallback.
        let email_verified = claims["email_verified"].as_bool() == Some(true)
            || claims["email_verified"].as_str() == Some("true");
        let verified_email = || claims["email"].as_str().filter(|_| email_verified);
        let username = if self.config.username_claim == "email" {
            verified_email()
        } else {
            claims[&self.config.username_claim]
                .as_str()
                .or_else(verified_email)
        }
        .map(str::to_string);
        Ok(OidcIdentity {
            subject,
            issuer: self.config.issuer.clone(),
            groups,
            username,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(issuer: &str) -> OidcConfig {
        OidcConfig {
            issuer: issuer.into(),
            client_id: "sbx".into(),
            audience: None,
            groups_claim: default_groups_claim(),
            username_claim: default_username_claim(),
        }
    }

    #[test]
    fn issuers_must_be_https_or_loopback() {
        assert!(config("https://id.example.com").validate().is_ok());
        assert!(config("http://127.0.0.1:5556/dex").validate().is_ok());
        assert!(config("http://localhost:8080").validate().is_ok());
        assert!(config("http://id.example.com").validate().is_err());
        assert!(config("not a url").validate().is_err());
        assert_eq!(config("https://x").audience(), "sbx");
    }

    #[test]
    fn jwts_are_told_from_api_keys() {
        assert!(looks_like_jwt("aaa.bbb.ccc"));
        assert!(!looks_like_jwt("0123456789abcdef_0123"));
    }
}
