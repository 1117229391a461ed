//! Per-call guest state: a WASI context with no capabilities, resource limits and captured output.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use chacha20::ChaCha20Rng;
use chacha20::rand_core::SeedableRng;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWrite;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{
    HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView,
};

use super::bindings::{v0_1, v0_2, v0_3};
use super::{CallError, Limits, LogLevel};

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
    /// Set when the call was stopped for running too long in wall-clock time with CPU left.
    pub(super) stalled: Option<CallError>,
}

impl SandboxState {
    /// The state of one call with `limits` and `bounds`, whose WASI randomness is the
    /// stream of `random_seed` (see [`deterministic_random`]).
    pub(super) fn new(
        limits: &Limits,
        bounds: StoreBounds,
        log_context: Arc<str>,
        random_seed: &[u8; 32],
    ) -> Self {
        let stdout = CappedOutput::new(limits.max_output_bytes);
        let stderr = CappedOutput::new(limits.max_output_bytes);
        // Deny by default: no preopened directories, environment, arguments, network or
        // name lookup; stdin is closed; clocks are frozen and randomness is a function of
        // the request, so output cannot depend on time or chance.
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .wall_clock(FrozenClock)
            .monotonic_clock(FrozenClock)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }));
        deterministic_random(&mut wasi, random_seed);
        SandboxState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            limiter: SandboxLimiter::new(bounds),
            stdout,
            stderr,
            log_context,
            logged_bytes: 0,
            max_output_bytes: limits.max_output_bytes,
            stalled: None,
        }
    }
}

/// Largest `get-random-bytes` / `get-insecure-random-bytes` request, in bytes. The host
/// fills a buffer of that size before copying it into the guest (wasmtime's default allows
/// 64 MiB per request); real uses (hash seeds, UUIDs, keys) take a few dozen bytes.
pub const MAX_RANDOM_BYTES: u64 = 1 << 20;

/// Makes all of WASI's randomness (`wasi:random/random`, `insecure` and `insecure-seed`)
/// ChaCha20 streams keyed from `seed`, one per interface (SHA-256 of the seed and the
/// interface's name), so the same seed always yields the same bytes.
pub(super) fn deterministic_random(wasi: &mut WasiCtxBuilder, seed: &[u8; 32]) {
    let key = |stream: &str| -> [u8; 32] {
        Sha256::new()
            .chain_update(seed)
            .chain_update(stream.as_bytes())
            .finalize()
            .into()
    };
    let insecure_seed = key("insecure-seed");
    let mut low = [0u8; 16];
    low.copy_from_slice(&insecure_seed[..16]);
    wasi.secure_random(ChaCha20Rng::from_seed(key("random")))
        .insecure_random(ChaCha20Rng::from_seed(key("insecure")))
        .insecure_random_seed(u128::from_le_bytes(low))
        .max_random_size(MAX_RANDOM_BYTES);
}

