//! The HTTP listener: hyper's connection builder with the time limits `axum::serve` leaves
//! unset, so that slow or idle clients cannot hold the daemon's connections. A client must
//! send a request's whole header within `[http] headerReadTimeout` of connecting or of its
//! previous response, or the connection is closed (the body's read timeout is a router
//! layer). Stops accepting on `shutdown` and waits for in-flight requests. With a TLS
//! configuration (the replicas' internal listener, the agent), the handshake must also be
//! done within that time, and a client that does not complete it (plain HTTP, a certificate
//! the configuration refuses) is closed before any request is read. Each request carries its
//! peer's address ([`axum::extract::ConnectInfo`]).
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// Largest request header (HTTP/1 read buffer, HTTP/2 header list): 431 beyond.
const MAX_HEADER_BYTES: usize = 64 * 1024;
/// How often an HTTP/2 connection is pinged, and how long a ping may go unanswered.
const HTTP2_KEEP_ALIVE: Duration = Duration::from_secs(30);

/// Serves `app` on `listener` until `shutdown` completes, over TLS with `tls`;
/// `header_read_timeout` as above.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    header_read_timeout: Duration,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .max_buf_size(MAX_HEADER_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(HTTP2_KEEP_ALIVE)
        .keep_alive_timeout(HTTP2_KEEP_ALIVE)
        .max_header_list_size(MAX_HEADER_BYTES as u32)
        // WebSockets over HTTP/2 (the streamed exec).
        .enable_connect_protocol();
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning
                    // (a refused connection is the peer's problem, not ours).
                    if !matches!(
                        e.kind(),
                        std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset
                    ) {
                        tracing::warn!(error = %e, "accepting a connection");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let (builder, watcher, acceptor) = (builder.clone(), graceful.watcher(), acceptor.clone());
        let app = tower::ServiceExt::map_request(app.clone(), with_peer(peer));
        tokio::spawn(async move {
            // The protocol sniffing (HTTP/1 or HTTP/2) waits for the first bytes with no time
            // limit of its own: a connection that never sends any is closed here.
            let mut first = [0u8; 1];
            if !matches!(
                tokio::time::timeout(header_read_timeout, stream.peek(&mut first)).await,
                Ok(Ok(1..))
            ) {
                return;
            }
            let service = TowerToHyperService::new(app);
            let Some(acceptor) = acceptor else {
                let connection =
                    builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                if let Err(e) = watcher.watch(connection).await {
                    tracing::debug!(error = %e, "connection ended");
                }
                return;
            };
            let stream =
                match tokio::time::timeout(header_read_timeout, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake refused");
                        return;
                    }
                    Err(_) => return,
                };
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            if let Err(e) = watcher.watch(connection).await {
                tracing::debug!(error = %e, "connection ended");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Marks each request with the address of the connection's peer.
fn with_peer<B>(
    peer: SocketAddr,
) -> impl Fn(axum::http::Request<B>) -> axum::http::Request<B> + Clone {
    move |mut request| {
        request.extensions_mut().insert(ConnectInfo(peer));
        request
    }
}
