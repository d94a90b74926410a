//! Serving streams (the service's routes, and a node agent's for the service): a streamed
//! exec's session on a WebSocket — the client's frames to the session, the session's to the
//! client, the status last; a client that leaves, or breaks the protocol, ends the command —
//! and a followed log as a chunked plain-text body.
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use futures_util::{SinkExt, StreamExt};

use crate::shared::exec_stream::{ExecSession, ExecStatus, Frame};

/// Relays `session` over `socket` until the command's status is sent, the client leaves or
/// `timeout` passes (the command is killed: exit code 124, `timed_out`).
pub async fn serve(socket: WebSocket, session: ExecSession, timeout: Option<Duration>) {
    let (mut sink, mut stream) = socket.split();
    let ExecSession { input, mut output } = session;
    let (ended_tx, mut ended) = tokio::sync::oneshot::channel::<Option<String>>();
    let reader = tokio::spawn(async move {
        let broken = loop {
            match stream.next().await {
                Some(Ok(Message::Binary(bytes))) => match Frame::decode(&bytes) {
                    Ok(
                        frame @ (Frame::Stdin(_)
                        | Frame::Resize(_)
                        | Frame::Signal(_)
                        | Frame::CloseStdin),
                    ) => {
                        // Refused once the command ended: its status is on its way.
                        let _ = input.send(frame).await;
                    }
                    Ok(_) => {
                        break Some(
                            "a client sends only stdin (0), resize (4), signal (5) and close (255) frames"
                                .to_string(),
                        );
                    }
                    Err(e) => break Some(format!("the client sent {e}")),
                },
                Some(Ok(Message::Text(_))) => {
                    break Some("frames are binary messages (channel byte, then payload)".into());
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break None,
                Some(Ok(_)) => continue,
            }
        };
        let _ = ended_tx.send(broken);
        // Holding the input until here: its drop tells the session its holder left.
        drop(input);
    });
    let deadline = async {
        match timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    let send = |frame: Frame| Message::Binary(frame.encode().into());
    loop {
        tokio::select! {
            biased;
            frame = output.recv() => {
                let frame = frame.unwrap_or_else(|| Frame::Status(ExecStatus::failed(
                    "InternalServerError",
                    "the command's stream ended without its exit status",
                )));
                let last = matches!(frame, Frame::Status(_));
                if sink.send(send(frame)).await.is_err() || last {
                    break;
                }
            }
            broken = &mut ended => {
                if let Ok(Some(reason)) = broken {
                    let _ = sink.send(send(Frame::Status(ExecStatus::failed("BadRequest", reason)))).await;
                }
                break;
            }
            _ = &mut deadline => {
                let status = ExecStatus {
                    exit_code: Some(124),
                    timed_out: true,
                    error: None,
                };
                let _ = sink.send(send(Frame::Status(status))).await;
                break;
            }
        }
    }
    // The session's ends go: a command still running is killed.
    drop(output);
    reader.abort();
    let _ = sink.close().await;
}

/// A chunked `text/plain` body of what `chunks` yields, until it ends; a client that leaves
/// drops the receiver (and so ends what feeds it).
pub fn text_body(chunks: tokio::sync::mpsc::Receiver<bytes::Bytes>) -> axum::response::Response {
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
