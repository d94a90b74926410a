//! The streaming exec (`GET /api/v1/sandboxes/{name}/exec/stream`, a WebSocket): its query,
//! its framing and the session both ends hold.
//!
//! Framing, after Kubernetes' `v5.channel.k8s.io`: every message is binary, its first byte the
//! channel and the rest the payload. Client → server: [`STDIN`] bytes, [`RESIZE`]
//! (`{"cols":N,"rows":N}`), [`SIGNAL`] (a name such as `INT`, `TERM`, `KILL`), and [`CLOSE`]
//! with the payload `[0]` (stdin ends). Server → client: [`STDOUT`] and [`STDERR`] bytes (with
//! a terminal, all output is on stdout), then one [`STATUS`] (an [`ExecStatus`] as JSON), then a
//! WebSocket close. A client that leaves before the status ends the command (its process tree
//! is killed).
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::shared::envelope::ErrorBody;
use crate::shared::models::formats::DnsLabel;

/// The WebSocket subprotocol of the streaming exec.
pub const SUBPROTOCOL: &str = "v1.exec.sbx.io";

/// Client → server: bytes for the command's standard input.
pub const STDIN: u8 = 0;
/// Server → client: bytes of the command's standard output (all output with a terminal).
pub const STDOUT: u8 = 1;
/// Server → client: bytes of the command's standard error.
pub const STDERR: u8 = 2;
/// Server → client: how the command ended, once, last ([`ExecStatus`] as JSON).
pub const STATUS: u8 = 3;
/// Client → server: the terminal's new size ([`TermSize`] as JSON).
pub const RESIZE: u8 = 4;
/// Client → server: a signal for the command, by name (`INT`, `TERM`, `HUP`, `KILL`, …).
pub const SIGNAL: u8 = 5;
/// Client → server: a stream ends; the payload is the channel (`[0]`: stdin).
pub const CLOSE: u8 = 255;

/// The most bytes a server sends in one output frame.
pub const MAX_FRAME: usize = 32 * 1024;

/// The longest message (and WebSocket frame) a client may send: 1 MiB, far above what a
/// terminal or a pipe hands over at once (the CLI sends what one read gives, 8 KiB at most),
/// and small enough that a client cannot make the server hold much. A longer one is refused
/// by its header, before its payload is read: the server answers a `BadRequest` status and
/// closes with 1009 (message too big).
pub const MAX_CLIENT_MESSAGE: usize = 1 << 20;

/// Why the client's side of a stream ended early.
enum Broken {
    /// It sent something the protocol does not allow (the reason).
    Refused(String),
    /// It sent a message over [`MAX_CLIENT_MESSAGE`].
    TooBig,
}

/// Signals a client may send, by name.
pub const SIGNALS: [&str; 8] = [
    "HUP", "INT", "QUIT", "KILL", "USR1", "USR2", "TERM", "WINCH",
];

/// The number of a signal of [`SIGNALS`] (with or without `SIG`).
pub fn signal_number(name: &str) -> Option<i32> {
    let name = name.trim();
    let name = name.strip_prefix("SIG").unwrap_or(name);
    Some(match name {
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "QUIT" => libc::SIGQUIT,
        "KILL" => libc::SIGKILL,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "TERM" => libc::SIGTERM,
        "WINCH" => libc::SIGWINCH,
        _ => return None,
    })
}

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TermSize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

/// How a streamed command ended (the [`STATUS`] frame): its exit code, or why it could not run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ExecStatus {
    /// Exit code (128 + signal when a signal ended it, 124 at the time limit); absent with
    /// `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The command was killed at `timeout_seconds`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// Why the command could not run or the stream broke (the error envelope's body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

impl ExecStatus {
    /// A command that exited with `code`.
    pub fn exited(code: i32) -> ExecStatus {
        ExecStatus {
            exit_code: Some(code),
            ..ExecStatus::default()
        }
    }

    /// A stream that failed with `code` (an [`crate::shared::envelope::ErrorCode`] name).
    pub fn failed(code: &str, message: impl Into<String>) -> ExecStatus {
        ExecStatus {
            error: Some(ErrorBody {
                code: code.to_string(),
                message: message.into(),
            }),
            ..ExecStatus::default()
        }
    }
}

