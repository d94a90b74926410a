//! The OpenAPI document of the whole API, generated from the route annotations and the shared
//! models, served at `/api/v1/openapi.json` and checked in as `docs/openapi.json`.
use axum::Json;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{RefOr, Response as OaResponse, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use crate::daemon::routes;
use crate::shared::envelope::{ErrorBody, ErrorCode, ErrorEnvelope};

/// The document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "sbx sandbox management API",
        description = "Isolated, disposable, forkable sandboxes with tenants, quotas and keys. \
            Every response except `GET /`, `GET /health` and `GET /readyz` is `{\"data\": …}` or \
            `{\"error\": {\"code\", \"message\"}}`."
    ),
    paths(
        routes::health::root,
        routes::health::health,
        routes::health::readyz,
        routes::keys::create_key,
        routes::keys::list_keys,
        routes::keys::revoke_keys,
        routes::identity::whoami,
        routes::identity::oidc_discovery,
        routes::identity::get_role_bindings,
        routes::identity::put_role_bindings,
        routes::sandboxes::create_sandbox,
        routes::sandboxes::list_sandboxes,
        routes::sandboxes::get_sandbox,
        routes::sandboxes::delete_sandbox,
        routes::sandboxes::patch_sandbox,
        routes::sandboxes::delete_all_sandboxes,
        routes::sandboxes::exec_in_sandbox,
        routes::sandboxes::exec_stream,
        routes::files::upload_files,
        routes::files::download_files,
        routes::files::stat_file,
        routes::sandboxes::sandbox_logs,
        routes::sandboxes::pause_sandbox,
        routes::sandboxes::resume_sandbox,
        routes::sandboxes::fork_sandbox,
        routes::sandboxes::snapshot_sandbox,
        routes::sandboxes::sandbox_metrics,
        routes::snapshots::list_snapshots,
        routes::snapshots::get_snapshot,
        routes::snapshots::delete_snapshot,
        routes::snapshots::restore_snapshot,
        routes::snapshots::gc_snapshots,
        routes::nodes::node_storage,
        routes::nodes::dedicate_node,
        routes::nodes::undedicate_node,
        routes::tenants::list_tenants,
        routes::tenants::get_tenant,
        routes::tenants::create_tenant,
        routes::tenants::patch_tenant,
        routes::tenants::delete_tenant,
        routes::usage::usage,
        routes::install::start_install,
        routes::install::install_status,
        routes::images::list_images,
        routes::images::pull_image,
        routes::images::import_images,
    ),
    components(schemas(
        ErrorEnvelope,
        ErrorBody,
        ErrorCode,
        crate::shared::exec_stream::ExecStatus,
        crate::shared::exec_stream::TermSize,
        // Formats that only parameters name (the derive registers those of bodies).
        crate::shared::models::formats::DnsLabel,
        crate::shared::models::formats::LabelSelector,
        crate::shared::models::formats::SandboxPath,
        crate::shared::models::formats::Timestamp
    )),
    modifiers(&Security, &CommonErrors, &Constraints),
    security(("api_key" = []), ("bearer" = [])),
    tags(
        (name = "health", description = "Unauthenticated liveness, readiness and version"),
        (name = "sandboxes", description = "Sandbox lifecycle, exec, logs, metrics, fork and snapshots of a sandbox"),
        (name = "snapshots", description = "Volume snapshots: list, inspect, delete, restore, GC"),
        (name = "tenants", description = "Tenants with namespaces, nodes, default size, quotas and limits"),
        (name = "identity", description = "Whoami, OIDC discovery, API keys and role bindings"),
        (name = "nodes", description = "Node storage pools and node dedication"),
        (name = "usage", description = "Usage showback from the metrics server"),
        (name = "install", description = "Remote node install (off by default)"),
        (name = "images", description = "The host's image store: list, pull, import (sbx extension)"),
    )
)]
pub struct ApiDoc;

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-API-Key",
                "An API key `<key_id>_<secret>`",
            ))),
        );
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("An API key or an OIDC JWT"))
                    .build(),
            ),
        );
    }
}

/// Adds the errors every route can answer, so annotations list only their own.
struct CommonErrors;

fn error_response(description: &str) -> RefOr<OaResponse> {
    let content = utoipa::openapi::ContentBuilder::new()
        .schema(Some(utoipa::openapi::Ref::from_schema_name(
            "ErrorEnvelope",
        )))
        .build();
    ResponseBuilder::new()
        .description(description)
        .content("application/json", content)
        .build()
        .into()
}

