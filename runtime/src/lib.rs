//! The wasm runtime: two compiler tiers, a compile cache, and sandboxed calls into plugins.
//!
//! This crate knows nothing of Kubernetes (it has no dependency that does): it turns
//! component bytes into a [`CompiledPlugin`] and runs each call in a fresh, capability-less
//! [`Store`] with a CPU deadline (epoch interruption), a memory cap (resource limiter), a cap
//! on captured stdout/stderr and a cap on the response size.
//!
//! Plugins normally run code compiled by Cranelift ([`Tier::Optimized`], cached on disk).
//! Compiling a 1.5 MB component that way takes seconds, so a hot reload of content the cache
//! has never seen first runs it compiled by Winch ([`Tier::Baseline`], ~10x faster to
//! compile, slower to run) while Cranelift compiles it off to the side: see
//! [`Runtime::load_quick`] and [`Runtime::optimize`].
//!
//! # Guarantees
//! - No state survives a call: every call instantiates from the `InstancePre` made at load.
//! - A call never uses more CPU than its deadline plus one epoch tick, and never runs longer
//!   than [`WALL_CLOCK_ALLOWANCE`] times its deadline however little CPU the host gave it
//!   (a busy host's slow calls are not counted against the plugin).
//! - The same input gives the same output, by construction: a call sees frozen clocks, no
//!   files, environment or network, and its WASI randomness (`wasi:random/random`,
//!   `insecure` and `insecure-seed`) is a ChaCha20 stream keyed from a SHA-256 of the
//!   request (parent and observed JSON; a fixed seed for `info`). A plugin that reads
//!   "random" numbers (a hash map's seed, a generated name) still answers a repeated request
//!   with the same bytes, so an unchanged status is not rewritten on every pass.
//! - One budget, [`Limits::max_memory_bytes`], bounds the sum of all linear memories and
//!   tables of a call (tables count [`TABLE_ELEMENT_BYTES`] per element), however many the
//!   component declares; [`Limits::max_table_elements`] bounds the elements of all its
//!   tables. A component also gets at most [`MAX_CORE_INSTANCES_PER_COMPONENT`] core
//!   instances, [`MAX_MEMORIES_PER_COMPONENT`] memories and [`MAX_TABLES_PER_COMPONENT`]
//!   tables per call. Both tiers enforce all of these (and the deadline, the response and
//!   output caps) the same way: through each call's resource limiter, not the allocator.
//! - Plugins cannot starve each other of instances: every loaded plugin reserves a share of
//!   the pool's [`RuntimeConfig::max_instances`] slots, one per call it may run at once
//!   ([`CompiledPlugin::set_max_concurrent_calls`]); a plugin whose share does not fit in
//!   what is left is refused at load. A call waits for a slot of its own plugin's share,
//!   so a busy plugin queues its own calls and never takes another's. The pool's core
//!   instances, memories and tables are sized slots x the per-component maxima above, so
//!   no component exhausts them either.
//! - A plugin whose call hit its CPU, memory or response limit has its calls demoted to
//!   `SCHED_IDLE` threads for [`DEMOTION_PERIOD`] (see [`CompiledPlugin::call_priority`]), so
//!   a plugin that keeps burning its limits only gets cores nothing else wants.
//!
//! # Caveats
//! - Calls are synchronous; async callers run them with [`spawn_call`] on a pool of threads
//!   of their own. A call waiting for a slot of its plugin's share blocks its thread.
//! - Baseline code runs with instances allocated on demand (no second pool, whose address
//!   space would double the Cranelift pool's; see `Runtime::new`): its calls instantiate
//!   more slowly, for the seconds until Cranelift is done, under the same limits.

mod bindings;
mod cache;
mod calls;
mod cpu;
pub mod files;
mod sandbox;
mod slots;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Strategy, Trap,
    UpdateDeadline,
};

pub use bindings::Contract;
pub use cache::{CacheOutcome, CompileCache};
pub use operator_host_contract::{
    AdmissionRequest, CallError, Capabilities, Child, DeletePolicy, FieldError, FieldErrorType,
    FieldValue, FinalizeResponse, GroupVersionKind, Limits, LogLevel, Operation, PluginInfo,
    Readiness, ReconcileError, ReconcileRequest, ReconcileResponse, RelatedObjects,
    RelatedResource, RelatedSelector, SecretView, UpdateStrategy, Validation, random_seed,
};

pub use calls::{CallPriority, spawn_call};
pub use cpu::{WALL_CLOCK_ALLOWANCE, thread_cpu_time};

/// What one sandboxed call used: the CPU time of its thread, instantiation included, and the
/// bytes of memory and tables its instance held at the end, which is its peak (they only
/// grow).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallUsage {
    pub cpu: Duration,
    pub memory_bytes: usize,
}

thread_local! {
    static LAST_CALL_USAGE: std::cell::Cell<Option<CallUsage>> = const { std::cell::Cell::new(None) };
}

/// What the last sandboxed call made on this thread used, if one was made since the last
/// take: a call runs on its caller's thread, so the caller reads its own call's usage right
/// after it, whatever the call returned, without threading it through every call's result.
pub fn take_last_call_usage() -> Option<CallUsage> {
    LAST_CALL_USAGE.with(std::cell::Cell::take)
}
pub use sandbox::{MAX_RANDOM_BYTES, TABLE_ELEMENT_BYTES};

use bindings::{v0_1, v0_2, v0_3};
use cpu::{CpuDeadline, Verdict};
use sandbox::{SandboxState, StoreBounds};
use slots::{CallSlots, Shortfall, SlotLedger};

