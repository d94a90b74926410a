//! Request, response and record types of the whole API contract, one module per area.
pub mod formats;
pub mod health;
pub mod identity;
pub mod image;
pub mod install;
pub mod node;
pub mod sandbox;
pub mod snapshot;
pub mod tenant;
pub mod usage;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::shared::models::formats::DnsLabel;

/// The default namespace wherever a `namespace` query parameter or body key is absent.
pub const DEFAULT_NAMESPACE: &str = "default";

/// A plain confirmation payload: `{"message": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MessageResponse {
    /// Human-readable outcome of the operation.
    pub message: String,
}

/// The `namespace` query parameter shared by most sandbox and snapshot routes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NamespaceQuery {
    /// Namespace of the object; `default` when absent.
    #[serde(
        default,
        deserialize_with = "crate::shared::models::formats::namespace_param",
        skip_serializing_if = "Option::is_none"
    )]
    #[param(value_type = Option<DnsLabel>)]
    #[schema(value_type = Option<DnsLabel>)]
    pub namespace: Option<String>,
}

impl NamespaceQuery {
    /// The namespace asked for, or `default`.
    pub fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE)
    }
}

/// Serde helpers for nested objects of request bodies. serde's derived structs also accept a
/// JSON array (read field by field, in order); the API document says "object", so these refuse
/// anything else.
pub mod objects {
    use serde::de::{DeserializeOwned, Error, Unexpected};
    use serde::{Deserialize, Deserializer};
    use serde_json::Value;

    fn decode<T: DeserializeOwned, E: Error>(value: Value) -> Result<T, E> {
        match value {
            Value::Object(_) => serde_json::from_value(value).map_err(E::custom),
            Value::Array(_) => Err(E::invalid_type(Unexpected::Seq, &"an object")),
            other => Err(E::custom(format!(
                "invalid type: {other}, expected an object"
            ))),
        }
    }

    /// `Option<T>`: absent or `null` is `None`, an object is the value.
    pub fn optional<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: DeserializeOwned,
    {
        Option::<Value>::deserialize(deserializer)?
            .map(decode)
            .transpose()
    }

    /// `Option<Option<T>>` of a PATCH: `null` is `Some(None)` (absent is `None` by `default`).
    pub fn patch<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
    where
        D: Deserializer<'de>,
        T: DeserializeOwned,
    {
        optional(deserializer).map(Some)
    }

    /// `T` (with `default`): an object.
    pub fn required<'de, D, T>(deserializer: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: DeserializeOwned,
    {
        decode(Value::deserialize(deserializer)?)
    }

    /// `Vec<T>`: a list of objects.
    pub fn list<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: DeserializeOwned,
    {
        Vec::<Value>::deserialize(deserializer)?
            .into_iter()
            .map(decode)
            .collect()
    }
}
