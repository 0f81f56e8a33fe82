//! The accept loop: our own, around hyper, because `axum::serve` can neither close a
//! connection whose client sends its headers slowly or sits idle, nor cap how many
//! connections are open at once. Both are what keeps a slow or malicious client (slowloris)
//! from tying up the server.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::Service;

/// What a connection may cost the server.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Longest a client may take to send a request's headers, counted from when the connection
    /// opens or its previous response was sent: a connection idle that long is closed too.
    pub header_timeout: Duration,
    /// Most connections open at once. The next client waits in the listen queue until one
    /// closes.
    pub max_connections: usize,
    /// How long shutdown waits for requests in flight before closing their connections.
    pub drain_timeout: Duration,
}

/// Serves `app` on `listener` until `shutdown` completes, then lets requests in flight finish
/// (for up to `drain_timeout`).
pub async fn run(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    // HTTP/1.1 only: its header timeout runs from the moment a connection opens, so a client
    // that sends nothing is closed too. (hyper-util's HTTP/1-or-2 builder first waits,
    // without a timer, to tell the versions apart.) HTTP/2 and TLS are for the proxy in front.
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // A free slot first, then a connection: over the limit, clients queue in the kernel
        // rather than being accepted and left unanswered.
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot,
            () = &mut shutdown => break,
        };
        let Ok(slot) = slot else { break };
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, or a connection reset before it was accepted:
                    // wait a moment rather than spin.
                    tracing::warn!(%error, "could not accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let router = app.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request
                .extensions_mut()
                .insert(ConnectInfo::<SocketAddr>(remote));
            router.clone().call(request)
        });
        // No upgrades: the API has no websockets.
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                // A client that went away, or one cut off by the header timeout.
                tracing::debug!(%error, "connection closed with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.drain_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still busy at shutdown were closed");
    }
}
