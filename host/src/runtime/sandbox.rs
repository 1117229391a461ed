//! Per-call guest state: a WASI context with no capabilities, resource limits and captured output.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{
    HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView,
};

use super::Limits;
use super::bindings::host_log;
use super::bindings::types::LogLevel;

/// Everything one guest call may touch; dropped with the call's `Store`.
pub struct SandboxState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(super) limiter: SandboxLimiter,
    pub(super) stdout: CappedOutput,
    pub(super) stderr: CappedOutput,
    /// Who is calling, to tag the plugin's log lines.
    log_context: Arc<str>,
    /// Bytes logged through `host-log`, counted against the output cap.
    logged_bytes: usize,
    max_output_bytes: usize,
}

impl SandboxState {
    pub(super) fn new(limits: &Limits, log_context: Arc<str>) -> Self {
        let stdout = CappedOutput::new(limits.max_output_bytes);
        let stderr = CappedOutput::new(limits.max_output_bytes);
        // Deny by default: no preopened directories, environment, arguments, network or
        // name lookup; stdin is closed; clocks are frozen so output cannot depend on time.
        let wasi = WasiCtxBuilder::new()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .wall_clock(FrozenClock)
            .monotonic_clock(FrozenClock)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .build();
        SandboxState {
            wasi,
            table: ResourceTable::new(),
            limiter: SandboxLimiter {
                max_memory_bytes: limits.max_memory_bytes,
                max_table_elements: limits.max_table_elements,
                memory_limit_hit: false,
            },
            stdout,
            stderr,
            log_context,
            logged_bytes: 0,
            max_output_bytes: limits.max_output_bytes,
        }
    }
}

impl WasiView for SandboxState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl host_log::Host for SandboxState {
    fn log(&mut self, level: LogLevel, message: String) {
        self.logged_bytes += message.len();
        if self.logged_bytes > self.max_output_bytes {
            return; // over the cap: dropped, and `Sandbox` reports the truncation once
        }
        let context = &*self.log_context;
        match level {
            LogLevel::Trace => tracing::trace!(target: "plugin", plugin = context, "{message}"),
            LogLevel::Debug => tracing::debug!(target: "plugin", plugin = context, "{message}"),
            LogLevel::Info => tracing::info!(target: "plugin", plugin = context, "{message}"),
            LogLevel::Warn => tracing::warn!(target: "plugin", plugin = context, "{message}"),
            LogLevel::Error => tracing::error!(target: "plugin", plugin = context, "{message}"),
        }
    }
}

impl super::bindings::types::Host for SandboxState {}

/// Enforces the memory and table caps and remembers whether the memory cap was hit, so a
/// failed allocation can be reported as "out of memory" rather than a bare trap.
pub struct SandboxLimiter {
    max_memory_bytes: usize,
    max_table_elements: usize,
    pub(super) memory_limit_hit: bool,
}

impl ResourceLimiter for SandboxLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_memory_bytes {
            self.memory_limit_hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= self.max_table_elements)
    }
}

/// A clock that always reads zero: plugins must not depend on time.
struct FrozenClock;

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// A stdout/stderr sink that keeps the first `cap` bytes and silently drops the rest.
///
/// Unlike a pipe that errors when full, dropping keeps a chatty guest running (Rust's
/// `println!` panics on a write error), while memory stays bounded.
#[derive(Clone)]
pub struct CappedOutput {
    inner: Arc<Mutex<CappedBuffer>>,
}

#[derive(Default)]
struct CappedBuffer {
    kept: Vec<u8>,
    dropped: usize,
    cap: usize,
}

impl CappedOutput {
    fn new(cap: usize) -> Self {
        CappedOutput {
            inner: Arc::new(Mutex::new(CappedBuffer {
                cap,
                ..CappedBuffer::default()
            })),
        }
    }

    fn push(&self, bytes: &[u8]) {
        let mut buffer = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let room = buffer.cap.saturating_sub(buffer.kept.len());
        let kept = bytes.len().min(room);
        buffer.kept.extend_from_slice(&bytes[..kept]);
        buffer.dropped += bytes.len() - kept;
    }

    /// What was kept, and how many bytes were dropped past the cap.
    pub fn take(&self) -> (String, usize) {
        let mut buffer = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let text = String::from_utf8_lossy(&buffer.kept).into_owned();
        buffer.kept.clear();
        (text, std::mem::take(&mut buffer.dropped))
    }
}

impl IsTerminal for CappedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedOutput {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl OutputStream for CappedOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 * 1024)
    }
}

#[async_trait::async_trait]
impl Pollable for CappedOutput {
    async fn ready(&mut self) {}
}

impl AsyncWrite for CappedOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
