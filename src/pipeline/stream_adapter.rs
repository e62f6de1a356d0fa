//! A stream adapter (version 0.2.0's `stream-adapter` hook) at work on one stream: each
//! response's generate JSON in, the payloads of its events out, and a last call at the end.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::plugins::{KeptInstance, LoadedPlugin, StreamState};
use crate::plugins::{PluginHost, PluginInvocation, StreamPosition};

/// The stream adapter of one stream, and what each of its calls is given.
pub(super) struct StreamAdapter {
    host: Arc<PluginHost>,
    plugin: Arc<LoadedPlugin>,
    invocation: PluginInvocation,
    stream_id: String,
    created: u64,
    /// What the adapter keeps between the stream's calls (`trident:stream-state/state`).
    state: Arc<StreamState>,
    /// The instance the stream's calls share, while the engine's budget allows.
    instance: Arc<KeptInstance>,
}

impl StreamAdapter {
    /// `plugin` adapting one new stream of the request `invocation` describes.
    pub(super) fn new(
        host: Arc<PluginHost>,
        plugin: Arc<LoadedPlugin>,
        invocation: PluginInvocation,
    ) -> StreamAdapter {
        StreamAdapter {
            host,
            plugin,
            invocation,
            stream_id: stream_id(),
            created: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            state: Arc::new(StreamState::new()),
            instance: Arc::new(KeptInstance::new()),
        }
    }

    /// The payloads of the events the adapter sends for the response `json` at `index`, or,
    /// with `None`, at the end; else the message of why the stream ends here (the adapter
    /// refused, trapped, ran out of time or memory, or wrote a payload with a line break).
    pub(super) async fn call(&self, index: u64, json: Option<&[u8]>) -> Result<Vec<Bytes>, String> {
        let position = StreamPosition {
            stream_id: self.stream_id.clone(),
            created: self.created,
            index,
        };
        let payloads = self
            .host
            .adapt_stream(
                &self.plugin,
                &self.invocation,
                &position,
                json.map(<[u8]>::to_vec),
                &self.state,
                Some(&self.instance),
            )
            .await;
        let name = &self.plugin.name;
        let events = match payloads {
            Ok(Ok(payloads)) => payloads
                .into_iter()
                .map(|payload| {
                    if payload.contains(['\n', '\r']) {
                        Err(format!(
                            "plugin '{name}' returned an event payload with a line break"
                        ))
                    } else {
                        Ok(Bytes::from(payload))
                    }
                })
                .collect(),
            Ok(Err(error)) => Err(format!("plugin '{name}' refused an event: {error:?}")),
            Err(failure) => Err(failure.to_string()),
        };
        self.plugin.counters().add_stream_call(events.is_err());
        events
    }
}

/// An id unique to one stream in this process: the time it started and a sequence number.
fn stream_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{:x}{:04x}",
        nanos,
        NEXT.fetch_add(1, Ordering::Relaxed) & 0xffff
    )
}