impl Modify for CommonErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (path, item) in openapi.paths.paths.iter_mut() {
            let public = !path.starts_with("/api/v1/")
                || path == "/api/v1/auth/oidc"
                || path == "/api/v1/openapi.json";
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                let responses = &mut op.responses.responses;
                let mut add = |status: &str, description: &str| {
                    responses
                        .entry(status.to_string())
                        .or_insert_with(|| error_response(description));
                };
                if !public {
                    add("401", "Missing, invalid or expired credentials");
                    add("403", "The caller's role does not allow this");
                    add(
                        "429",
                        "The caller is over its request rate, its address over its failed \
                         authentications, or its tenant at its cap of concurrent execs, \
                         streams, log follows or transfers (`TooManyRequests`); the \
                         `Retry-After` header says in how many seconds to retry",
                    );
                }
                let json_body = op
                    .request_body
                    .as_ref()
                    .is_some_and(|body| body.content.contains_key("application/json"));
                let has_query =
                    op.parameters.iter().flatten().any(|p| {
                        matches!(p.parameter_in, utoipa::openapi::path::ParameterIn::Query)
                    });
                if has_query {
                    add(
                        "400",
                        "A query parameter is missing, malformed or out of range",
                    );
                }
                if json_body {
                    add("413", "The body exceeds 1 MiB");
                    add("415", "The body was not sent as application/json");
                    add(
                        "422",
                        "The body is not valid JSON or a field has the wrong type",
                    );
                }
                if path.starts_with("/api/v1/") {
                    add("500", "Unhandled error; details are in the service log");
                }
            }
        }
    }
}

/// What the derive cannot say: lists without duplicates, and objects that refuse unknown keys
/// (their decoders collect them and answer 400).
struct Constraints;

/// `(schema, property)` lists the server refuses duplicates in.
const UNIQUE_LISTS: [(&str, &str); 4] = [
    ("TenantSpec", "namespaces"),
    ("TenantSpec", "nodes"),
    ("TenantSpecPatch", "namespaces"),
    ("TenantSpecPatch", "nodes"),
];

/// Objects whose unknown keys are a 400.
const CLOSED_OBJECTS: [&str; 3] = ["ResourceLimits", "RestoreOverrides", "InstallRequest"];

impl Modify for Constraints {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::{AdditionalProperties, Schema};
        let Some(components) = openapi.components.as_mut() else {
            return;
        };
        for (name, property) in UNIQUE_LISTS {
            if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(name) {
                if let Some(RefOr::T(Schema::Array(array))) = object.properties.get_mut(property) {
                    array.unique_items = true;
                }
            }
        }
        for name in CLOSED_OBJECTS {
            if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(name) {
                object.additional_properties =
                    Some(Box::new(AdditionalProperties::FreeForm(false)));
            }
        }
    }
}

/// `GET /api/v1/openapi.json`, unauthenticated: the document, said for this deployment (its
/// backends, its longest exec time-out).
pub async fn serve(
    axum::extract::State(state): axum::extract::State<crate::daemon::state::AppState>,
) -> Json<utoipa::openapi::OpenApi> {
    let mut document = ApiDoc::openapi();
    let max_exec = state.sandboxes.max_exec_timeout().as_secs();
    for_deployment(&mut document, state.sandboxes.backends(), max_exec);
    Json(document)
}

/// Narrows the generic document to one deployment: `backend` lists its backends and the exec
/// time-outs say its maximum.
fn for_deployment(document: &mut utoipa::openapi::OpenApi, backends: &[&str], max_exec: u64) {
    use utoipa::openapi::schema::Schema;
    let Some(components) = document.components.as_mut() else {
        return;
    };
    if let Some(RefOr::T(Schema::Object(object))) =
        components.schemas.get_mut("CreateSandboxRequest")
    {
        if let Some(RefOr::T(Schema::Object(backend))) = object.properties.get_mut("backend") {
            let mut values: Vec<serde_json::Value> = backends
                .iter()
                .map(|b| serde_json::Value::from(*b))
                .collect();
            values.push(serde_json::Value::Null);
            backend.enum_values = Some(values);
        }
    }
    if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut("ExecRequest") {
        if let Some(RefOr::T(Schema::Object(timeout))) =
            object.properties.get_mut("timeout_seconds")
        {
            timeout.maximum = Some(utoipa::Number::UInt(max_exec as usize));
        }
    }
    let stream = document
        .paths
        .paths
        .get_mut("/api/v1/sandboxes/{name}/exec/stream");
    if let Some(operation) = stream.and_then(|item| item.get.as_mut()) {
        for parameter in operation.parameters.iter_mut().flatten() {
            if parameter.name == "timeout_seconds" {
                if let Some(RefOr::T(Schema::Object(schema))) = parameter.schema.as_mut() {
                    schema.maximum = Some(utoipa::Number::UInt(max_exec as usize));
                }
            }
        }
    }
}

/// The document as checked in: pretty JSON with a trailing newline.
pub fn document_text() -> String {
    let mut text = ApiDoc::openapi()
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}
