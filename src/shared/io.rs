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

/// The text of a command's output as an exec result carries it: invalid UTF-8 replaced by
/// U+FFFD, and cut where it would cost more than `budget`. Text costs its bytes, so ordinary
/// output is cut at `budget` bytes as before; a control byte costs the six bytes of its JSON
/// escape (`\u0001`) and an invalid byte the three of its U+FFFD. So the JSON string is at
/// most twice `budget` whatever the bytes (a quote, backslash or newline escapes to two):
/// a cap on the raw bytes alone would let an answer grow six times over. Whether anything
/// was cut.
pub fn bounded_text(bytes: Vec<u8>, budget: usize) -> (String, bool) {
    let mut cost = 0usize;
    match String::from_utf8(bytes) {
        // The common case keeps the buffer it was read into.
        Ok(mut text) => {
            let end = text
                .char_indices()
                .find(|&(_, c)| {
                    cost += char_cost(c);
                    cost > budget
                })
                .map_or(text.len(), |(at, _)| at);
            let cut = end < text.len();
            text.truncate(end);
            (text, cut)
        }
        Err(e) => {
            let bytes = e.into_bytes();
            let mut text = String::with_capacity(bytes.len().min(budget));
            for chunk in bytes.utf8_chunks() {
                let replaced = (!chunk.invalid().is_empty()).then_some('\u{FFFD}');
                for c in chunk.valid().chars().chain(replaced) {
                    cost += char_cost(c);
                    if cost > budget {
                        return (text, true);
                    }
                    text.push(c);
                }
            }
            (text, false)
        }
    }
}

/// What `c` costs against an output budget: its UTF-8 bytes, or the six bytes of the JSON
/// escape of a control character that has no short one.
fn char_cost(c: char) -> usize {
    match c {
        '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 1,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_text_counts_what_json_makes_of_it() {
        for (bytes, budget) in [
            (b"plain text\n".to_vec(), 8),
            (vec![1u8; 1000], 600),
            (vec![0xffu8; 1000], 600),
            ("\"quoted\" \u{e9}t\u{e9}".as_bytes().to_vec(), 9),
            (b"\n\n\n\n\n\n".to_vec(), 4),
        ] {
            let (text, cut) = bounded_text(bytes.clone(), budget);
            let json = serde_json::to_string(&text).unwrap();
            assert!(json.len() - 2 <= 2 * budget, "{json}");
            assert!(cut);
            let (whole, cut) = bounded_text(bytes, usize::MAX);
            assert!(!cut);
            assert!(whole.len() > text.len());
        }
        // Control bytes count as their escapes: 100 of budget 600.
        assert_eq!(bounded_text(vec![1u8; 1000], 600).0.len(), 100);
        // Ordinary text is cut at the budget's bytes.
        let (text, cut) = bounded_text(b"1\n2\n3\n".to_vec(), 4);
        assert_eq!((text.as_str(), cut), ("1\n2\n", true));
        let (text, cut) = bounded_text(b"ok".to_vec(), 2);
        assert_eq!((text.as_str(), cut), ("ok", false));
    }
}
