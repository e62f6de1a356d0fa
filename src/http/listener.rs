//! The listening side of the server: the accept loop every listener runs (HTTP/1.1, the
//! header time-out and size limit, the connection limit with an immediate 503 past it), the
//! hand-over of connections to the serving threads, and the graceful stop. What a request is
//! answered with is not decided here: the listener is given the router (`http::handle`) or the
//! metrics answer.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

use super::AppState;
use super::body::ResponseBody;
use super::head_size;
use super::workers::{self, Workers};
use crate::config::ClientLimits;
use crate::engine::Engine;

/// What a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Serves {
    /// SageMaker's routes.
    Routes,
    /// `GET /metrics` only.
    Metrics,
}

/// One listener's connections and what they share: the limits, the permits that bound them,
/// the serving threads they run on, the HTTP settings, and the signal that stops them.
struct Connections<E> {
    /// What the listener serves.
    serves: Serves,
    /// The server's state, handed to every request.
    state: Arc<AppState<E>>,
    /// The connection limits and time-outs (`client_limits` of the configuration).
    limits: ClientLimits,
    /// One permit per open connection, `max_connections` in all.
    slots: Arc<Semaphore>,
    /// The serving threads of SageMaker's routes; `None` serves on this runtime.
    workers: Option<Workers>,
    /// HTTP/1.1 with the header read time-out and the head size limit.
    builder: hyper::server::conn::http1::Builder,
    /// Sends `true` to ask every connection to finish its request in flight and close.
    stopping: watch::Sender<bool>,
    /// Held by every open connection until it ends: the graceful stop waits for them all.
    stop: watch::Receiver<bool>,
}

/// Serves on `listener` with `answer` until `shutdown`, then stops accepting and lets the
/// connections (and bidirectional sessions) finish for up to `grace`. SageMaker's routes are
/// served on [`Workers`] (one single-threaded runtime per core, each connection on one of
/// them); the metrics listener's few connections stay on this runtime.
pub(super) async fn run<E, A, F>(
    serves: Serves,
    listener: TcpListener,
    state: Arc<AppState<E>>,
    answer: A,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) where
    E: Engine,
    A: Fn(Arc<AppState<E>>, Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<ResponseBody>> + Send + 'static,
{
    let connections = Connections::new(serves, state);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => connections.accept(stream, answer.clone()),
                Err(error) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    connections.finish(grace).await;
}

impl<E: Engine> Connections<E> {
    fn new(serves: Serves, state: Arc<AppState<E>>) -> Connections<E> {
        let (stopping, stop) = watch::channel(false);
        let limits = state.config.http.client_limits;
        let workers = match serves {
            Serves::Routes => start_workers(state.config.http.worker_threads),
            Serves::Metrics => None,
        };
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .max_buf_size(head_size::READ_BUFFER_BYTES)
            .keep_alive(true);
        Connections {
            serves,
            state,
            limits,
            slots: Arc::new(Semaphore::new(limits.max_connections)),
            workers,
            builder,
            stopping,
            stop,
        }
    }

    /// Serves one accepted connection with `answer`, or refuses it with a 503 when the
    /// listener is at its connection limit.
    fn accept<A, F>(&self, stream: TcpStream, answer: A)
    where
        A: Fn(Arc<AppState<E>>, Request<Incoming>) -> F + Send + Sync + 'static,
        F: Future<Output = Response<ResponseBody>> + Send + 'static,
    {
        let _ = stream.set_nodelay(true);
        let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
            self.state.metrics.connection_refused();
            tokio::spawn(refuse_busy(stream, self.limits.max_connections));
            return;
        };
        let state = Arc::clone(&self.state);
        let answer = Arc::new(answer);
        let service = service_fn(move |request| {
            let (state, answer) = (Arc::clone(&state), Arc::clone(&answer));
            async move {
                let response = match head_size::refuse_oversized(&request) {
                    Some(refusal) => refusal,
                    None => answer(state, request).await,
                };
                Ok::<_, Infallible>(response)
            }
        });
        let (stop, builder, serves) = (self.stop.clone(), self.builder.clone(), self.serves);
        let serve = move |stream: TcpStream| async move {
            serve_connection(&builder, stream, service, stop, serves).await;
            drop(slot);
        };
        match &self.workers {
            Some(workers) => hand_over(workers, stream, serve),
            None => drop(tokio::spawn(serve(stream))),
        }
    }

    /// Asks every connection to finish and waits for them, and for every bidirectional
    /// session, for at most `grace`; then stops the serving threads.
    async fn finish(self, grace: Duration) {
        tracing::info!("shutting down: finishing in-flight requests");
        let Connections {
            state,
            limits,
            workers,
            stopping,
            stop,
            ..
        } = self;
        tokio::select! {
            () = async {
                drop(stop);
                let _ = stopping.send(true);
                state.shutting_down.send_replace(true);
                stopping.closed().await;
                // Upgraded connections left the count above: wait for every stream's permit.
                let streams = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
                drop(state.bidi_streams.acquire_many(streams).await);
            } => tracing::info!("all connections closed"),
            () = tokio::time::sleep(grace) => tracing::warn!(?grace, "grace period over with requests still in flight"),
        }
        if let Some(workers) = workers {
            let _ = tokio::task::spawn_blocking(move || workers.stop()).await;
        }
    }
}