/// One message of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Input bytes.
    Stdin(Bytes),
    /// Output bytes.
    Stdout(Bytes),
    /// Error output bytes.
    Stderr(Bytes),
    /// The end: how the command ended.
    Status(ExecStatus),
    /// The terminal was resized.
    Resize(TermSize),
    /// A signal by name.
    Signal(String),
    /// Standard input ends.
    CloseStdin,
}

impl Frame {
    /// The message's bytes: channel, then payload.
    pub fn encode(&self) -> Vec<u8> {
        let (channel, payload): (u8, Vec<u8>) = match self {
            Frame::Stdin(b) => (STDIN, b.to_vec()),
            Frame::Stdout(b) => (STDOUT, b.to_vec()),
            Frame::Stderr(b) => (STDERR, b.to_vec()),
            Frame::Status(s) => (STATUS, serde_json::to_vec(s).unwrap_or_default()),
            Frame::Resize(s) => (RESIZE, serde_json::to_vec(s).unwrap_or_default()),
            Frame::Signal(name) => (SIGNAL, name.as_bytes().to_vec()),
            Frame::CloseStdin => (CLOSE, vec![STDIN]),
        };
        let mut out = Vec::with_capacity(payload.len() + 1);
        out.push(channel);
        out.extend_from_slice(&payload);
        out
    }

    /// Reads a message; an unknown channel or a malformed payload is an error naming it.
    pub fn decode(message: &[u8]) -> Result<Frame, String> {
        let (&channel, payload) = message
            .split_first()
            .ok_or_else(|| "an empty message (the first byte is the channel)".to_string())?;
        let json = |what: &str| format!("a {what} frame whose payload is not its JSON object");
        Ok(match channel {
            STDIN => Frame::Stdin(Bytes::copy_from_slice(payload)),
            STDOUT => Frame::Stdout(Bytes::copy_from_slice(payload)),
            STDERR => Frame::Stderr(Bytes::copy_from_slice(payload)),
            STATUS => Frame::Status(serde_json::from_slice(payload).map_err(|_| json("status"))?),
            RESIZE => Frame::Resize(serde_json::from_slice(payload).map_err(|_| json("resize"))?),
            SIGNAL => Frame::Signal(String::from_utf8_lossy(payload).into_owned()),
            CLOSE if payload == [STDIN] => Frame::CloseStdin,
            CLOSE => return Err("a close frame for a channel other than stdin (0)".into()),
            other => return Err(format!("unknown channel {other}")),
        })
    }
}

/// A running streamed command as its platform hands it over: `input` takes the client's
/// frames (stdin, resize, signal, close), `output` yields the command's (stdout, stderr, then
/// one status). Dropping both ends before the status kills the command.
pub struct ExecSession {
    /// Frames for the command.
    pub input: mpsc::Sender<Frame>,
    /// Frames of the command, the status last.
    pub output: mpsc::Receiver<Frame>,
}

impl ExecSession {
    /// A session's two channel pairs: the one for its holder and the one for its runner.
    pub fn channels() -> (ExecSession, mpsc::Receiver<Frame>, mpsc::Sender<Frame>) {
        let (input, input_rx) = mpsc::channel(64);
        let (output_tx, output) = mpsc::channel(64);
        (ExecSession { input, output }, input_rx, output_tx)
    }
}

/// Sends what `reader` yields as frames (`Frame::Stdout` or `Frame::Stderr`) until it ends or
/// the session's holder left.
pub fn pump(
    mut reader: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    out: mpsc::Sender<Frame>,
    frame: fn(Bytes) -> Frame,
) -> tokio::task::JoinHandle<()> {
    use tokio::io::AsyncReadExt;
    tokio::spawn(async move {
        let mut buf = vec![0u8; MAX_FRAME];
        while let Ok(n) = reader.read(&mut buf).await {
            if n == 0
                || out
                    .send(frame(Bytes::copy_from_slice(&buf[..n])))
                    .await
                    .is_err()
            {
                break;
            }
        }
    })
}