/// What can go wrong turning a file into a callable plugin.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot configure the wasm engine: {0:#}")]
    ConfigureEngine(wasmtime::Error),
    #[error("cannot read plugin {}: {source}", path.display())]
    ReadPlugin {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a WebAssembly file (expected the bytes `\\0asm` at the start)", path.display())]
    NotWasm { path: PathBuf },
    #[error(
        "{} is a core WebAssembly module, not a component: build the plugin for the \
         wasm32-wasip2 target (cargo build --target wasm32-wasip2)",
        path.display()
    )]
    CoreModule { path: PathBuf },
    #[error("cannot compile plugin {}: {source:#}", path.display())]
    Compile {
        path: PathBuf,
        source: wasmtime::Error,
    },
    #[error(
        "plugin {} does not implement a contract this host serves ({}): {detail}",
        path.display(),
        served_contracts()
    )]
    WrongContract { path: PathBuf, detail: String },
    #[error(
        "plugin {} asks for {asked} instance slots (one per concurrent call), but only {left} \
         of the runtime's {total} are not reserved by other plugins: lower its \
         maxConcurrentCalls or raise the runtime's max_instances",
        path.display()
    )]
    ReserveInstanceSlots {
        path: PathBuf,
        asked: usize,
        left: usize,
        total: usize,
    },
    #[error("plugin {} must be allowed at least 1 concurrent call, not 0", path.display())]
    NoConcurrentCalls { path: PathBuf },
}

impl Error {
    fn slots(path: &Path, asked: usize, shortfall: Shortfall) -> Self {
        Error::ReserveInstanceSlots {
            path: path.to_path_buf(),
            asked,
            left: shortfall.left,
            total: shortfall.total,
        }
    }
}

/// How long a plugin's calls stay demoted after one of them hit a resource limit.
pub const DEMOTION_PERIOD: Duration = Duration::from_secs(10 * 60);

/// Most core module instances one instantiation of a plugin may create. A Rust
/// `wasm32-wasip2` plugin has 3 (its module, and the shim and fixup modules wit-component
/// adds); a componentize-py plugin has 14 (libc, libpython and the other shared libraries it
/// links dynamically, each a core instance). A core instance slot is bookkeeping, not memory:
/// memories and tables have bounds of their own. The pooling allocator refuses a component
/// over this at load.
pub const MAX_CORE_INSTANCES_PER_COMPONENT: u32 = 20;
/// Most linear memories one instantiation of a plugin may create (a Rust plugin has 1);
/// their sum is bounded by [`Limits::max_memory_bytes`] all the same.
pub const MAX_MEMORIES_PER_COMPONENT: u32 = 2;
/// Most tables one instantiation of a plugin may create (a Rust plugin has 2).
pub const MAX_TABLES_PER_COMPONENT: u32 = 4;

/// The default number of calls a plugin may run at once: two per core, so a plugin can use
/// every core while its other calls wait on the API server.
pub fn default_max_concurrent_calls() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()) * 2
}

/// The instance pool's memory kept for instances not running ([`Runtime::pool_usage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolUsage {
    /// Linear memory slots used before and free now.
    pub unused_warm_memories: u32,
    /// Bytes still resident in them.
    pub unused_memory_bytes_resident: usize,
}

/// How the runtime is set up.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Default limits of each call.
    pub limits: Limits,
    /// Where compiled artifacts are cached; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Most guest instances alive at once (pooling allocator slots), divided between the
    /// loaded plugins: each reserves one per call it may run at once.
    pub max_instances: u32,
    /// Calls a plugin may run at once unless [`CompiledPlugin::set_max_concurrent_calls`]
    /// says otherwise: the share of `max_instances` it reserves at load.
    pub max_concurrent_calls: usize,
    /// Granularity of CPU deadlines.
    pub epoch_tick: Duration,
    /// Instance slots kept warm (memory resident) for plugins that are not running now. Every
    /// load of a plugin, a hot swap's new version included, is a new module to the pool: with
    /// warm slots to spare, its instances take cold slots and the replaced version's stay
    /// resident, so memory grows with every swap ([`DEFAULT_UNUSED_WARM_SLOTS`]).
    pub unused_warm_slots: u32,
}

/// The default of [`RuntimeConfig::unused_warm_slots`]: none. A plugin with no free slot of
/// its own takes the least recently used one (another plugin's, or a replaced version's)
/// before a slot never used, so the slots ever touched are as many as instances ever ran at
/// once, whatever the number of swaps. It costs a call that takes over another plugin's slot
/// the mapping of its own memory image (about what the on-demand allocator costs every call);
/// wasmtime's default (100) keeps up to 100 slots of up to
/// `linear_memory_keep_resident` each.
pub const DEFAULT_UNUSED_WARM_SLOTS: u32 = 0;

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            limits: Limits::default(),
            cache_dir: CompileCache::default_dir(),
            max_instances: 256,
            max_concurrent_calls: default_max_concurrent_calls(),
            epoch_tick: Duration::from_millis(5),
            unused_warm_slots: DEFAULT_UNUSED_WARM_SLOTS,
        }
    }
}

/// Which compiler produced a plugin's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Winch: compiles in a fraction of the time, runs slower; used until Cranelift is done.
    Baseline,
    /// Cranelift: the code plugins run in the steady state.
    Optimized,
}

/// An engine with the linker of the host's imports for it.
struct Compiler {
    engine: Engine,
    linker: Linker<SandboxState>,
}

/// The process-wide wasm runtime. Cheap to share behind an `Arc`.
pub struct Runtime {
    optimized: Compiler,
    baseline: Compiler,
    cache: CompileCache,
    limits: Limits,
    /// Largest single linear memory a pool slot of the optimized tier holds.
    memory_slot_bytes: usize,
    slots: Arc<SlotLedger>,
    max_concurrent_calls: usize,
    epoch_tick: Duration,
    ticker_stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("limits", &self.limits)
            .field("free_instance_slots", &self.slots.left())
            .finish()
    }
}