impl WasiView for SandboxState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl SandboxState {
    /// A line a plugin logged through `host-log`, of any contract.
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

impl v0_1::host_log::Host for SandboxState {
    fn log(&mut self, level: v0_1::types::LogLevel, message: String) {
        SandboxState::log(self, level.into(), message);
    }
}

impl v0_1::types::Host for SandboxState {}

impl v0_2::host_log::Host for SandboxState {
    fn log(&mut self, level: v0_2::types::LogLevel, message: String) {
        SandboxState::log(self, level.into(), message);
    }
}

impl v0_2::types::Host for SandboxState {}

impl v0_3::host_log::Host for SandboxState {
    fn log(&mut self, level: v0_3::types::LogLevel, message: String) {
        SandboxState::log(self, level.into(), message);
    }
}

impl v0_3::types::Host for SandboxState {}

/// Bytes counted per table element against [`Limits::max_memory_bytes`]: what wasmtime 48
/// reserves per element. Its pooling allocator sizes a table slot by
/// `NOMINAL_MAX_TABLE_ELEM_SIZE`, the larger of a funcref element (a pointer, 8 bytes) and a
/// GC reference (4 bytes); a table of the on-demand allocator is a `Vec` of such pointers.
pub const TABLE_ELEMENT_BYTES: usize = std::mem::size_of::<usize>();

/// Wasmtime 48's message for a memory growth past what the memory's index type can address
/// (`vm/memory.rs`): the one growth failure it reports without asking `memory_growing`
/// first. Only 1-byte pages (custom-page-sizes, not enabled here) reach it today.
const INDEX_RANGE_FAILURE: &str = "memory growth exceeds memory type's limits";

/// How much of each resource one call (one `Store`) may create.
#[derive(Debug, Clone, Copy)]
pub(super) struct StoreBounds {
    /// Bytes of all linear memories plus [`TABLE_ELEMENT_BYTES`] per table element.
    pub max_memory_bytes: usize,
    /// Elements of all tables.
    pub max_table_elements: usize,
    /// Largest single linear memory the instance allocator can hold (a pool slot);
    /// `None` when memories are allocated on demand.
    pub memory_slot_bytes: Option<usize>,
    /// Core instances, linear memories and tables per instantiation.
    pub core_instances: usize,
    pub memories: usize,
    pub tables: usize,
}

/// Enforces one budget for all the linear memories and tables of a call, and remembers
/// whether it was hit, so a failed allocation is reported as "out of memory" rather than a
/// bare trap.
///
/// Checking each memory alone would give a component with k memories k times the limit.
/// The sum stays exact because of how wasmtime 48 calls a limiter (`vm/memory.rs`,
/// `vm/table.rs`):
/// - creating a memory or table asks `*_growing(0, minimum, maximum)`; a failure after
///   that fails the instantiation, so the call ends and its count with it;
/// - a growth asks `*_growing(current, desired, maximum)`, and wasmtime then still refuses a
///   `desired` over `maximum` (the declared one, 4 GiB for a 32-bit memory, or the pool's
///   for a table), or for a pooled memory over its slot: those are refused here first,
///   uncounted, so an approved table growth always happens (or traps);
/// - `memory_grow_failed` follows an approved memory growth that the OS refused (mmap,
///   mprotect): the pending growth is undone. It is also called, with no `memory_growing`
///   before it, for a growth past the index type's range: recognised by its message and
///   ignored, or it would undo the previous, successful growth.
pub struct SandboxLimiter {
    bounds: StoreBounds,
    memory_bytes: usize,
    table_elements: usize,
    /// The last approved memory growth, undone if wasmtime reports that it failed.
    pending_memory_growth: usize,
    pub(super) memory_limit_hit: bool,
}

impl SandboxLimiter {
    pub(super) fn new(bounds: StoreBounds) -> Self {
        SandboxLimiter {
            bounds,
            memory_bytes: 0,
            table_elements: 0,
            pending_memory_growth: 0,
            memory_limit_hit: false,
        }
    }

    /// Bytes counted against the memory budget: memories plus tables.
    pub(super) fn used_bytes(&self) -> usize {
        self.memory_bytes
            .saturating_add(self.table_elements.saturating_mul(TABLE_ELEMENT_BYTES))
    }

    fn fits(&self, more_bytes: usize) -> bool {
        self.used_bytes().saturating_add(more_bytes) <= self.bounds.max_memory_bytes
    }
}

impl ResourceLimiter for SandboxLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|maximum| desired > maximum) {
            return Ok(false); // wasmtime refuses it anyway: the guest's own maximum, not ours
        }
        let growth = desired.saturating_sub(current);
        let over_slot = self
            .bounds
            .memory_slot_bytes
            .is_some_and(|slot| desired > slot);
        if over_slot || !self.fits(growth) {
            self.memory_limit_hit = true;
            return Ok(false);
        }
        self.memory_bytes += growth;
        self.pending_memory_growth = growth;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        if error.to_string() != INDEX_RANGE_FAILURE {
            self.memory_bytes -= std::mem::take(&mut self.pending_memory_growth);
        }
        Ok(())
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|maximum| desired > maximum) {
            return Ok(false);
        }
        let growth = desired.saturating_sub(current);
        if self.table_elements.saturating_add(growth) > self.bounds.max_table_elements {
            return Ok(false);
        }
        if !self.fits(growth.saturating_mul(TABLE_ELEMENT_BYTES)) {
            self.memory_limit_hit = true;
            return Ok(false);
        }
        self.table_elements += growth;
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.bounds.core_instances
    }

    fn memories(&self) -> usize {
        self.bounds.memories
    }

    fn tables(&self) -> usize {
        self.bounds.tables
    }
}

/// A clock that never moves: plugins must not depend on time. The wall clock reads the epoch;
/// the monotonic clock, whose origin is arbitrary, reads [`FROZEN_MONOTONIC_NANOS`].
struct FrozenClock;