/// What a streamed exec asks for (the route's query, also what the service sends an agent).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExecStreamQuery {
    /// Namespace; `default` when omitted.
    #[serde(
        default,
        deserialize_with = "crate::shared::models::formats::namespace_param",
        skip_serializing_if = "Option::is_none"
    )]
    #[param(value_type = Option<DnsLabel>)]
    pub namespace: Option<String>,
    /// Shell command, run with `/bin/sh -c` (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(example = "sh", value_type = String, required = true, min_length = 1)]
    pub command: Option<String>,
    /// Run the command on a terminal (output on stdout only; resize frames apply).
    #[serde(default)]
    pub tty: bool,
    /// Forward the client's stdin frames (without it the command's stdin is empty).
    #[serde(default)]
    pub stdin: bool,
    /// The terminal's initial columns (with `tty`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(maximum = 65535)]
    pub cols: Option<u16>,
    /// The terminal's initial rows (with `tty`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(maximum = 65535)]
    pub rows: Option<u16>,
    /// Seconds before the command is killed (exit code 124); no limit when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1)]
    pub timeout_seconds: Option<u64>,
}

impl ExecStreamQuery {
    /// The terminal's initial size, when both are given.
    pub fn size(&self) -> Option<TermSize> {
        match (self.cols, self.rows) {
            (Some(cols), Some(rows)) if cols > 0 && rows > 0 => Some(TermSize { cols, rows }),
            _ => None,
        }
    }
}

/// The WebSocket a client holds.
pub type ClientSocket = tokio_tungstenite::WebSocketStream<reqwest::Upgraded>;

/// Opens the WebSocket of `request` (a `GET`, with its headers and credentials): the upgrade
/// with [`SUBPROTOCOL`]. A refusal is `Err((status, body))`; a transport failure
/// `Err((0, reason))`.
pub async fn connect(request: reqwest::RequestBuilder) -> Result<ClientSocket, (u16, Vec<u8>)> {
    use base64::Engine;
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).map_err(|e| (0, e.to_string().into_bytes()))?;
    let key = base64::engine::general_purpose::STANDARD.encode(nonce);
    let response = request
        .header(reqwest::header::CONNECTION, "Upgrade")
        .header(reqwest::header::UPGRADE, "websocket")
        .header(reqwest::header::SEC_WEBSOCKET_VERSION, "13")
        .header(reqwest::header::SEC_WEBSOCKET_KEY, &key)
        .header(reqwest::header::SEC_WEBSOCKET_PROTOCOL, SUBPROTOCOL)
        .send()
        .await
        .map_err(|e| (0, crate::shared::io::root_cause(&e).into_bytes()))?;
    let status = response.status();
    if status != reqwest::StatusCode::SWITCHING_PROTOCOLS {
        let body = response
            .bytes()
            .await
            .map(|b| b.to_vec())
            .unwrap_or_default();
        return Err((status.as_u16(), body));
    }
    let accept = response
        .headers()
        .get(reqwest::header::SEC_WEBSOCKET_ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if accept != tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes()) {
        return Err((
            0,
            b"the server's WebSocket handshake does not match".to_vec(),
        ));
    }
    let upgraded = response
        .upgrade()
        .await
        .map_err(|e| (0, crate::shared::io::root_cause(&e).into_bytes()))?;
    Ok(tokio_tungstenite::WebSocketStream::from_raw_socket(
        upgraded,
        tokio_tungstenite::tungstenite::protocol::Role::Client,
        None,
    )
    .await)
}

/// The client's end. Serves `socket` as a session: frames it receives go to the session's `input`, the
/// session's `output` frames are sent on it (the client's end: the CLI, and the service
/// calling a node's agent). The session ends when the socket closes; a malformed frame from
/// the server ends it with a status that says so.
pub fn client_session(socket: ClientSocket) -> ExecSession {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let (session, mut input, output) = ExecSession::channels();
    let (mut sink, mut stream) = socket.split();
    tokio::spawn(async move {
        while let Some(frame) = input.recv().await {
            if sink
                .send(Message::Binary(frame.encode().into()))
                .await
                .is_err()
            {
                break;
            }
        }
        let _ = sink.close().await;
    });
    tokio::spawn(async move {
        let mut ended = false;
        while let Some(message) = stream.next().await {
            let frame = match message {
                Ok(Message::Binary(bytes)) => Frame::decode(&bytes),
                Ok(Message::Close(_)) => break,
                Ok(_) => continue,
                Err(e) => Ok(Frame::Status(ExecStatus::failed(
                    "ServiceUnavailable",
                    format!("the exec stream broke off: {e}"),
                ))),
            };
            let frame = frame.unwrap_or_else(|e| {
                Frame::Status(ExecStatus::failed(
                    "InternalServerError",
                    format!("the server sent {e}"),
                ))
            });
            ended = matches!(frame, Frame::Status(_));
            if output.send(frame).await.is_err() || ended {
                break;
            }
        }
        if !ended {
            let _ = output
                .send(Frame::Status(ExecStatus::failed(
                    "ServiceUnavailable",
                    "the exec stream closed before the command's exit status",
                )))
                .await;
        }
    });
    session
}

