//! Reading a command's output with a cap, as exec does on both platforms (the sbxd shim's
//! pipes, the Kubernetes API server's exec stream).
use tokio::io::{AsyncRead, AsyncReadExt};

/// Reads `reader` to its end, keeping at most `cap` bytes; returns them and whether more came.
pub async fn read_capped<R: AsyncRead + Unpin>(mut reader: R, cap: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = [0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                if n > room {
                    truncated = true;
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (kept, truncated)
}

/// The innermost cause of an error, which for transport errors is the useful part
/// ("Connection refused"), without the URL.
pub fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause: &(dyn std::error::Error + 'static) = error;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}

/// A chunked `text/plain` body of what `chunks` yields, until it ends; a client that leaves
/// drops the receiver (and so ends what feeds it).
pub fn chunked_text(chunks: tokio::sync::mpsc::Receiver<bytes::Bytes>) -> axum::response::Response {
    use axum::response::IntoResponse;
    let stream = futures_util::stream::unfold(chunks, |mut chunks| async move {
        chunks
            .recv()
            .await
            .map(|chunk| (Ok::<_, std::convert::Infallible>(chunk), chunks))
    });
    (
        [
            (
                axum::http::header::CONTENT_TYPE,
                "text/plain; charset=utf-8",
            ),
            (axum::http::header::CACHE_CONTROL, "no-cache"),
        ],
        axum::body::Body::from_stream(stream),
    )
        .into_response()
}