/// Serves one connection until it ends, or until `stop` turns `true`: then it finishes the
/// request in flight and closes. With upgrades: a bidirectional stream's handshake hands its
/// connection on.
async fn serve_connection<S>(
    builder: &hyper::server::conn::http1::Builder,
    stream: TcpStream,
    service: S,
    mut stop: watch::Receiver<bool>,
    serves: Serves,
) where
    S: hyper::service::HttpService<Incoming, ResBody = ResponseBody>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let connection = builder
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::pin!(connection);
    let ended = tokio::select! {
        ended = connection.as_mut() => ended,
        () = async { drop(stop.wait_for(|stopping| *stopping).await) } => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = ended {
        tracing::debug!(%error, ?serves, "connection ended with an error");
    }
}

/// The serving threads of the main listener, or `None` (serve on this runtime) if they cannot
/// be started.
fn start_workers(configured: Option<usize>) -> Option<Workers> {
    let threads = workers::default_count(configured);
    match Workers::start(threads) {
        Ok(workers) => {
            tracing::debug!(threads, "HTTP worker threads started");
            Some(workers)
        }
        Err(error) => {
            tracing::error!(%error, "could not start the HTTP worker threads; serving on the main runtime");
            None
        }
    }
}

/// Moves an accepted connection to the least loaded worker thread, where it is registered with
/// that thread's runtime and served.
fn hand_over<F, S>(workers: &Workers, stream: TcpStream, serve: S)
where
    S: FnOnce(tokio::net::TcpStream) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let stream = match stream.into_std() {
        Ok(stream) => stream,
        Err(error) => {
            tracing::warn!(%error, "could not hand a connection to a worker thread");
            return;
        }
    };
    workers.assign(move |assignment| async move {
        match tokio::net::TcpStream::from_std(stream) {
            Ok(stream) => serve(stream).await,
            Err(error) => tracing::warn!(%error, "a worker thread could not take a connection"),
        }
        drop(assignment);
    });
}

/// Answers a connection over the limit with a 503 and closes it (within a second) without
/// parsing the request: the client learns at once and can retry elsewhere.
async fn refuse_busy(mut stream: TcpStream, limit: usize) {
    use tokio::io::AsyncWriteExt;
    let body = format!(
        "{{\"error\":\"the server is at its limit of {limit} open connections; retry shortly\"}}"
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        // Read what the client sent before closing, so the close is not a reset that could
        // destroy the 503 before the client reads it.
        let mut sink = [0u8; 4096];
        let mut drained = 0;
        while drained < 64 * 1024 {
            match tokio::io::AsyncReadExt::read(&mut stream, &mut sink).await? {
                0 => break,
                n => drained += n,
            }
        }
        Ok::<_, std::io::Error>(())
    };
    if tokio::time::timeout(Duration::from_secs(1), write)
        .await
        .is_err()
    {
        tracing::debug!("a refused connection did not take its 503 within 1 s");
    }
    tracing::debug!(limit, "connection refused: at the connection limit");
}
