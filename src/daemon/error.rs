//! The daemon's one error type: a contract error code, a message safe to send, and for 5xx an
//! internal detail that is logged, never sent.
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::daemon::platform::PlatformError;
use crate::shared::envelope::{ErrorBody, ErrorCode, ErrorEnvelope};

/// An error answered by a route.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ServiceError {
    /// Contract code (and through it, the HTTP status).
    pub code: ErrorCode,
    /// Message for the caller.
    pub message: String,
    /// Detail for the service log only (5xx).
    pub internal: Option<String>,
    /// The URL of the replica the request is for ([`PlatformError::Elsewhere`]): the
    /// response carries it as [`PassTo`] for `daemon/forward.rs`.
    pub pass_to: Option<String>,
    /// Seconds the caller should wait (a 429's `Retry-After` header).
    pub retry_after: Option<u64>,
}

/// A response's extension: the request is for the replica at this URL.
#[derive(Debug, Clone)]
pub struct PassTo(pub String);

/// Result of a service or route function.
pub type ServiceResult<T> = Result<T, ServiceError>;

impl ServiceError {
    /// An error with a code and a caller-facing message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            internal: None,
            pass_to: None,
            retry_after: None,
        }
    }

    /// The same error, answered with `Retry-After: seconds` (at least 1).
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds.max(1));
        self
    }

    /// 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    /// 401 `Unauthorized`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthorized, message)
    }

    /// 403 `Forbidden`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }

    /// 404 `NotFound`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// 409 `Conflict`.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }

    /// 422 `UnprocessableEntity`.
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::UnprocessableEntity, message)
    }

    /// 501 `NotImplemented`: a contract route whose feature has not landed on this platform.
    pub fn not_implemented(what: &str) -> Self {
        Self::new(
            ErrorCode::NotImplemented,
            format!("{what} is not available in this version of sbx yet"),
        )
    }

    /// 500 `InternalServerError`; `detail` goes to the log only.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        Self {
            code: ErrorCode::InternalServerError,
            message: "internal error; the details are in the service log".to_string(),
            internal: Some(detail.to_string()),
            pass_to: None,
            retry_after: None,
        }
    }

    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl IntoResponse for ServiceError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!(
                code = %self.code,
                detail = self.internal.as_deref().unwrap_or(&self.message),
                "request failed"
            );
        }
        let mut response = envelope_response(status, self.code, self.message);
        if let Some(url) = self.pass_to {
            response.extensions_mut().insert(PassTo(url));
        }
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// Builds the error envelope response; also used to rewrite axum's own plain-text rejections.
pub fn envelope_response(status: StatusCode, code: ErrorCode, message: String) -> Response {
    let body = ErrorEnvelope {
        error: ErrorBody {
            code: code.as_str().to_string(),
            message,
        },
    };
    let bytes = serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec());
    let mut response = (status, bytes).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    // For the middleware that reports the answer (the audit trail's outcome).
    response.extensions_mut().insert(code);
    response
}

/// Platform failures: the caller's business keeps its message and gets its status; the rest
/// is internal.
impl From<PlatformError> for ServiceError {
    fn from(e: PlatformError) -> Self {
        match e {
            PlatformError::NotFound(m) => ServiceError::not_found(m),
            PlatformError::AlreadyExists(m) => ServiceError::conflict(m),
            PlatformError::Invalid(m) => ServiceError::bad_request(m),
            PlatformError::Conflict(m) => ServiceError::conflict(m),
            PlatformError::Forbidden(m) => ServiceError::forbidden(m),
            PlatformError::QuotaExceeded(m) => ServiceError::new(ErrorCode::QuotaExceeded, m),
            PlatformError::Unavailable(m) => ServiceError::new(ErrorCode::ServiceUnavailable, m),
            PlatformError::Timeout(m) => ServiceError::new(ErrorCode::GatewayTimeout, m),
            PlatformError::Elsewhere(url) => ServiceError {
                pass_to: Some(url),
                ..ServiceError::new(
                    ErrorCode::ServiceUnavailable,
                    "another replica checks this tenant's quota now: try again",
                )
            },
            PlatformError::Misdeployed(m) => {
                tracing::error!(error = %m, "the deployment differs from the configuration");
                ServiceError::new(ErrorCode::InternalServerError, m)
            }
            other => ServiceError::internal(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn internal_details_are_not_sent() {
        let response = ServiceError::internal("disk /var/lib/sbx full").into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert!(!text.contains("disk"), "{text}");
        assert!(text.contains("InternalServerError"));
    }

    #[test]
    fn statuses_follow_codes() {
        assert_eq!(
            ServiceError::bad_request("x").status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(ServiceError::conflict("x").status(), StatusCode::CONFLICT);
        assert_eq!(
            ServiceError::new(ErrorCode::QuotaExceeded, "x").status(),
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            ServiceError::not_implemented("fork").status(),
            StatusCode::NOT_IMPLEMENTED
        );
    }
}