impl Runtime {
    /// Creates the engine, the linker (WASI without capabilities + `host-log`) and starts
    /// the epoch ticker that enforces CPU deadlines.
    pub fn new(config: RuntimeConfig) -> Result<Arc<Self>, Error> {
        let slots = config.max_instances;
        let mut pool = PoolingAllocationConfig::new();
        // Each slot holds the most one instantiation may create, so calls that hold at most
        // `slots` instances (see `SlotLedger`) never run out of core instances, memories or
        // tables, whatever the components.
        pool.total_component_instances(slots)
            .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_COMPONENT)
            .max_memories_per_component(MAX_MEMORIES_PER_COMPONENT)
            .max_tables_per_component(MAX_TABLES_PER_COMPONENT)
            .max_memories_per_module(MAX_MEMORIES_PER_COMPONENT)
            .max_tables_per_module(MAX_TABLES_PER_COMPONENT)
            .total_core_instances(slots.saturating_mul(MAX_CORE_INSTANCES_PER_COMPONENT))
            .total_memories(slots.saturating_mul(MAX_MEMORIES_PER_COMPONENT))
            .total_tables(slots.saturating_mul(MAX_TABLES_PER_COMPONENT))
            .max_memory_size(config.limits.max_memory_bytes)
            .table_elements(config.limits.max_table_elements)
            // Keeping memory resident, and resetting only the pages a call dirtied (pagemap
            // scan, Linux 6.7+; `Auto` falls back elsewhere), halves instantiation and
            // first-touch costs: fresh calls went from ~3.3x to ~2.5x native in a measurement.
            .linear_memory_keep_resident(16 << 20)
            .table_keep_resident(64 << 10)
            .pagemap_scan(wasmtime::Enabled::Auto)
            .max_unused_warm_slots(config.unused_warm_slots);
        let optimized = Compiler::new(
            Strategy::Cranelift,
            InstanceAllocationStrategy::Pooling(pool),
        )?;
        // Baseline code only runs for the seconds until Cranelift is done: it does not get a
        // second pool (another ~4 GiB of address space per memory slot). Its limits do not
        // depend on one: each call's limiter and the plugin's slot share enforce them.
        let baseline = Compiler::new(Strategy::Winch, InstanceAllocationStrategy::OnDemand)?;

        let ticker_stop = Arc::new(AtomicBool::new(false));
        spawn_epoch_ticker(
            [optimized.engine.clone(), baseline.engine.clone()],
            config.epoch_tick,
            ticker_stop.clone(),
        );
        Ok(Arc::new(Runtime {
            optimized,
            baseline,
            cache: CompileCache::new(config.cache_dir),
            memory_slot_bytes: config.limits.max_memory_bytes,
            limits: config.limits,
            slots: SlotLedger::new(slots as usize),
            max_concurrent_calls: config.max_concurrent_calls,
            epoch_tick: config.epoch_tick,
            ticker_stop,
        }))
    }

    /// Instance slots no loaded plugin has reserved.
    pub fn free_instance_slots(&self) -> usize {
        self.slots.left()
    }

    /// Moves the deadline clock on by `ticks` epoch ticks at once, as if that much wall-clock
    /// time had passed with the calls running now getting no CPU: for tests of what a
    /// deadline counts.
    #[doc(hidden)]
    pub fn advance_epochs(&self, ticks: u64) {
        for _ in 0..ticks {
            self.optimized.engine.increment_epoch();
            self.baseline.engine.increment_epoch();
        }
    }

    /// What the instance pool keeps in memory for instances that are not running: the
    /// resident memory a replaced plugin version can leave behind.
    pub fn pool_usage(&self) -> PoolUsage {
        let metrics = self.optimized.engine.pooling_allocator_metrics();
        PoolUsage {
            unused_warm_memories: metrics.as_ref().map_or(0, |m| m.unused_warm_memories()),
            unused_memory_bytes_resident: metrics
                .as_ref()
                .map_or(0, |m| m.unused_memory_bytes_resident()),
        }
    }

    /// Reserves the default share of instance slots for a plugin being loaded from `path`.
    fn reserve_slots(&self, path: &Path) -> Result<Arc<CallSlots>, Error> {
        let asked = self.max_concurrent_calls;
        if asked == 0 {
            return Err(Error::NoConcurrentCalls {
                path: path.to_path_buf(),
            });
        }
        self.slots
            .reserve(asked)
            .map(Arc::new)
            .map_err(|shortfall| Error::slots(path, asked, shortfall))
    }

    /// Calls a plugin may run at once unless its policy says otherwise.
    pub fn default_max_concurrent_calls(&self) -> usize {
        self.max_concurrent_calls
    }

    /// The default limits of each call.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Reads, compiles with Cranelift (or loads from the cache) and type-checks the plugin
    /// at `path`, and reserves its share of instance slots
    /// ([`RuntimeConfig::max_concurrent_calls`]; [`Error::ReserveInstanceSlots`] if fewer
    /// are left). Every load is a plugin of its own with a share of its own, until dropped.
    pub fn load(self: &Arc<Self>, path: &Path) -> Result<CompiledPlugin, Error> {
        let bytes = read_plugin(path)?;
        self.load_bytes(path, &bytes)
    }

    /// Like [`Runtime::load`] for bytes already read; `path` names them in messages.
    pub fn load_bytes(
        self: &Arc<Self>,
        path: &Path,
        bytes: &[u8],
    ) -> Result<CompiledPlugin, Error> {
        let content_hash = checked_content_hash(path, bytes)?;
        let slots = self.reserve_slots(path)?;
        let (component, cache) =
            self.cache
                .load_or_compile(&self.optimized.engine, path, bytes, &content_hash)?;
        self.finish_load(
            Tier::Optimized,
            path,
            component,
            content_hash,
            bytes.len(),
            cache,
            slots,
        )
    }

    /// The quickest way to a callable plugin: the cached Cranelift artifact if there is
    /// one, otherwise a Winch compile ([`Tier::Baseline`]), to be replaced by
    /// [`Runtime::optimize`]. A new version of a plugin (`replacing` the one it serves now)
    /// shares that one's instance slots rather than reserving its own: while both run calls
    /// (a swap, a canary) the plugin uses no more instances, so no more memory, than one
    /// version does, and a swap cannot fail for want of free slots.
    pub fn load_quick(
        self: &Arc<Self>,
        path: &Path,
        bytes: &[u8],
        replacing: Option<&CompiledPlugin>,
    ) -> Result<CompiledPlugin, Error> {
        let content_hash = checked_content_hash(path, bytes)?;
        let slots = match replacing {
            Some(replaced) => replaced.slots.clone(),
            None => self.reserve_slots(path)?,
        };
        let (tier, component, cache) =
            match self.cache.lookup(&self.optimized.engine, &content_hash) {
                Some(component) => (Tier::Optimized, component, CacheOutcome::Hit),
                None => {
                    let component =
                        Component::new(&self.baseline.engine, bytes).map_err(|source| {
                            Error::Compile {
                                path: path.to_path_buf(),
                                source,
                            }
                        })?;
                    (Tier::Baseline, component, CacheOutcome::Miss)
                }
            };
        let mut plugin = self.finish_load(
            tier,
            path,
            component,
            content_hash,
            bytes.len(),
            cache,
            slots,
        )?;
        if tier == Tier::Baseline {
            plugin.tier_up_source = Some(Arc::from(bytes));
        }
        Ok(plugin)
    }

    /// The Cranelift build of a [`Tier::Baseline`] plugin (stored in the compile cache);
    /// an optimized plugin is returned as it is. Both builds share one instance slot share
    /// (no new reservation) and one record of limit hits.
    pub fn optimize(
        self: &Arc<Self>,
        plugin: &CompiledPlugin,
        path: &Path,
    ) -> Result<CompiledPlugin, Error> {
        let Some(bytes) = &plugin.tier_up_source else {
            return Ok(plugin.clone());
        };
        let component =
            self.cache
                .compile(&self.optimized.engine, path, bytes, &plugin.content_hash)?;
        Ok(self
            .finish_load(
                Tier::Optimized,
                path,
                component,
                plugin.content_hash.clone(),
                bytes.len(),
                CacheOutcome::Miss,
                plugin.slots.clone(),
            )?
            .with_limits(plugin.limits.clone())
            .with_limit_record_of(plugin))
    }

    /// Type-checks `component` against the contract.
    #[allow(clippy::too_many_arguments)]
    fn finish_load(
        self: &Arc<Self>,
        tier: Tier,
        path: &Path,
        component: Component,
        content_hash: String,
        size: usize,
        cache: CacheOutcome,
        slots: Arc<CallSlots>,
    ) -> Result<CompiledPlugin, Error> {
        let compiler = match tier {
            Tier::Baseline => &self.baseline,
            Tier::Optimized => &self.optimized,
        };
        let pre =
            compiler
                .linker
                .instantiate_pre(&component)
                .map_err(|e| Error::WrongContract {
                    path: path.to_path_buf(),
                    detail: format!("it imports something the host does not provide: {e:#}"),
                })?;
        let pre = PluginPre::new(&compiler.engine, &component, pre).map_err(|detail| {
            Error::WrongContract {
                path: path.to_path_buf(),
                detail,
            }
        })?;
        Ok(CompiledPlugin {
            runtime: self.clone(),
            pre,
            tier,
            tier_up_source: None,
            content_hash,
            size,
            cache,
            limits: self.limits.clone(),
            last_limit_hit: Arc::default(),
            path: Arc::from(path),
            slots,
            _release: Arc::new(ReleaseOnDrop),
        })
    }
}

