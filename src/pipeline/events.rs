//! A generate stream as the pipeline produces it: payloads in order, and at most one failure
//! that ends it. Each transport frames them its own way, once: HTTP as server-sent events
//! (`http::body`), the bidirectional stream as WebSocket messages and a close frame
//! (`http::bidi_stream`). Messages here are unredacted; the transport redacts what it shows.

use bytes::Bytes;
use tokio::sync::mpsc;

/// How many events wait for a slow client before the stream waits for it.
pub(super) const EVENTS_BUFFERED: usize = 16;

/// One item of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// One event's payload: a response as generate JSON, or what a stream adapter wrote for it
    /// (one line, no line breaks).
    Data(Bytes),
    /// Why the stream ends here, after the events before it (the model failed midway, or its
    /// stream adapter did). Nothing follows it.
    Failed(String),
}

/// The receiving end of a stream; it ends when the model's responses do.
pub type Events = mpsc::Receiver<StreamEvent>;

/// A stream's sending end and the receiver handed to the transport.
pub(super) fn channel() -> (mpsc::Sender<StreamEvent>, Events) {
    mpsc::channel(EVENTS_BUFFERED)
}
