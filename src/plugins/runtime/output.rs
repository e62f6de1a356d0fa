//! A guest's stdout or stderr, captured for the log: like wasmtime's `MemoryOutputPipe`, a
//! bounded buffer whose overflow traps the guest, but drained at the end of each call
//! ([`CapturedOutput::take`]), so an instance that serves several calls (a stream's,
//! [`super::kept_instance`]) has the whole capacity for each of them.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// One captured output stream; clones write to the same buffer.
#[derive(Clone)]
pub struct CapturedOutput {
    capacity: usize,
    buffer: Arc<Mutex<BytesMut>>,
}

impl CapturedOutput {
    /// An empty capture holding at most `capacity` bytes between two [`CapturedOutput::take`]s.
    pub fn new(capacity: usize) -> CapturedOutput {
        CapturedOutput {
            capacity,
            buffer: Arc::default(),
        }
    }

    /// What was written since the last take, leaving the buffer empty.
    pub fn take(&self) -> Bytes {
        self.lock().split().freeze()
    }

    fn lock(&self) -> MutexGuard<'_, BytesMut> {
        self.buffer.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn room(&self) -> usize {
        self.capacity.saturating_sub(self.lock().len())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for CapturedOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        let mut buffer = self.lock();
        if bytes.len() > self.capacity.saturating_sub(buffer.len()) {
            return Err(StreamError::trap(
                "the call wrote more output than it may (256 KiB)",
            ));
        }
        buffer.extend_from_slice(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        match self.room() {
            0 => Err(StreamError::Closed),
            room => Ok(room),
        }
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CapturedOutput {
    async fn ready(&mut self) {}
}

impl AsyncWrite for CapturedOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let mut buffer = self.lock();
        let written = bytes.len().min(self.capacity.saturating_sub(buffer.len()));
        buffer.extend_from_slice(&bytes[..written]);
        Poll::Ready(Ok(written))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for CapturedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_take_drains_and_restores_the_whole_capacity() {
        let mut out = CapturedOutput::new(8);
        out.write(Bytes::from_static(b"hello")).unwrap();
        assert!(
            out.write(Bytes::from_static(b"world")).is_err(),
            "past capacity"
        );
        assert_eq!(out.take(), Bytes::from_static(b"hello"));
        assert_eq!(out.check_write().unwrap(), 8);
        out.write(Bytes::from_static(b"world")).unwrap();
        assert_eq!(out.clone().take(), Bytes::from_static(b"world"));
        assert!(out.take().is_empty());
    }
}
