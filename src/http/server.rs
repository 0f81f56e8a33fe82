//! The accept loop: our own, around hyper, because `axum::serve` can neither close a
//! connection whose client sends its headers slowly or sits idle, nor cap how many
//! connections are open at once. What a connection may cost is bounded every way a client
//! controls it:
//!
//! - its headers must arrive within the header timeout, which also closes an idle connection;
//! - its responses must make progress: a client that stops reading (a tiny receive window, a
//!   paused process) is cut off once a write has waited the write timeout;
//! - it lives at most the maximum age, after which it is closed between requests;
//! - at most so many connections are open at once, and at most so many from one client
//!   address (an IPv6 /64 counts as one address; the trusted proxies are not capped).

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::time::Sleep;
use tower::Service;

use super::client::{ClientAddresses, group};

/// What a connection may cost the server.
#[derive(Clone, Debug)]
pub struct ConnectionLimits {
    /// Longest a client may take to send a request's headers, counted from when the connection
    /// opens or its previous response was sent: a connection idle that long is closed too.
    pub header_timeout: Duration,
    /// Longest a write may wait for the client to take its bytes before the connection is
    /// closed.
    pub write_timeout: Duration,
    /// Longest a connection lives; then it is closed as soon as no request is in flight.
    pub max_age: Duration,
    /// Most connections open at once. The next client waits in the listen queue until one
    /// closes.
    pub max_connections: usize,
    /// Most connections open at once from one client address.
    pub max_per_address: usize,
    /// How long shutdown waits for requests in flight before closing their connections.
    pub drain_timeout: Duration,
    /// Which peers are proxies, not capped per address.
    pub addresses: ClientAddresses,
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
    let max_connections = limits.max_connections.max(1);
    let slots = Arc::new(Semaphore::new(max_connections));
    let per_address = PerAddress::default();
    let (stop, stopping) = watch::channel(false);
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
        let capped = !limits.addresses.is_proxy(remote.ip());
        let Some(held) = per_address.enter(remote.ip(), capped, limits.max_per_address) else {
            tracing::debug!(peer = %group(remote.ip()), "connection refused: too many from one address");
            refuse(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let router = app.clone();
        let (close, closing) = watch::channel(false);
        let ticket = Ticket(Arc::new(Place {
            _held: held,
            _slot: slot,
            stopping: stopping.clone(),
            closing,
        }));
        let request_ticket = ticket.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request
                .extensions_mut()
                .insert(ConnectInfo::<SocketAddr>(remote));
            request.extensions_mut().insert(request_ticket.clone());
            router.clone().call(request)
        });
        let io = TokioIo::new(Watched::new(stream, limits.write_timeout));
        let connection = builder.serve_connection(io, service).with_upgrades();
        let (max_age, drain) = (limits.max_age, limits.drain_timeout);
        let mut stopping = stopping.clone();
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let ended = tokio::select! {
                closed = connection.as_mut() => Some(closed),
                () = tokio::time::sleep(max_age) => None,
                () = stopped(&mut stopping) => None,
            };
            let closed = match ended {
                Some(closed) => closed,
                // Too old, or the server stops: closed once its request in flight is answered.
                None => {
                    // A response that never ends by itself (an event stream) ends now, with a
                    // last word, rather than be cut when the drain runs out.
                    let _ = close.send(true);
                    connection.as_mut().graceful_shutdown();
                    finish(connection, drain).await
                }
            };
            if let Err(error) = closed {
                // A client that went away, or one cut off by a timeout.
                tracing::debug!(%error, "connection closed with an error");
            }
            // The connection's place is given back, unless a websocket it was upgraded to
            // holds it still.
            drop(ticket);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    // Every connection gives its slot back when it closes: all slots back, all closed.
    let all_closed = slots.acquire_many(u32::try_from(max_connections).unwrap_or(u32::MAX));
    if tokio::time::timeout(limits.drain_timeout + Duration::from_secs(1), all_closed)
        .await
        .is_err()
    {
        tracing::warn!("connections still busy at shutdown were closed");
    }
}

/// A connection's place among those open (overall and from its address), held as long as the
/// connection lives: by the connection, and by a websocket it was upgraded to, which outlives
/// the HTTP connection that carried its handshake. Each request carries one.
#[derive(Clone)]
pub struct Ticket(Arc<Place>);

