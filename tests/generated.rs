//! Generated artefacts are checked in and must match what the code generates:
//! `docs/openapi.json`, `docs/cli.md`, `completions/*`, the Tenant CRD in `deploy/crds/`, the RBAC
//! in `deploy/rbac.yaml` and its table in `docs/operations.md`. Regenerate with
//! `SBX_BLESS=1 cargo test --test generated`.
use std::path::Path;

use clap_complete::Shell;
use sbx::cli::commands::completions::script;
use sbx::daemon::openapi::document_text;

fn check(relative: &str, generated: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    if std::env::var_os("SBX_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "{relative} is stale: run `SBX_BLESS=1 cargo test --test generated` and commit it"
    );
}

/// Like `check`, for the text between `<!-- NAME:start -->` and `<!-- NAME:end -->` lines of
/// a hand-written file.
fn check_region(relative: &str, name: &str, generated: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let (start, end) = (
        format!("<!-- {name}:start -->\n"),
        format!("<!-- {name}:end -->"),
    );
    let (Some(a), Some(b)) = (text.find(&start), text.find(&end)) else {
        panic!("{relative} lacks the lines {start} and {end}");
    };
    let current = &text[a + start.len()..b];
    if std::env::var_os("SBX_BLESS").is_some() {
        let updated = format!("{}{generated}{}", &text[..a + start.len()], &text[b..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        current == generated,
        "{relative} ({name}) is stale: run `SBX_BLESS=1 cargo test --test generated` and commit it"
    );
}

#[test]
fn openapi_document_is_current() {
    check("docs/openapi.json", &document_text());
}

#[test]
fn cli_reference_is_current() {
    let mut text = clap_markdown::help_markdown::<sbx::cli::Cli>();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    check("docs/cli.md", &text);
}

#[test]
fn tenant_crd_is_current() {
    let crd = sbx::daemon::platform::kubernetes::objects::tenants::crd();
    let text = format!(
        "# Generated from src/daemon/platform/kubernetes/objects/tenants.rs by\n\
         # `SBX_BLESS=1 cargo test --test generated`; do not edit.\n{}",
        serde_yaml_ng::to_string(&crd).unwrap()
    );
    check("deploy/crds/tenants.sbx.io.yaml", &text);
}

#[test]
fn sbxd_sandbox_crd_is_current() {
    let crd = sbx::daemon::platform::kubernetes::objects::sbxd::crd();
    let text = format!(
        "# Generated from src/daemon/platform/kubernetes/objects/sbxd.rs by\n\
         # `SBX_BLESS=1 cargo test --test generated`; do not edit.\n{}",
        serde_yaml_ng::to_string(&crd).unwrap()
    );
    check("deploy/crds/sbxdsandboxes.sbx.io.yaml", &text);
}

#[test]
fn sbxd_snapshot_crd_is_current() {
    let crd = sbx::daemon::platform::kubernetes::objects::sbxd::snapshot_crd();
    let text = format!(
        "# Generated from src/daemon/platform/kubernetes/objects/sbxd.rs by\n\
         # `SBX_BLESS=1 cargo test --test generated`; do not edit.\n{}",
        serde_yaml_ng::to_string(&crd).unwrap()
    );
    check("deploy/crds/sbxdsnapshots.sbx.io.yaml", &text);
}

#[test]
fn rbac_is_current() {
    use sbx::daemon::platform::kubernetes::permissions;
    let text = format!(
        "# Generated from src/daemon/platform/kubernetes/permissions.rs by\n\
         # `SBX_BLESS=1 cargo test --test generated`; do not edit.\n{}",
        permissions::rbac_yaml()
    );
    check("deploy/rbac.yaml", &text);
    check_region(
        "docs/operations.md",
        "rbac-table",
        &permissions::markdown_table(),
    );
}

#[test]
fn completions_are_current() {
    check("completions/sbx.bash", &script(Shell::Bash));
    check("completions/_sbx", &script(Shell::Zsh));
    check("completions/sbx.fish", &script(Shell::Fish));
}

/// Every route of the contract's endpoint overview is in the OpenAPI document.
#[test]
fn openapi_describes_every_route_of_the_spec() {
    let doc: serde_json::Value = serde_json::from_str(&document_text()).unwrap();
    let paths = doc["paths"].as_object().unwrap();
    let spec_routes = [
        ("get", "/"),
        ("get", "/health"),
        ("post", "/api/v1/sandboxes"),
        ("get", "/api/v1/sandboxes"),
        ("get", "/api/v1/sandboxes/{name}"),
        ("delete", "/api/v1/sandboxes/{name}"),
        ("delete", "/api/v1/sandboxes"),
        ("post", "/api/v1/sandboxes/{name}/exec"),
        ("get", "/api/v1/sandboxes/{name}/logs"),
        ("post", "/api/v1/sandboxes/{name}/pause"),
        ("post", "/api/v1/sandboxes/{name}/resume"),
        ("post", "/api/v1/sandboxes/{name}/fork"),
        ("post", "/api/v1/sandboxes/{name}/snapshot"),
        ("get", "/api/v1/sandboxes/metrics"),
        ("get", "/api/v1/snapshots"),
        ("get", "/api/v1/snapshots/{name}"),
        ("delete", "/api/v1/snapshots/{name}"),
        ("post", "/api/v1/snapshots/{name}/restore"),
        ("post", "/api/v1/snapshots/gc"),
        ("get", "/api/v1/nodes/storage"),
        ("get", "/api/v1/auth/whoami"),
        ("get", "/api/v1/auth/oidc"),
        ("post", "/api/v1/keys"),
        ("get", "/api/v1/keys"),
        ("delete", "/api/v1/keys/{name}"),
        ("get", "/api/v1/role-bindings"),
        ("put", "/api/v1/role-bindings"),
        ("get", "/api/v1/tenants"),
        ("post", "/api/v1/tenants"),
        ("get", "/api/v1/tenants/{name}"),
        ("patch", "/api/v1/tenants/{name}"),
        ("delete", "/api/v1/tenants/{name}"),
        ("get", "/api/v1/usage"),
        ("post", "/api/v1/nodes/{name}/dedicate"),
        ("post", "/api/v1/nodes/{name}/undedicate"),
        ("post", "/api/v1/install"),
        ("get", "/api/v1/install/{operation}"),
    ];
    for (method, path) in spec_routes {
        let op = paths
            .get(path)
            .and_then(|item| item.get(method))
            .unwrap_or_else(|| panic!("{method} {path} is missing from the OpenAPI document"));
        assert!(
            op["responses"].as_object().is_some_and(|r| !r.is_empty()),
            "{method} {path}"
        );
        if path.starts_with("/api/v1/") && path != "/api/v1/auth/oidc" {
            assert!(
                op["responses"].get("401").is_some(),
                "{method} {path} lacks 401"
            );
        }
    }
    // The envelope's error codes are all documented.
    let codes = doc["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .unwrap();
    for code in [
        "BadRequest",
        "LimitNotEnforceable",
        "Unauthorized",
        "QuotaExceeded",
        "NotFound",
        "Conflict",
        "UnprocessableEntity",
        "InternalServerError",
        "MetricsUnavailable",
    ] {
        assert!(codes.iter().any(|c| c == code), "{code}");
    }
}
