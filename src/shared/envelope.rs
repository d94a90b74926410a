//! The response envelope (`{"data": …}` / `{"error": {"code", "message"}}`) and the error-code table.
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Every successful API response except the health routes: `{"data": <payload>}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DataEnvelope<T> {
    /// The route's payload.
    pub data: T,
}

impl<T> DataEnvelope<T> {
    /// Wraps a payload.
    pub fn new(data: T) -> Self {
        Self { data }
    }
}

/// Every error response: `{"error": {"code": …, "message": …}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorEnvelope {
    /// What went wrong.
    pub error: ErrorBody,
}

/// Machine-readable code and human-readable message of an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// One of the codes of [`ErrorCode`], e.g. `NotFound`.
    #[schema(value_type = ErrorCode)]
    pub code: String,
    /// What went wrong, safe to show to the caller.
    pub message: String,
}

/// The error codes of the contract, each with its HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub enum ErrorCode {
    /// 400: invalid input or missing parameters.
    BadRequest,
    /// 400: a tenant limit that the sandbox's backend cannot enforce.
    LimitNotEnforceable,
    /// 401: missing, invalid or expired credentials.
    Unauthorized,
    /// 403: the caller's role does not allow the operation.
    Forbidden,
    /// 403: a tenant quota would be exceeded.
    QuotaExceeded,
    /// 404: the resource (or route) does not exist, or is outside the caller's scope.
    NotFound,
    /// 405: the route exists but not with this method.
    MethodNotAllowed,
    /// 409: the resource already exists, or the operation conflicts with its state.
    Conflict,
    /// 413: the request body exceeds the size limit.
    PayloadTooLarge,
    /// 415: a request body was sent without `Content-Type: application/json`.
    UnsupportedMediaType,
    /// 422: the body is not valid JSON or a field has the wrong type.
    UnprocessableEntity,
    /// 429: the caller's rate limit is exhausted.
    TooManyRequests,
    /// 500: an unhandled error; details are in the service log, never in the response.
    InternalServerError,
    /// 501: the route is part of the contract but not available on this platform or build yet.
    NotImplemented,
    /// 502: the metrics server behind usage showback is unreachable.
    MetricsUnavailable,
    /// 503: a dependency of the service (e.g. the cluster API) is unavailable.
    ServiceUnavailable,
    /// 504: the operation did not finish in time (e.g. a fork whose volume never bound) and
    /// was undone.
    GatewayTimeout,
}

impl ErrorCode {
    /// Every code, in table order.
    pub const ALL: [ErrorCode; 17] = [
        ErrorCode::BadRequest,
        ErrorCode::LimitNotEnforceable,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::QuotaExceeded,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Conflict,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::UnprocessableEntity,
        ErrorCode::TooManyRequests,
        ErrorCode::InternalServerError,
        ErrorCode::NotImplemented,
        ErrorCode::MetricsUnavailable,
        ErrorCode::ServiceUnavailable,
        ErrorCode::GatewayTimeout,
    ];

