//! Names a request carries in its path and query, checked before any handler runs (issue 43
//! point 16): sandbox, snapshot and tenant names and every `namespace`, `sandbox` or `tenant`
//! query value are DNS-1123 labels, node names DNS-1123 subdomains, key names key labels. A
//! malformed one is a 400 in the envelope, so it never reaches a platform call, a cache key
//! or a lookup. Names in bodies are checked by the services (every namespace by the access
//! check, `services/tenants.rs`).
use axum::extract::{MatchedPath, RawPathParams, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::daemon::error::ServiceError;
use crate::shared::names::{validate_dns_label, validate_dns_subdomain, validate_key_name};

/// A name check: what the name is (for the message), the name; the 400 message.
type Check = fn(&str, &str) -> Result<(), String>;

/// How a path parameter of a route is checked, by the route's template.
fn path_rule(template: &str, param: &str) -> Option<Check> {
    let label: Check = validate_dns_label;
    let node: Check = validate_dns_subdomain;
    let key: Check = |_, v| validate_key_name(v);
    let resource = template.strip_prefix("/api/v1/")?.split('/').next()?;
    match (resource, param) {
        ("sandboxes" | "snapshots" | "tenants", "name") => Some(label),
        ("nodes", "name") => Some(node),
        ("keys", "name") => Some(key),
        _ => None,
    }
}

/// What a path parameter is called in a refusal.
fn path_what(template: &str) -> &'static str {
    if template.starts_with("/api/v1/sandboxes/") {
        "sandbox name"
    } else if template.starts_with("/api/v1/snapshots/") {
        "snapshot name"
    } else if template.starts_with("/api/v1/tenants/") {
        "tenant name"
    } else {
        "node name"
    }
}

/// Query parameters that name a namespace, a sandbox or a tenant, wherever they appear.
const LABEL_QUERY_KEYS: [&str; 3] = ["namespace", "sandbox", "tenant"];

/// The refusal for the first malformed name of the request, if any.
fn refusal(template: &str, params: &RawPathParams, query: Option<&str>) -> Option<ServiceError> {
    for (param, value) in params {
        if let Some(check) = path_rule(template, param) {
            if let Err(message) = check(path_what(template), value) {
                return Some(ServiceError::bad_request(message));
            }
        }
    }
    let pairs: Vec<(String, String)> = match query.map(serde_urlencoded::from_str) {
        None => Vec::new(),
        Some(Ok(pairs)) => pairs,
        // The route's own query extractor answers for a query that does not decode.
        Some(Err(_)) => Vec::new(),
    };
    pairs
        .iter()
        .filter(|(key, _)| LABEL_QUERY_KEYS.contains(&key.as_str()))
        .find_map(|(key, value)| validate_dns_label(key, value).err())
        .map(ServiceError::bad_request)
}

/// The middleware: 400 for a malformed name, else the route.
pub async fn check(
    matched: MatchedPath,
    params: RawPathParams,
    request: Request,
    next: Next,
) -> Response {
    match refusal(matched.as_str(), &params, request.uri().query()) {
        Some(refused) => refused.into_response(),
        None => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_by_route() {
        assert!(path_rule("/api/v1/sandboxes/{name}/exec", "name").is_some());
        assert!(path_rule("/api/v1/snapshots/{name}/restore", "name").is_some());
        assert!(path_rule("/api/v1/tenants/{name}", "name").is_some());
        assert!(path_rule("/api/v1/install/{operation}", "operation").is_none());
        let node = path_rule("/api/v1/nodes/{name}/dedicate", "name").unwrap();
        assert!(node("node name", "node-1.example.com").is_ok());
        let key = path_rule("/api/v1/keys/{name}", "name").unwrap();
        assert!(key("key name", "CI_key.1").is_ok());
        assert!(key("key name", "a/b").is_err());
    }
}