/// The server's end (the service's route, and a node agent's for the service): relays
/// `session` over `socket` until the command's status is sent, the client leaves or `timeout`
/// passes (the command is killed: exit code 124, `timed_out`); a client that breaks the
/// protocol gets a status saying how, and the command ends.
pub async fn serve(
    socket: axum::extract::ws::WebSocket,
    session: ExecSession,
    timeout: Option<std::time::Duration>,
) {
    use axum::extract::ws::Message;
    use futures_util::{SinkExt, StreamExt};
    let (mut sink, mut stream) = socket.split();
    let ExecSession { input, mut output } = session;
    let (ended_tx, mut ended) = tokio::sync::oneshot::channel::<Option<Broken>>();
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
                        break Some(Broken::Refused(
                            "a client sends only stdin (0), resize (4), signal (5) and close (255) frames"
                                .to_string(),
                        ));
                    }
                    Err(e) => break Some(Broken::Refused(format!("the client sent {e}"))),
                },
                Some(Ok(Message::Text(_))) => {
                    break Some(Broken::Refused(
                        "frames are binary messages (channel byte, then payload)".into(),
                    ));
                }
                // tungstenite's capacity error, known by its text: axum wraps the error of
                // its own tungstenite, which this crate cannot name.
                Some(Err(e)) if e.to_string().contains("Message too long") => {
                    break Some(Broken::TooBig);
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
                match broken {
                    Ok(Some(Broken::Refused(reason))) => {
                        let _ = sink.send(send(Frame::Status(ExecStatus::failed("BadRequest", reason)))).await;
                    }
                    Ok(Some(Broken::TooBig)) => {
                        let reason = format!("a client message is at most {MAX_CLIENT_MESSAGE} bytes");
                        let _ = sink.send(send(Frame::Status(ExecStatus::failed("BadRequest", reason)))).await;
                        let _ = sink
                            .send(Message::Close(Some(axum::extract::ws::CloseFrame {
                                code: axum::extract::ws::close_code::SIZE,
                                reason: "message too big".into(),
                            })))
                            .await;
                    }
                    _ => {}
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        for frame in [
            Frame::Stdin(Bytes::from_static(b"ls\n")),
            Frame::Stdout(Bytes::from_static(b"")),
            Frame::Stderr(Bytes::from_static(b"\xff\x00")),
            Frame::Status(ExecStatus::exited(3)),
            Frame::Status(ExecStatus::failed("Conflict", "paused")),
            Frame::Resize(TermSize { cols: 80, rows: 24 }),
            Frame::Signal("INT".into()),
            Frame::CloseStdin,
        ] {
            assert_eq!(Frame::decode(&frame.encode()).unwrap(), frame);
        }
        assert!(Frame::decode(&[]).is_err());
        assert!(Frame::decode(&[9, 1]).unwrap_err().contains("channel 9"));
        assert!(
            Frame::decode(&[RESIZE, b'x'])
                .unwrap_err()
                .contains("resize")
        );
        assert!(Frame::decode(&[CLOSE, 1]).is_err());
        assert_eq!(
            String::from_utf8(Frame::Status(ExecStatus::exited(0)).encode()[1..].to_vec()).unwrap(),
            r#"{"exit_code":0}"#
        );
    }

    #[test]
    fn signals_by_name() {
        assert_eq!(signal_number("INT"), Some(libc::SIGINT));
        assert_eq!(signal_number("SIGKILL"), Some(libc::SIGKILL));
        assert_eq!(signal_number("STOP"), None);
        for name in SIGNALS {
            assert!(signal_number(name).is_some(), "{name}");
        }
    }
}