/// Sets the C allocator up so that [`release_free_memory`] can give back what a swap leaves
/// free. glibc raises its thresholds on its own when a large block is freed: once the bytes of
/// a 4 MB component are freed, blocks below 4 MB come from the thread arenas and each arena
/// keeps a free top of up to 8 MB, which `malloc_trim` does not return for any arena but the
/// main one. Measured on the Go plugin (4.4 MB): 20 swaps left two arenas holding 9 MiB free
/// each, 1.5x the memory of a fresh host. Fixed values stop the adjustment: blocks of 256 KiB
/// or more are mapped on their own and unmapped when freed, and an arena's free top above
/// 256 KiB is returned when the block below it is freed. Two arenas (glibc's default is 8
/// per core) bound what the threads that come and go over a day keep in arenas of their own:
/// after 20 swaps of the Rust plugin, 2 MiB more than a fresh host instead of 5.
/// Call it once, at the start of the process, before its threads allocate.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt only sets the allocator's parameters, each to a value in its range.
    unsafe {
        const THRESHOLD: libc::c_int = 256 << 10;
        libc::mallopt(libc::M_MMAP_THRESHOLD, THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, THRESHOLD);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Gives the C allocator's free memory back to the system. Loading a plugin allocates and
/// frees a great deal (the component's bytes, the compiler's state on each of its threads),
/// and glibc keeps what each thread's arena freed: without this, a host that swaps plugins
/// holds that memory as if the replaced versions were still loaded. Call it once a load or a
/// swap is done; it costs a walk of the arenas (well under a millisecond here).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim only returns whole free pages of the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

impl Compiler {
    /// An engine with the host's settings and `strategy`, and the linker of WASI without
    /// capabilities plus `host-log`.
    fn new(strategy: Strategy, allocation: InstanceAllocationStrategy) -> Result<Self, Error> {
        let mut wasm = Config::new();
        wasm.wasm_component_model(true)
            .epoch_interruption(true)
            .max_wasm_stack(512 << 10)
            .strategy(strategy)
            .allocation_strategy(allocation);
        if matches!(strategy, Strategy::Winch) {
            // Baseline code serves only until Cranelift's is ready, and its compile time is
            // the reload latency on a cache miss: skip the wasm backtraces and address maps
            // (about a third of Winch's time). Traps are still classified and reported; only
            // their wasm stack trace is missing for those seconds.
            wasm.wasm_backtrace_max_frames(None)
                .generate_address_map(false);
        }
        let engine = Engine::new(&wasm).map_err(Error::ConfigureEngine)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(Error::ConfigureEngine)?;
        // Each contract imports its own `host-log`; all are served by the same sandbox.
        v0_1::host_log::add_to_linker::<SandboxState, wasmtime::component::HasSelf<SandboxState>>(
            &mut linker,
            |state| state,
        )
        .map_err(Error::ConfigureEngine)?;
        v0_2::host_log::add_to_linker::<SandboxState, wasmtime::component::HasSelf<SandboxState>>(
            &mut linker,
            |state| state,
        )
        .map_err(Error::ConfigureEngine)?;
        v0_3::host_log::add_to_linker::<SandboxState, wasmtime::component::HasSelf<SandboxState>>(
            &mut linker,
            |state| state,
        )
        .map_err(Error::ConfigureEngine)?;
        Ok(Compiler { engine, linker })
    }
}

/// Epoch ticks of `tick` each until `limit` has passed, rounded up.
fn deadline_ticks(limit: Duration, tick: Duration) -> u64 {
    (limit.as_nanos() / tick.as_nanos().max(1)) as u64 + 1
}

fn read_plugin(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::ReadPlugin {
        path: path.to_path_buf(),
        source,
    })
}