pub struct Place {
    _held: Held,
    _slot: tokio::sync::OwnedSemaphorePermit,
    stopping: watch::Receiver<bool>,
    /// Set when the HTTP connection is told to close: it reached its age, or the server stops.
    closing: watch::Receiver<bool>,
}

impl Ticket {
    /// Completes when the server is told to stop: a websocket then closes (1001).
    pub async fn stopped(&self) {
        let mut stopping = self.0.stopping.clone();
        stopped(&mut stopping).await;
    }

    /// Completes when the HTTP connection is told to close (its age, or the server stopping)
    /// and waits only for its response in flight: an event stream then ends. Never, once the
    /// connection's task has ended (a websocket it was upgraded to outlives it, and has the
    /// server's stop to watch).
    pub async fn closing(&self) {
        let mut closing = self.0.closing.clone();
        if closing.wait_for(|close| *close).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Completes when the server is told to stop.
async fn stopped(stopping: &mut watch::Receiver<bool>) {
    let _ = stopping.wait_for(|stop| *stop).await;
}

/// Waits for a connection told to close to finish its request in flight, for up to `drain`.
async fn finish<F: Future<Output = hyper::Result<()>>>(
    connection: Pin<&mut F>,
    drain: Duration,
) -> hyper::Result<()> {
    match tokio::time::timeout(drain, connection).await {
        Ok(closed) => closed,
        Err(_) => Ok(()),
    }
}

/// Answers a connection over the per-address cap with 503 and closes it, without waiting
/// for the client.
fn refuse(stream: TcpStream) {
    const ANSWER: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\
                            retry-after: 1\r\nconnection: close\r\n\r\n";
    let _ = stream.try_write(ANSWER);
}

/// Connections open per client address (IPv6 grouped by /64).
#[derive(Clone, Default)]
struct PerAddress(Arc<Mutex<HashMap<IpAddr, usize>>>);

/// A connection counted against its address until dropped.
struct Held {
    counts: PerAddress,
    address: IpAddr,
}

impl PerAddress {
    /// Counts a new connection from `address`; None when the address already has `max` open
    /// (only when `capped`).
    fn enter(&self, address: IpAddr, capped: bool, max: usize) -> Option<Held> {
        let address = group(address);
        let mut counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let open = counts.entry(address).or_insert(0);
        if capped && *open >= max.max(1) {
            return None;
        }
        *open += 1;
        Some(Held {
            counts: self.clone(),
            address,
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(open) = counts.get_mut(&self.address) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                counts.remove(&self.address);
            }
        }
    }
}

/// A client's stream whose writes must make progress: a write (or flush) that has waited
/// `write_timeout` for the client to take its bytes fails, which closes the connection.
struct Watched {
    stream: TcpStream,
    write_timeout: Duration,
    /// Armed while a write waits.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl Watched {
    fn new(stream: TcpStream, write_timeout: Duration) -> Watched {
        Watched {
            stream,
            write_timeout,
            stalled: None,
        }
    }

    /// After a write or flush that was not ready: fails once the wait has lasted too long.
    fn waiting<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let timeout = self.write_timeout;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took none of the response for too long",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<T>(&mut self, result: io::Result<T>) -> Poll<io::Result<T>> {
        self.stalled = None;
        Poll::Ready(result)
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write(cx, buf) {
            Poll::Ready(result) => self.progressed(result),
            Poll::Pending => self.waiting(cx),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write_vectored(cx, bufs) {
            Poll::Ready(result) => self.progressed(result),
            Poll::Pending => self.waiting(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.stream).poll_flush(cx) {
            Poll::Ready(result) => self.progressed(result),
            Poll::Pending => self.waiting(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_connections_per_address_and_forgets_closed_ones() {
        let counts = PerAddress::default();
        let a: IpAddr = [10, 0, 0, 1].into();
        let first = counts.enter(a, true, 2).expect("first");
        let second = counts.enter(a, true, 2).expect("second");
        assert!(
            counts.enter(a, true, 2).is_none(),
            "a third is over the cap"
        );
        assert!(counts.enter(a, false, 2).is_some(), "a proxy is not capped");
        assert!(counts.enter([10, 0, 0, 2].into(), true, 2).is_some());
        drop((first, second));
        assert!(counts.enter(a, true, 2).is_some());
        let v6 = |s: &str| s.parse::<IpAddr>().expect("address");
        let _one = counts.enter(v6("2001:db8::1"), true, 1).expect("one");
        assert!(
            counts.enter(v6("2001:db8::2"), true, 1).is_none(),
            "the same /64"
        );
    }
}
