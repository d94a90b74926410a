//! The string formats of the API document, each said once: the syntax the server checks on
//! names, namespaces, quantities and paths, as JSON Schema patterns a generated client (or a
//! fuzzer) can hold requests to. Fields refer to them with `#[schema(value_type = …)]`.
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

/// A DNS-1123 label: 1–63 lowercase letters, digits and `-`, alphanumeric at both ends.
pub const DNS_LABEL_PATTERN: &str = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$";

fn string_schema(description: &str, pattern: &str, max_length: Option<usize>) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
        .pattern(Some(pattern))
        .min_length(Some(1))
        .max_length(max_length)
        .into()
}

macro_rules! string_format {
    ($(#[$doc:meta])* $name:ident, $description:expr, $pattern:expr, $max:expr) => {
        $(#[$doc])*
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                string_schema($description, $pattern, $max)
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

string_format!(
    /// Sandbox, snapshot, tenant and namespace names.
    DnsLabel,
    "A DNS-1123 label: 1-63 lowercase letters, digits and '-', starting and ending with a letter or digit.",
    DNS_LABEL_PATTERN,
    Some(63)
);

string_format!(
    /// Node names.
    NodeName,
    "A DNS-1123 subdomain: dot-separated DNS-1123 labels, at most 253 characters.",
    "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$",
    Some(253)
);

string_format!(
    /// API key names.
    KeyName,
    "1-63 letters, digits, '-', '_' or '.'.",
    "^[A-Za-z0-9._-]{1,63}$",
    Some(63)
);

string_format!(
    /// Kubernetes quantities.
    QuantityText,
    "A Kubernetes quantity: a non-negative decimal number with an optional suffix, e.g. `500m`, `2`, `512Mi`: at most 15 digits before the point (6 with T, P, E, Ti, Pi or Ei) and 6 after it. The exponent form (`1e3`) is accepted too.",
    "^(([0-9]{1,15}(\\.[0-9]{0,6})?|\\.[0-9]{1,6})(m|k|M|G|Ki|Mi|Gi)?|([0-9]{1,6}(\\.[0-9]{0,6})?|\\.[0-9]{1,6})(T|P|E|Ti|Pi|Ei))$",
    Some(24)
);

/// Usage window ends: unix seconds (at most 11 digits) or an RFC 3339 date-time.
pub struct Timestamp;

impl utoipa::PartialSchema for Timestamp {
    fn schema() -> RefOr<Schema> {
        let seconds = ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[0-9]{1,11}$"));
        let date_time = ObjectBuilder::new().schema_type(Type::String).format(Some(
            utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::DateTime),
        ));
        utoipa::openapi::schema::OneOfBuilder::new()
            .description(Some(
                "Unix seconds (at most 11 digits), or an RFC 3339 date-time with an offset (`2026-11-01T00:00:00Z`).",
            ))
            .item(seconds)
            .item(date_time)
            .into()
    }
}

impl utoipa::ToSchema for Timestamp {}

string_format!(
    /// Paths inside a sandbox.
    SandboxPath,
    "An absolute path inside the sandbox, without a `..` component or a NUL byte.",
    "^(/([^/\\u0000.][^/\\u0000]*|\\.[^/\\u0000.][^/\\u0000]*|\\.\\.[^/\\u0000]+|\\.)?)+$",
    None
);

/// A label key, as selectors name it.
const LABEL_KEY: &str = "([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?";

/// Label selectors.
pub struct LabelSelector;

impl utoipa::PartialSchema for LabelSelector {
    fn schema() -> RefOr<Schema> {
        let requirement =
            format!("\\s*(!\\s*{LABEL_KEY}|{LABEL_KEY}\\s*((==?|!=)\\s*({LABEL_PART})?)?)\\s*");
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "Comma-separated requirements, all to match: `key=value` (or `==`), `key!=value`, `key`, `!key`; empty selects everything.",
            ))
            .pattern(Some(format!("^({requirement}(,{requirement})*)?$")))
            .into()
    }
}

impl utoipa::ToSchema for LabelSelector {}

/// An optional DNS-label query parameter, refusing a malformed one (so that a list never
/// answers an empty page for a name that cannot exist).
fn label_param<'de, D>(what: &str, deserializer: D) -> Result<Option<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let value: Option<String> = serde::Deserialize::deserialize(deserializer)?;
    if let Some(name) = &value {
        crate::shared::names::validate_dns_label(what, name).map_err(serde::de::Error::custom)?;
    }
    Ok(value)
}

/// An integer query parameter the document gives as `int64`: above `i64::MAX` is refused.
pub fn int64_param<'de, D>(deserializer: D) -> Result<u64, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let value: u64 = serde::Deserialize::deserialize(deserializer)?;
    if i64::try_from(value).is_err() {
        return Err(serde::de::Error::custom(format!(
            "{value} is above the largest integer the API takes ({})",
            i64::MAX
        )));
    }
    Ok(value)
}

/// `namespace` query parameters (`#[serde(deserialize_with)]`).
pub fn namespace_param<'de, D>(deserializer: D) -> Result<Option<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    label_param("namespace", deserializer)
}

/// `sandbox` query parameters (`#[serde(deserialize_with)]`).
pub fn sandbox_param<'de, D>(deserializer: D) -> Result<Option<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    label_param("sandbox", deserializer)
}