fn spawn_epoch_ticker<const N: usize>(engines: [Engine; N], tick: Duration, stop: Arc<AtomicBool>) {
    std::thread::Builder::new()
        .name("wasm-epoch-ticker".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(tick);
                for engine in &engines {
                    engine.increment_epoch();
                }
            }
        })
        .expect("spawning the epoch ticker thread");
}

/// Checks the header (see [`check_component_header`]) and returns the hex SHA-256 of `bytes`.
fn checked_content_hash(path: &Path, bytes: &[u8]) -> Result<String, Error> {
    check_component_header(path, bytes)?;
    Ok(hex::encode(Sha256::digest(bytes)))
}

/// Tells a core module, a component and anything else apart before compiling.
fn check_component_header(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(Error::NotWasm {
            path: path.to_path_buf(),
        });
    }
    // After the magic: a u16 version and a u16 layer; layer 0 is a core module, 1 a component.
    if bytes[6..8] == [0, 0] {
        return Err(Error::CoreModule {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// The contracts the host serves, for messages: `operator-host:reconciler@0.2.0, ...@0.1.0`.
fn served_contracts() -> String {
    Contract::SERVED
        .iter()
        .map(|c| c.package())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A component's pre-instance, typed by the contract it exports.
#[derive(Clone)]
enum PluginPre {
    V0_1(v0_1::ReconcilerPre<SandboxState>),
    V0_2(v0_2::ReconcilerPre<SandboxState>),
    V0_3(v0_3::ReconcilerPre<SandboxState>),
}

/// One instance's `plugin` export, of the contract its component exports.
enum Guest<'a> {
    V0_1(&'a v0_1::guest::Guest),
    V0_2(&'a v0_2::guest::Guest),
    V0_3(&'a v0_3::guest::Guest),
}

impl PluginPre {
    /// Types `pre` by the contract the component exports; the error explains what it exports
    /// instead (another contract, another version, or a bad signature).
    fn new(
        engine: &Engine,
        component: &Component,
        pre: wasmtime::component::InstancePre<SandboxState>,
    ) -> Result<Self, String> {
        let exports: Vec<String> = component
            .component_type()
            .exports(engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let exported =
            |contract: Contract| exports.iter().any(|e| e == contract.plugin_interface());
        if exported(Contract::V0_3) {
            return v0_3::ReconcilerPre::new(pre)
                .map(PluginPre::V0_3)
                .map_err(|e| mismatch(Contract::V0_3, e));
        }
        if exported(Contract::V0_2) {
            return v0_2::ReconcilerPre::new(pre)
                .map(PluginPre::V0_2)
                .map_err(|e| mismatch(Contract::V0_2, e));
        }
        if exported(Contract::V0_1) {
            return v0_1::ReconcilerPre::new(pre)
                .map(PluginPre::V0_1)
                .map_err(|e| mismatch(Contract::V0_1, e));
        }
        let interface = Contract::NEWEST.plugin_interface();
        let unversioned = interface.split('@').next().unwrap_or(interface);
        Err(match exports.iter().find(|e| e.starts_with(unversioned)) {
            Some(other) => format!(
                "it exports `{other}`, a version this host does not know (it serves {})",
                served_interfaces()
            ),
            None if exports.is_empty() => format!(
                "it exports nothing, where a plugin exports one of {}: a Rust plugin exports the \
                 contract with `operator_host_sdk::export_reconciler!` (without it the crate \
                 still builds), the other languages' SDKs in their build",
                served_interfaces()
            ),
            None => format!(
                "it exports none of {} (its exports: {})",
                served_interfaces(),
                exports.join(", ")
            ),
        })
    }

    fn contract(&self) -> Contract {
        match self {
            PluginPre::V0_1(_) => Contract::V0_1,
            PluginPre::V0_2(_) => Contract::V0_2,
            PluginPre::V0_3(_) => Contract::V0_3,
        }
    }

    fn instance_pre(&self) -> &wasmtime::component::InstancePre<SandboxState> {
        match self {
            PluginPre::V0_1(pre) => pre.instance_pre(),
            PluginPre::V0_2(pre) => pre.instance_pre(),
            PluginPre::V0_3(pre) => pre.instance_pre(),
        }
    }

    fn engine(&self) -> &Engine {
        self.instance_pre().engine()
    }

    /// A fresh instance in `store`, and `f` run against its `plugin` export.
    fn instantiate_and<R>(
        &self,
        store: &mut Store<SandboxState>,
        f: impl FnOnce(Guest<'_>, &mut Store<SandboxState>) -> wasmtime::Result<R>,
    ) -> Result<wasmtime::Result<R>, wasmtime::Error> {
        Ok(match self {
            PluginPre::V0_1(pre) => {
                let instance = pre.instantiate(&mut *store)?;
                f(
                    Guest::V0_1(instance.operator_host_reconciler_plugin()),
                    store,
                )
            }
            PluginPre::V0_2(pre) => {
                let instance = pre.instantiate(&mut *store)?;
                f(
                    Guest::V0_2(instance.operator_host_reconciler_plugin()),
                    store,
                )
            }
            PluginPre::V0_3(pre) => {
                let instance = pre.instantiate(&mut *store)?;
                f(
                    Guest::V0_3(instance.operator_host_reconciler_plugin()),
                    store,
                )
            }
        })
    }
}

/// The `plugin` interfaces of the contracts the host serves, for messages.
fn served_interfaces() -> String {
    Contract::SERVED
        .iter()
        .map(|c| format!("`{}`", c.plugin_interface()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A component that exports `contract`'s interface with other types than the contract's.
fn mismatch(contract: Contract, error: wasmtime::Error) -> String {
    format!(
        "its `{}` export does not match the contract: {error:#}",
        contract.plugin_interface()
    )
}

/// A plugin that compiled and matches the contract, ready for sandboxed calls.
#[derive(Clone)]
pub struct CompiledPlugin {
    runtime: Arc<Runtime>,
    pre: PluginPre,
    tier: Tier,
    /// The component's bytes, kept by a baseline build until it is optimized.
    tier_up_source: Option<Arc<[u8]>>,
    content_hash: String,
    size: usize,
    cache: CacheOutcome,
    limits: Limits,
    /// When a call of this plugin last hit its CPU, memory or response limit; shared by
    /// the tiers of one content.
    last_limit_hit: Arc<Mutex<Option<Instant>>>,
    /// Where the plugin was loaded from, to name it in errors.
    path: Arc<Path>,
    /// The instance slots reserved for this plugin's calls; shared by its clones and tiers.
    slots: Arc<CallSlots>,
    /// Last, so that it is dropped after the compiled code: when the last clone of this load
    /// goes (a replaced version, once no reconcile uses it), what it freed is given back.
    _release: Arc<ReleaseOnDrop>,
}

/// Gives the allocator's free memory back to the system when dropped
/// ([`release_free_memory`]).
#[derive(Debug)]
struct ReleaseOnDrop;

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        release_free_memory();
    }
}

impl std::fmt::Debug for CompiledPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledPlugin")
            .field("content_hash", &self.content_hash)
            .field("tier", &self.tier)
            .field("size", &self.size)
            .finish()
    }
}

impl CompiledPlugin {
    /// The names of the component's imports and exports (`wasi:io/poll@0.2.6`, ...), for
    /// the config of its OCI artifact.
    pub fn world(&self) -> (Vec<String>, Vec<String>) {
        let engine = match self.tier {
            Tier::Baseline => &self.runtime.baseline.engine,
            Tier::Optimized => &self.runtime.optimized.engine,
        };
        let component = self.pre.instance_pre().component().component_type();
        let names = |items: &mut dyn Iterator<Item = &str>| items.map(String::from).collect();
        (
            names(&mut component.imports(engine).map(|(name, _)| name)),
            names(&mut component.exports(engine).map(|(name, _)| name)),
        )
    }

    /// The contract the plugin implements.
    pub fn contract(&self) -> Contract {
        self.pre.contract()
    }

    /// Hex SHA-256 of the component's bytes.
    pub fn content_hash(&self) -> &str {
        &self.content_hash
    }

    /// Size of the component in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Which compiler produced the code that runs.
    pub fn tier(&self) -> Tier {
        self.tier
    }

    /// Whether loading hit the compile cache.
    pub fn cache_outcome(&self) -> CacheOutcome {
        self.cache
    }

    /// The limits of this plugin's calls.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The same plugin with other limits (per-plugin overrides).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Shares `other`'s record of limit hits (the same content, another tier).
    fn with_limit_record_of(mut self, other: &CompiledPlugin) -> Self {
        self.last_limit_hit = other.last_limit_hit.clone();
        self
    }

    /// How many calls of this plugin may run at once: the instance slots it reserves.
    pub fn max_concurrent_calls(&self) -> usize {
        self.slots.share()
    }

    /// Makes this plugin's share of the runtime's instance slots `calls`: at most that many
    /// of its calls hold an instance at once, the others wait for one of them.
    ///
    /// The share belongs to the loaded plugin, not to this handle: its clones and its other
    /// tier ([`Runtime::optimize`]) see the change too. It is refused, unchanged, when
    /// `calls` is 0 or more slots than the other plugins left; shrinking it returns the
    /// slots of running calls as they finish.
    pub fn set_max_concurrent_calls(&self, calls: usize) -> Result<(), Error> {
        if calls == 0 {
            return Err(Error::NoConcurrentCalls {
                path: self.path.to_path_buf(),
            });
        }
        self.slots
            .resize(calls)
            .map_err(|shortfall| Error::slots(&self.path, calls, shortfall))
    }

    /// Where this plugin's next call runs: demoted for [`DEMOTION_PERIOD`] after one of its
    /// calls hit a CPU, memory or response limit (an attack repeated by retries then only
    /// gets idle cores), at the host's priority otherwise.
    pub fn call_priority(&self) -> CallPriority {
        let last_hit = *self
            .last_limit_hit
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match last_hit {
            Some(at) if at.elapsed() < DEMOTION_PERIOD => CallPriority::Demoted,
            _ => CallPriority::Normal,
        }
    }

    /// Remembers `error` if it is a resource limit being hit; passes the result through.
    fn note_limit_hit<T>(
        &self,
        context: &str,
        result: Result<T, CallError>,
    ) -> Result<T, CallError> {
        if let Err(error) = &result
            && error.is_resource_limit()
        {
            let mut last_hit = self
                .last_limit_hit
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if last_hit.is_none_or(|at| at.elapsed() >= DEMOTION_PERIOD) {
                tracing::warn!(
                    plugin = %self.path.display(),
                    call = context,
                    %error,
                    period = ?DEMOTION_PERIOD,
                    "plugin hit a resource limit: its calls run at idle priority for the period"
                );
            }
            *last_hit = Some(Instant::now());
        }
        result
    }

    /// Calls `info` with the short `info` deadline.
    pub fn info(&self) -> Result<PluginInfo, CallError> {
        let seed = random_seed("info", []);
        let info: PluginInfo =
            self.call("info", self.limits.info_timeout, &seed, |plugin, store| {
                Ok(match plugin {
                    Guest::V0_1(plugin) => plugin.call_info(store)?.into(),
                    Guest::V0_2(plugin) => plugin.call_info(store)?.into(),
                    Guest::V0_3(plugin) => plugin.call_info(store)?.into(),
                })
            })?;
        let related = info.related.iter().map(|r| {
            r.name.len()
                + match &r.selector {
                    RelatedSelector::NameFromPath(text) | RelatedSelector::LabelSelector(text) => {
                        text.len()
                    }
                }
        });
        let size = info.crd.len() + info.name.len() + info.version.len() + related.sum::<usize>();
        self.check_response_size("info", size)?;
        Ok(info)
    }

    /// Calls `reconcile`, its randomness seeded from the whole request; `context` names the
    /// parent in the plugin's log lines.
    pub fn reconcile(
        &self,
        request: &ReconcileRequest,
        context: &str,
    ) -> Result<Result<ReconcileResponse, ReconcileError>, CallError> {
        let seed = random_seed("reconcile", request_parts(request));
        self.reconcile_seeded(request, &seed, context)
    }

    /// Calls `reconcile` with its randomness seeded by `seed` (see [`random_seed`]): for a
    /// caller that knows which parts of the request carry meaning.
    pub fn reconcile_seeded(
        &self,
        request: &ReconcileRequest,
        seed: &[u8; 32],
        context: &str,
    ) -> Result<Result<ReconcileResponse, ReconcileError>, CallError> {
        let result: Result<ReconcileResponse, ReconcileError> =
            self.call(context, self.limits.call_timeout, seed, |plugin, store| {
                Ok(match plugin {
                    Guest::V0_1(plugin) => plugin
                        .call_reconcile(store, &bindings::request_v0_1(request))?
                        .map(Into::into)
                        .map_err(Into::into),
                    Guest::V0_2(plugin) => plugin
                        .call_reconcile(store, &bindings::request_v0_2(request))?
                        .map(Into::into)
                        .map_err(Into::into),
                    Guest::V0_3(plugin) => plugin
                        .call_reconcile(store, &bindings::request_v0_3(request))?
                        .map(Into::into)
                        .map_err(Into::into),
                })
            })?;
        if let Ok(response) = &result {
            let size = response.status.len()
                + response
                    .children
                    .iter()
                    .map(|child| child.object.len())
                    .sum::<usize>();
            self.check_response_size(context, size)?;
        }
        Ok(result)
    }

    /// Calls `finalize`, its randomness seeded from the whole request; `context` names the
    /// parent in the plugin's log lines.
    pub fn finalize(
        &self,
        request: &ReconcileRequest,
        context: &str,
    ) -> Result<Result<FinalizeResponse, ReconcileError>, CallError> {
        let seed = random_seed("finalize", request_parts(request));
        self.finalize_seeded(request, &seed, context)
    }

    /// Calls `finalize` with its randomness seeded by `seed` (see [`random_seed`]).
    pub fn finalize_seeded(
        &self,
        request: &ReconcileRequest,
        seed: &[u8; 32],
        context: &str,
    ) -> Result<Result<FinalizeResponse, ReconcileError>, CallError> {
        self.call(context, self.limits.call_timeout, seed, |plugin, store| {
            Ok(match plugin {
                Guest::V0_1(plugin) => plugin
                    .call_finalize(store, &bindings::request_v0_1(request))?
                    .map(Into::into)
                    .map_err(Into::into),
                Guest::V0_2(plugin) => plugin
                    .call_finalize(store, &bindings::request_v0_2(request))?
                    .map(Into::into)
                    .map_err(Into::into),
                Guest::V0_3(plugin) => plugin
                    .call_finalize(store, &bindings::request_v0_3(request))?
                    .map(Into::into)
                    .map_err(Into::into),
            })
        })
    }

    /// The error of a 0.3.0 function called on a plugin of an older contract (the host calls
    /// them only for what `info` says the plugin implements, which older plugins cannot say).
    fn not_in_contract(&self, function: &'static str) -> CallError {
        CallError::NotInContract {
            function,
            contract: self.contract().package(),
        }
    }

    /// Calls `validate` (admission) under the call deadline; `context` names the parent.
    pub fn validate(
        &self,
        request: &AdmissionRequest,
        context: &str,
    ) -> Result<Validation, CallError> {
        if self.contract() < Contract::V0_3 {
            return Err(self.not_in_contract("validate"));
        }
        let parts = [request.object.as_deref(), request.old_object.as_deref()];
        let seed = random_seed("validate", parts.into_iter().flatten());
        let validation: Validation =
            self.call(context, self.limits.call_timeout, &seed, |plugin, store| {
                Ok(match plugin {
                    Guest::V0_3(plugin) => plugin
                        .call_validate(store, &bindings::admission_request_v0_3(request))?
                        .into(),
                    Guest::V0_1(_) | Guest::V0_2(_) => unreachable!("checked above"),
                })
            })?;
        let size = validation
            .errors
            .iter()
            .map(|e| e.field.len() + e.detail.len() + e.value.as_ref().map_or(0, String::len))
            .chain(validation.warnings.iter().map(String::len))
            .sum();
        self.check_response_size(context, size)?;
        Ok(validation)
    }

    /// Calls `default` (admission): the object with its defaults, or the plugin's refusal.
    pub fn default_object(
        &self,
        object: &str,
        context: &str,
    ) -> Result<Result<String, String>, CallError> {
        if self.contract() < Contract::V0_3 {
            return Err(self.not_in_contract("default"));
        }
        let seed = random_seed("default", [object]);
        let result: Result<String, String> =
            self.call(context, self.limits.call_timeout, &seed, |plugin, store| {
                Ok(match plugin {
                    Guest::V0_3(plugin) => plugin.call_default(store, object)?,
                    Guest::V0_1(_) | Guest::V0_2(_) => unreachable!("checked above"),
                })
            })?;
        let size = match &result {
            Ok(text) | Err(text) => text.len(),
        };
        self.check_response_size(context, size)?;
        Ok(result)
    }

    /// Calls `convert`: the object in `to_version`, or the plugin's refusal.
    pub fn convert(
        &self,
        object: &str,
        to_version: &str,
        context: &str,
    ) -> Result<Result<String, String>, CallError> {
        if self.contract() < Contract::V0_3 {
            return Err(self.not_in_contract("convert"));
        }
        let seed = random_seed("convert", [object, to_version]);
        let result: Result<String, String> =
            self.call(context, self.limits.call_timeout, &seed, |plugin, store| {
                Ok(match plugin {
                    Guest::V0_3(plugin) => plugin.call_convert(store, object, to_version)?,
                    Guest::V0_1(_) | Guest::V0_2(_) => unreachable!("checked above"),
                })
            })?;
        let size = match &result {
            Ok(text) | Err(text) => text.len(),
        };
        self.check_response_size(context, size)?;
        Ok(result)
    }

    /// Bytes a guest may hand the host in one call: the response limit plus room for the
    /// lists' and records' own fuel, so that any response within the limit gets through.
    fn hostcall_fuel(&self) -> usize {
        self.limits
            .max_response_bytes
            .saturating_add(self.limits.max_response_bytes / 4)
            .saturating_add(1 << 20)
    }

    fn check_response_size(&self, context: &str, size: usize) -> Result<(), CallError> {
        if size > self.limits.max_response_bytes {
            return self.note_limit_hit(
                context,
                Err(CallError::ResponseTooLarge {
                    size,
                    limit: self.limits.max_response_bytes,
                }),
            );
        }
        Ok(())
    }

    /// What one call of this plugin may create.
    fn store_bounds(&self) -> StoreBounds {
        StoreBounds {
            max_memory_bytes: self.limits.max_memory_bytes,
            max_table_elements: self.limits.max_table_elements,
            memory_slot_bytes: match self.tier {
                Tier::Optimized => Some(self.runtime.memory_slot_bytes),
                Tier::Baseline => None,
            },
            core_instances: MAX_CORE_INSTANCES_PER_COMPONENT as usize,
            memories: MAX_MEMORIES_PER_COMPONENT as usize,
            tables: MAX_TABLES_PER_COMPONENT as usize,
        }
    }

    /// Runs `f` against a fresh instance in a fresh store, once one of the plugin's
    /// instance slots is free, and maps failures to [`CallError`].
    fn call<R>(
        &self,
        context: &str,
        deadline: Duration,
        random_seed: &[u8; 32],
        f: impl FnOnce(Guest<'_>, &mut Store<SandboxState>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let runtime = &self.runtime;
        // Declared before the store, so dropped after it: the slot is free only once the
        // store has given its instance back to the pool.
        let _slot = self.slots.acquire();
        let mut store = Store::new(
            self.pre.engine(),
            SandboxState::new(
                &self.limits,
                self.store_bounds(),
                context.into(),
                random_seed,
            ),
        );
        store.limiter(|state| &mut state.limiter);
        // Wasmtime stops copying a guest's data into the host after this many bytes, so an
        // oversized response is refused before the host allocates it, not after.
        store.set_hostcall_fuel(self.hostcall_fuel());
        // The epoch ticks in wall-clock time; at each deadline the call's own thread checks
        // the CPU it used, so a call a busy host starves is not stopped for the host's load.
        let cpu_deadline = CpuDeadline::start(deadline);
        let tick = runtime.epoch_tick;
        store.set_epoch_deadline(deadline_ticks(deadline, tick));
        store.epoch_deadline_callback(move |mut store| match cpu_deadline.check() {
            Verdict::Left(left) => Ok(UpdateDeadline::Continue(deadline_ticks(left, tick))),
            Verdict::Spent => Ok(UpdateDeadline::Interrupt),
            Verdict::Stalled { cpu_used } => {
                store.data_mut().stalled = Some(CallError::Stalled {
                    limit: deadline,
                    cpu_used,
                    wall: cpu_deadline.wall_clock_bound(),
                });
                Ok(UpdateDeadline::Interrupt)
            }
        });

        let outcome = match self.pre.instantiate_and(&mut store, f) {
            Err(e) => Err(self.classify_instantiate_failure(&store, deadline, e)),
            Ok(called) => called.map_err(|e| self.classify_failure(&store, deadline, e)),
        };
        let usage = CallUsage {
            cpu: cpu_deadline.cpu_used(),
            memory_bytes: store.data().limiter.used_bytes(),
        };
        LAST_CALL_USAGE.with(|last| last.set(Some(usage)));
        let stderr_tail = forward_output(&store, context);
        self.note_limit_hit(
            context,
            outcome.map_err(|error| match error {
                CallError::Trap { message } if !stderr_tail.is_empty() => CallError::Trap {
                    message: format!("{message}; stderr: {stderr_tail}"),
                },
                other => other,
            }),
        )
    }

    /// An instantiation refused for its memories' or tables' size is the memory limit.
    /// An instantiation stopped at its deadline (its start functions run guest code) is the
    /// deadline, as in the call itself.
    fn classify_instantiate_failure(
        &self,
        store: &Store<SandboxState>,
        deadline: Duration,
        error: wasmtime::Error,
    ) -> CallError {
        if store.data().limiter.memory_limit_hit {
            return CallError::OutOfMemory {
                limit: self.limits.max_memory_bytes,
            };
        }
        if let Some(Trap::Interrupt) = error.downcast_ref::<Trap>() {
            return interrupted(store, deadline);
        }
        CallError::Instantiate {
            message: format!("{error:#}"),
        }
    }

    fn classify_failure(
        &self,
        store: &Store<SandboxState>,
        deadline: Duration,
        error: wasmtime::Error,
    ) -> CallError {
        if store.data().limiter.memory_limit_hit {
            return CallError::OutOfMemory {
                limit: self.limits.max_memory_bytes,
            };
        }
        // Wasmtime's error type for this is private; its message is pinned with the version
        // and covered by the runtime tests.
        if format!("{error:#}").contains("fuel allocated for hostcalls has been exhausted") {
            return CallError::ResponseTooLarge {
                size: self.hostcall_fuel(),
                limit: self.limits.max_response_bytes,
            };
        }
        match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => interrupted(store, deadline),
            Some(trap) => CallError::Trap {
                message: trap.to_string(),
            },
            None => CallError::Trap {
                message: format!("{error:#}"),
            },
        }
    }
}

/// Why a call was interrupted: the host starved it (see [`cpu`]) or it used its CPU deadline.
fn interrupted(store: &Store<SandboxState>, deadline: Duration) -> CallError {
    store
        .data()
        .stalled
        .clone()
        .unwrap_or(CallError::Timeout { limit: deadline })
}

/// The parent and each observed child of `request`.
fn request_parts(request: &ReconcileRequest) -> impl Iterator<Item = &str> {
    std::iter::once(request.parent.as_str())
        .chain(request.observed.iter().map(String::as_str))
        .chain(request.related.iter().flat_map(|related| {
            std::iter::once(related.name.as_str()).chain(related.objects.iter().map(String::as_str))
        }))
}

/// Sends the guest's stdout/stderr to the host log; returns the end of stderr (panic messages).
fn forward_output(store: &Store<SandboxState>, context: &str) -> String {
    let state = store.data();
    let mut stderr_tail = String::new();
    for (stream, output) in [("stdout", &state.stdout), ("stderr", &state.stderr)] {
        let (text, dropped) = output.take();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            tracing::info!(target: "plugin", plugin = context, stream, "{line}");
        }
        if dropped > 0 {
            tracing::warn!(target: "plugin", plugin = context, stream, dropped, "plugin output over the cap was dropped");
        }
        if stream == "stderr" {
            let trimmed = text.trim();
            let start = trimmed.len().saturating_sub(512);
            let start = (start..=trimmed.len())
                .find(|&i| trimmed.is_char_boundary(i))
                .unwrap_or(0);
            stderr_tail = trimmed[start..].to_string();
        }
    }
    stderr_tail
}