/// Where the monotonic clock stands: not zero, which Go's runtime refuses at start
/// ("nanotime returning zero").
const FROZEN_MONOTONIC_NANOS: u64 = 1_000_000_000;

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
        FROZEN_MONOTONIC_NANOS
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

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime_wasi::p2::bindings::random::{insecure, insecure_seed, random};

    const MIB: usize = 1 << 20;

    fn limiter(memory_slot_bytes: Option<usize>) -> SandboxLimiter {
        SandboxLimiter::new(StoreBounds {
            max_memory_bytes: 8 * MIB,
            max_table_elements: 1000,
            memory_slot_bytes,
            core_instances: 8,
            memories: 2,
            tables: 4,
        })
    }

    #[test]
    fn memories_and_tables_share_one_budget() {
        let mut limiter = limiter(None);
        assert!(limiter.memory_growing(0, 4 * MIB, None).unwrap());
        assert!(limiter.memory_growing(0, 3 * MIB, None).unwrap());
        // 1 MiB left: 1000 elements (8000 bytes) fit, and then not one more page.
        assert!(limiter.table_growing(0, 1000, None).unwrap());
        assert!(!limiter.table_growing(1000, 1001, None).unwrap());
        assert!(!limiter.memory_limit_hit);
        assert!(!limiter.memory_growing(3 * MIB, 4 * MIB, None).unwrap());
        assert!(limiter.memory_limit_hit);
        assert_eq!(limiter.used_bytes(), 7 * MIB + 1000 * TABLE_ELEMENT_BYTES);
    }

    #[test]
    fn a_growth_the_os_refused_is_undone_and_an_index_range_failure_undoes_nothing() {
        let mut limiter = limiter(None);
        assert!(limiter.memory_growing(0, MIB, None).unwrap());
        assert!(limiter.memory_growing(MIB, 3 * MIB, None).unwrap());
        limiter
            .memory_grow_failed(wasmtime::format_err!(
                "Cannot allocate memory (os error 12)"
            ))
            .unwrap();
        assert_eq!(limiter.used_bytes(), MIB);
        assert!(limiter.memory_growing(MIB, 2 * MIB, None).unwrap());
        // Reported without a `memory_growing` first: the 2 MiB growth did happen.
        limiter
            .memory_grow_failed(wasmtime::format_err!("{INDEX_RANGE_FAILURE}"))
            .unwrap();
        assert_eq!(limiter.used_bytes(), 2 * MIB);
    }

    #[test]
    fn growths_wasmtime_refuses_anyway_are_not_counted() {
        let mut limiter = limiter(Some(4 * MIB));
        // Over the memory's own maximum: refused, uncounted, not the host's limit.
        assert!(!limiter.memory_growing(0, 2 * MIB, Some(MIB)).unwrap());
        assert!(!limiter.table_growing(0, 10, Some(5)).unwrap());
        assert!(!limiter.memory_limit_hit);
        // Over the pool's slot: the host's limit, though within the budget.
        assert!(!limiter.memory_growing(0, 5 * MIB, None).unwrap());
        assert!(limiter.memory_limit_hit);
        assert_eq!(limiter.used_bytes(), 0);
    }

    fn draws(seed: &[u8; 32]) -> (Vec<u8>, Vec<u8>, (u64, u64)) {
        let mut builder = WasiCtxBuilder::new();
        deterministic_random(&mut builder, seed);
        let mut wasi = builder.build();
        let random = wasi.random();
        (
            random::Host::get_random_bytes(random, 32).unwrap(),
            insecure::Host::get_insecure_random_bytes(random, 32).unwrap(),
            insecure_seed::Host::insecure_seed(random).unwrap(),
        )
    }

    #[test]
    fn each_random_interface_is_a_stream_of_the_seed() {
        let (secure, insecure, seed) = draws(&[1; 32]);
        assert_eq!(draws(&[1; 32]), (secure.clone(), insecure.clone(), seed));
        assert_ne!(
            secure, insecure,
            "the interfaces draw from streams of their own"
        );
        let (other_secure, other_insecure, other_seed) = draws(&[2; 32]);
        assert_ne!(other_secure, secure);
        assert_ne!(other_insecure, insecure);
        assert_ne!(other_seed, seed);
    }

    #[test]
    fn a_random_request_over_the_cap_fails() {
        let mut builder = WasiCtxBuilder::new();
        deterministic_random(&mut builder, &[0; 32]);
        let mut wasi = builder.build();
        assert!(random::Host::get_random_bytes(wasi.random(), MAX_RANDOM_BYTES + 1).is_err());
    }
}