    /// The HTTP status that carries this code.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::BadRequest | ErrorCode::LimitNotEnforceable => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden | ErrorCode::QuotaExceeded => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::Conflict => 409,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::UnprocessableEntity => 422,
            ErrorCode::TooManyRequests => 429,
            ErrorCode::InternalServerError => 500,
            ErrorCode::NotImplemented => 501,
            ErrorCode::MetricsUnavailable => 502,
            ErrorCode::ServiceUnavailable => 503,
            ErrorCode::GatewayTimeout => 504,
        }
    }

    /// The code's name on the wire, e.g. `"QuotaExceeded"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "BadRequest",
            ErrorCode::LimitNotEnforceable => "LimitNotEnforceable",
            ErrorCode::Unauthorized => "Unauthorized",
            ErrorCode::Forbidden => "Forbidden",
            ErrorCode::QuotaExceeded => "QuotaExceeded",
            ErrorCode::NotFound => "NotFound",
            ErrorCode::MethodNotAllowed => "MethodNotAllowed",
            ErrorCode::Conflict => "Conflict",
            ErrorCode::PayloadTooLarge => "PayloadTooLarge",
            ErrorCode::UnsupportedMediaType => "UnsupportedMediaType",
            ErrorCode::UnprocessableEntity => "UnprocessableEntity",
            ErrorCode::TooManyRequests => "TooManyRequests",
            ErrorCode::InternalServerError => "InternalServerError",
            ErrorCode::NotImplemented => "NotImplemented",
            ErrorCode::MetricsUnavailable => "MetricsUnavailable",
            ErrorCode::ServiceUnavailable => "ServiceUnavailable",
            ErrorCode::GatewayTimeout => "GatewayTimeout",
        }
    }

    /// The code a bare HTTP status stands for when no handler chose one (axum's own rejections).
    pub fn for_status(status: u16) -> ErrorCode {
        match status {
            400 => ErrorCode::BadRequest,
            401 => ErrorCode::Unauthorized,
            403 => ErrorCode::Forbidden,
            404 => ErrorCode::NotFound,
            405 => ErrorCode::MethodNotAllowed,
            409 => ErrorCode::Conflict,
            413 => ErrorCode::PayloadTooLarge,
            415 => ErrorCode::UnsupportedMediaType,
            422 => ErrorCode::UnprocessableEntity,
            429 => ErrorCode::TooManyRequests,
            501 => ErrorCode::NotImplemented,
            502 => ErrorCode::MetricsUnavailable,
            503 => ErrorCode::ServiceUnavailable,
            504 => ErrorCode::GatewayTimeout,
            _ => ErrorCode::InternalServerError,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error answered by the API, as a client sees it: status, code and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({code})")]
pub struct ApiError {
    /// HTTP status of the response.
    pub status: u16,
    /// The envelope's `code` (kept as text: a newer server may send codes this build lacks).
    pub code: String,
    /// The envelope's `message`.
    pub message: String,
}

impl ApiError {
    /// Builds the client-side error from a status and a response body; a body that is not the
    /// envelope (a proxy's HTML page, say) still yields a useful message.
    pub fn from_body(status: u16, body: &[u8]) -> Self {
        match serde_json::from_slice::<ErrorEnvelope>(body) {
            Ok(env) => ApiError {
                status,
                code: env.error.code,
                message: env.error.message,
            },
            Err(_) => {
                let text = String::from_utf8_lossy(body);
                let text = text.trim();
                let message = if text.is_empty() {
                    format!("the server answered HTTP {status} with no error body")
                } else {
                    let cut: String = text.chars().take(200).collect();
                    format!("the server answered HTTP {status}: {cut}")
                };
                ApiError {
                    status,
                    code: ErrorCode::for_status(status).as_str().to_string(),
                    message,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_serialize_as_their_names_and_map_to_statuses() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            if !matches!(
                code,
                ErrorCode::LimitNotEnforceable | ErrorCode::QuotaExceeded
            ) {
                assert_eq!(ErrorCode::for_status(code.status()), code, "{code}");
            }
        }
        assert_eq!(ErrorCode::QuotaExceeded.status(), 403);
        assert_eq!(ErrorCode::MetricsUnavailable.status(), 502);
    }

    #[test]
    fn client_error_decodes_envelope_and_falls_back_on_other_bodies() {
        let e = ApiError::from_body(
            404,
            br#"{"error":{"code":"NotFound","message":"no such key"}}"#,
        );
        assert_eq!(
            (e.status, e.code.as_str(), e.message.as_str()),
            (404, "NotFound", "no such key")
        );
        assert_eq!(e.to_string(), "no such key (NotFound)");
        let e = ApiError::from_body(502, b"<html>bad gateway</html>");
        assert_eq!(e.code, "MetricsUnavailable");
        assert!(e.message.contains("HTTP 502"));
        let e = ApiError::from_body(500, b"");
        assert!(e.message.contains("no error body"));
    }
}
