//! The API's one error reply: a status and a message. Every route family answers it as
//! cc-metric-store's error body, `{"status": "Bad Request", "error": "..."}` (its clients read
//! that shape; clients of the other routes read `error`, which it carries too). The receivers
//! of Prometheus remote write and OTLP answer the same error as plain text ([`ApiError::plain`]),
//! as Prometheus does to its senders. Owns no route.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

/// An error reply: the status and what is wrong, in words that name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

/// The JSON body of an [`ApiError`] (cc-metric-store's error body).
#[derive(Debug, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The status's reason phrase ("Bad Request").
    pub status: String,
    pub error: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// The same error as a plain-text reply (one line), for senders of other protocols.
    pub fn plain(self) -> Response {
        (self.status, self.message + "\n").into_response()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            status: self.status.canonical_reason().unwrap_or("").to_string(),
            error: self.message,
        };
        (self.status, axum::Json(body)).into_response()
    }
}

/// `ApiError::new(status, message)` as a reply, for handlers that answer a `Response`.
pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    ApiError::new(status, message).into_response()
}
