//! Extractors whose rejections speak the contract: bad JSON bodies are 422
//! `UnprocessableEntity`, bad query strings 400 `BadRequest`, all in the envelope.
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::daemon::error::ServiceError;
use crate::shared::envelope::{DataEnvelope, ErrorCode};

/// A JSON body (request) or a JSON payload wrapped in `{"data": …}` (response). A number
/// with no fractional part (`600.0`) is the integer it equals, as JSON Schema counts it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<T, S> FromRequest<S> for Json<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ServiceError;

    async fn from_request(
        request: axum::extract::Request,
        state: &S,
    ) -> Result<Self, ServiceError> {
        let axum::Json(value) =
            axum::Json::<serde_json::Value>::from_request(request, state).await?;
        decode(value).map(Json)
    }
}

/// A body read as JSON into `T`: integral numbers as integers, and an object it must be.
fn decode<T: serde::de::DeserializeOwned>(mut value: serde_json::Value) -> Result<T, ServiceError> {
    integral_numbers(&mut value);
    if !value.is_object() {
        return Err(ServiceError::unprocessable(
            "the request body must be a JSON object",
        ));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        ServiceError::unprocessable(format!(
            "Failed to deserialize the JSON body into the target type: {e}"
        ))
    })
}

/// Rewrites every float with no fractional part that fits an integer as that integer, and an
/// integer above `i64::MAX` as a float (every integer of the document is an `int64`).
fn integral_numbers(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
                if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
                    // Exact: below 2^53 every integral f64 is an integer, which i64 holds.
                    #[allow(clippy::cast_possible_truncation)]
                    let i = f as i64;
                    *n = serde_json::Number::from(i);
                }
            } else if n.is_u64() && !n.is_i64() {
                // Above int64: no integer field takes it (a float refuses itself there), and a
                // key the type ignores stays ignored.
                if let Some(f) = n.as_f64().and_then(serde_json::Number::from_f64) {
                    *n = f;
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_numbers),
        Value::Object(map) => map.values_mut().for_each(integral_numbers),
        _ => {}
    }
}

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(DataEnvelope::new(self.0)).into_response()
    }
}

/// A query string.
#[derive(Debug, Clone, Copy, Default, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ServiceError))]
pub struct Query<T>(pub T);

/// A path parameter.
#[derive(Debug, Clone, Copy, Default, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ServiceError))]
pub struct Path<T>(pub T);

impl From<JsonRejection> for ServiceError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection {
            JsonRejection::JsonDataError(e) => ServiceError::unprocessable(e.body_text()),
            JsonRejection::JsonSyntaxError(e) => ServiceError::unprocessable(e.body_text()),
            JsonRejection::MissingJsonContentType(_) => ServiceError::new(
                ErrorCode::UnsupportedMediaType,
                "send the request body with Content-Type: application/json",
            ),
            JsonRejection::BytesRejection(e) => {
                let code = ErrorCode::for_status(e.status().as_u16());
                ServiceError::new(code, e.body_text())
            }
            other => ServiceError::unprocessable(other.body_text()),
        }
    }
}

impl From<QueryRejection> for ServiceError {
    fn from(rejection: QueryRejection) -> Self {
        ServiceError::bad_request(rejection.body_text())
    }
}

impl From<PathRejection> for ServiceError {
    fn from(rejection: PathRejection) -> Self {
        ServiceError::bad_request(rejection.body_text())
    }
}

/// Decodes an optional JSON body (pause, resume, GC): an empty body or `null` is the default
/// value.
pub fn optional_json<T: serde::de::DeserializeOwned + Default>(
    body: &axum::body::Bytes,
) -> Result<T, ServiceError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| ServiceError::unprocessable(format!("invalid JSON body: {e}")))?;
    if value.is_null() {
        return Ok(T::default());
    }
    decode(value)
}

/// `201 Created` with a `Location` header and the payload in the envelope.
pub struct Created<T> {
    /// Path of the created resource.
    pub location: String,
    /// The payload.
    pub data: T,
}

impl<T: Serialize> IntoResponse for Created<T> {
    fn into_response(self) -> Response {
        let mut response = (axum::http::StatusCode::CREATED, Json(self.data)).into_response();
        if let Ok(value) = axum::http::HeaderValue::from_str(&self.location) {
            response
                .headers_mut()
                .insert(axum::http::header::LOCATION, value);
        }
        response
    }
}

/// 415 unless the request's body was sent as a tar archive (`application/x-tar`, or the
/// generic `application/octet-stream`): the image import and the file upload.
pub fn require_tar_body(headers: &axum::http::HeaderMap) -> Result<(), ServiceError> {
    const TAR: &str = crate::shared::files::TAR;
    let content_type = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::trim);
    if matches!(content_type, Some(TAR | "application/octet-stream")) {
        return Ok(());
    }
    Err(ServiceError::new(
        ErrorCode::UnsupportedMediaType,
        format!("send the archive as the request body with Content-Type: {TAR}"),
    ))
}