/// Words of a command (`cmd`): any text without a NUL byte.
pub struct Word;

impl utoipa::PartialSchema for Word {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some("A command word: any text without a NUL byte."))
            .pattern(Some("^[^\\u0000]*$"))
            .into()
    }
}

impl utoipa::ToSchema for Word {}

/// `entrypoint` of a create: a program, then its arguments.
pub struct Entrypoint;

impl utoipa::PartialSchema for Entrypoint {
    fn schema() -> RefOr<Schema> {
        let word = || {
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[^\\u0000]*$"))
        };
        utoipa::openapi::schema::ArrayBuilder::new()
            .description(Some(
                "The program (a non-empty first word), then its arguments; no word contains a NUL byte.",
            ))
            .prefix_items([word().min_length(Some(1))])
            .items(word())
            .min_items(Some(1))
            .into()
    }
}

impl utoipa::ToSchema for Entrypoint {}

/// Capability names as `cap_add` takes them (`CAP_` and any case are accepted too).
pub struct CapabilityName;

impl utoipa::PartialSchema for CapabilityName {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "A Linux capability name; `CAP_NET_ADMIN`, `net_admin` and `NET_ADMIN` are the same.",
            ))
            .enum_values(Some(crate::shared::capabilities::NAMES))
            .into()
    }
}

impl utoipa::ToSchema for CapabilityName {}

/// `cap_drop` entries: a capability name or `ALL`.
pub struct DroppedCapability;

impl utoipa::PartialSchema for DroppedCapability {
    fn schema() -> RefOr<Schema> {
        let names = std::iter::once("ALL").chain(crate::shared::capabilities::NAMES);
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some("`ALL`, or a Linux capability name as in `cap_add`."))
            .enum_values(Some(names))
            .into()
    }
}

impl utoipa::ToSchema for DroppedCapability {}

/// A map of string values whose keys follow `key_pattern`.
fn map_schema(
    description: &str,
    key_pattern: &str,
    value: Schema,
    max: Option<usize>,
) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(description))
        .property_names(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(key_pattern)),
        ))
        .additional_properties(Some(value))
        .max_properties(max)
        .into()
}

/// `env` of a create.
pub struct EnvMap;

impl utoipa::PartialSchema for EnvMap {
    fn schema() -> RefOr<Schema> {
        let value = ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[^\\u0000]*$"))
            .build();
        map_schema(
            "Environment variables: names of letters, digits and '_' not starting with a digit; values without NUL bytes.",
            "^[A-Za-z_][A-Za-z0-9_]*$",
            Schema::Object(value),
            None,
        )
    }
}

impl utoipa::ToSchema for EnvMap {}

/// Label name and value parts (Kubernetes' syntax).
const LABEL_PART: &str = "[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?";

/// `labels` of a create.
pub struct LabelMap;

impl utoipa::PartialSchema for LabelMap {
    fn schema() -> RefOr<Schema> {
        label_map_schema(
            "Labels, Kubernetes' syntax: keys `[prefix/]name` (a DNS subdomain prefix of at most 253 characters; the prefixes `sbx.io`, `kubernetes.io` and `k8s.io` and their subdomains are reserved), names and values of at most 63 letters, digits, '-', '_' or '.' starting and ending with a letter or digit (a value may be empty); at most 64 labels.",
        )
    }
}

impl utoipa::ToSchema for LabelMap {}

/// `labels` of a tenant or key.
pub struct TenancyLabelMap;

impl utoipa::PartialSchema for TenancyLabelMap {
    fn schema() -> RefOr<Schema> {
        label_map_schema(
            "Labels, Kubernetes' syntax: keys `[prefix/]name` (a DNS subdomain prefix of at most 253 characters; the prefixes `sbx.io`, `kubernetes.io` and `k8s.io` and their subdomains are reserved, except the key `sbx.io/apply-set` that `sbx apply --applyset` writes), names and values of at most 63 letters, digits, '-', '_' or '.' starting and ending with a letter or digit (a value may be empty); at most 64 labels.",
        )
    }
}

impl utoipa::ToSchema for TenancyLabelMap {}

/// A label map's schema.
fn label_map_schema(description: &str) -> RefOr<Schema> {
    {
        let subdomain =
            "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*";
        let value = ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(format!("^({LABEL_PART})?$")))
            .max_length(Some(63))
            .build();
        map_schema(
            description,
            &format!("^({subdomain}/)?{LABEL_PART}$"),
            Schema::Object(value),
            Some(crate::shared::labels::MAX_LABELS),
        )
    }
}

string_format!(
    /// Egress whitelist entries.
    Cidr,
    "An IPv4 network `a.b.c.d/len` with no host bits set, or a bare address meaning /32.",
    "^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(/(3[0-2]|[12]?[0-9]))?$",
    Some(18)
);

string_format!(
    /// Image references.
    ImageReference,
    "An OCI image reference, `[REGISTRY/]REPOSITORY[:TAG][@DIGEST]` in lower case, e.g. `busybox` or `127.0.0.1:5000/team/app:1`.",
    "^(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(\\.([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(:[0-9]{1,5})?/)?[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$",
    Some(255)
);

string_format!(
    /// OIDC subjects, usernames and groups.
    NonBlank,
    "Any text with at least one character that is not white space.",
    "\\S",
    None
);
