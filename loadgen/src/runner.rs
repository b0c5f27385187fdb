//! One benchmark run: plan the connections, start one worker thread per --threads, drive the
//! phases (connect, warm-up, measure, done), report progress, and collect the statistics.

use crate::cli::{Config, KeyPattern, Requests, DEFAULT_REQUESTS};
use crate::events::{Events, ProgressEvent};
use crate::keys::{distinct_requests, parallel_slice};
use crate::net::Endpoint;
use crate::report::RunResult;
use crate::stats::ThreadStats;
use crate::slots::{key_slot, parse_cluster_slots};
use crate::workload::{format_key, Generator, Workload};
use crate::worker::{self, ClusterPlan, ConnPlan, Shared, WorkerMsg, WorkerSpec};
use crate::worker::{PHASE_CONNECT, PHASE_DONE, PHASE_MEASURE, PHASE_WARMUP};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct RunError(pub String);

pub fn cpu_times() -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// Whether the first command (or the SET side of the built-in mix) uses the parallel pattern:
/// then each connection owns an exact share of the key range (memtier's rule).
fn parallel_keys(cfg: &Config) -> bool {
    match cfg.commands.first() {
        Some(c) => c.key_pattern == KeyPattern::Parallel,
        None => cfg.key_pattern.0 == KeyPattern::Parallel,
    }
}

fn base_seed(cfg: &Config) -> u64 {
    if cfg.randomize {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        (t as u64) ^ ((std::process::id() as u64) << 32)
    } else {
        // memtier's default: every client uses the same seed unless told otherwise.
        0x004D_454D_5449_4552
    }
}

/// Cluster mode: how many keys of [lo, hi] hash to each shard (with the first command's key
/// formatting), so that exact preloads stay exact.
fn keys_per_shard(cl: &ClusterPlan, parts: (&[u8], &[u8], &[u8]), lo: u64, hi: u64) -> Vec<u64> {
    let mut counts = vec![0u64; cl.shards.len()];
    let mut buf = [0u8; 512];
    for k in lo..=hi {
        if let Some(n) = format_key(&mut buf, parts, k) {
            counts[cl.owner[key_slot(&buf[..n]) as usize] as usize] += 1;
        }
    }
    counts
}

/// memtier's request count per connection for `-n allkeys` (memtier_benchmark.cpp):
/// `key_maximum - key_minimum`, or with `--key-pattern P:P` that count divided among the
/// connections plus one; a count of zero (one key) falls back to memtier's default of 10,000
/// requests unless the run is timed.
pub fn memtier_allkeys_requests(cfg: &Config) -> u64 {
    let span = cfg.key_maximum - cfg.key_minimum;
    if cfg.key_pattern == (KeyPattern::Parallel, KeyPattern::Parallel) && cfg.commands.is_empty() {
        return span / (cfg.clients as u64 * cfg.threads as u64) + 1;
    }
    match span {
        0 if cfg.test_time.is_none() => DEFAULT_REQUESTS,
        n => n,
    }
}

/// How many requests one connection sends for `-n allkeys`: memtier's count, except that a
/// parallel (P) connection stops once it has sent every distinct request of its slice
/// (`keys::distinct_requests`). memtier walks each slice over and over with several
/// connections (a 3M-key suite with 200 connections sends 600M SETs); the requests it repeats
/// write the same keys with the same sizes, so the data is the same with far fewer requests.
/// With one connection memtier's count is one short of the slice and is kept: that leaves the
/// last key out, and the upstream suites rely on it (`--key-maximum N+1` loads N keys).
fn allkeys_requests(cfg: &Config, wl: &Workload, parallel: bool, slice: (u64, u64)) -> u64 {
    let memtier = memtier_allkeys_requests(cfg);
    if !parallel {
        return memtier;
    }
    let ratio = |i: usize, t: &crate::workload::Template| match wl.builtin_ratio {
        Some((set, get)) => [set, get][i.min(1)] as u64,
        None => t.ratio as u64,
    };
    let commands: Vec<(u64, u64)> = wl
        .templates
        .iter()
        .enumerate()
        .filter(|(_, t)| t.executable)
        .map(|(i, t)| (ratio(i, t), t.key_count as u64))
        .collect();
    memtier.min(distinct_requests(slice.1 - slice.0 + 1, &commands))
}

/// The one line that says when `-n allkeys` sends fewer requests than memtier would.
pub fn allkeys_note(cfg: &Config, wl: &Workload) -> Option<String> {
    if cfg.requests != Requests::AllKeys {
        return None;
    }
    let ours: u64 = plan_connections(cfg, wl, None).iter().flatten().map(|p| p.limit.unwrap_or(0)).sum();
    let memtier = memtier_allkeys_requests(cfg) * cfg.clients as u64 * cfg.threads as u64;
    (ours < memtier).then(|| {
        format!(
            "-n allkeys: {ours} requests where memtier_benchmark sends {memtier}: each connection sends every \
             distinct request of its keys once where memtier repeats them, so the same keys, values and TTLs \
             are written (docs/loadgen.md)"
        )
    })
}

pub fn plan_connections(cfg: &Config, wl: &Workload, cluster: Option<&ClusterPlan>) -> Vec<Vec<ConnPlan>> {
    let total = cfg.clients as u64 * cfg.threads as u64;
    let parallel = parallel_keys(cfg);
    let seed0 = base_seed(cfg);
    let mut out = Vec::new();
    for t in 0..cfg.threads as u64 {
        let mut conns = Vec::new();
        for c in 0..cfg.clients as u64 {
            let index = t * cfg.clients as u64 + c;
            let (key_min, key_max) = if parallel {
                parallel_slice(cfg.key_minimum, cfg.key_maximum, index, total)
            } else {
                (cfg.key_minimum, cfg.key_maximum)
            };
            let limit = match cfg.requests {
                Requests::Unset => None,
                Requests::PerClient(n) => Some(n),
                Requests::AllKeys => Some(allkeys_requests(cfg, wl, parallel, (key_min, key_max))),
            };
            let seed = if cfg.distinct_client_seed { seed0.wrapping_add(index + 1) } else { seed0 };
            match cluster {
                None => conns.push(ConnPlan {
                    shard: None,
                    group_base: conns.len(),
                    endpoint: None,
                    seed,
                    key_min,
                    key_max,
                    limit,
                }),
                Some(cl) => {
                    // memtier: each client has one connection per shard.
                    let nshards = cl.shards.len() as u64;
                    let group_base = conns.len();
                    let per_shard: Option<Vec<u64>> = match cfg.requests {
                        Requests::AllKeys => {
                            let (p, s) = Generator::first_key_parts(wl);
                            let format = (&p[..], cfg.key_prefix.as_bytes(), &s[..]);
                            // At most one pass over [key_min, key_max]: the first n keys.
                            let n = allkeys_requests(cfg, wl, parallel, (key_min, key_max));
                            let n = n.min(key_max - key_min + 1);
                            Some(if n == 0 {
                                vec![0; cl.shards.len()]
                            } else {
                                keys_per_shard(cl, format, key_min, key_min + n - 1)
                            })
                        }
                        Requests::PerClient(n) => {
                            Some((0..nshards).map(|s| n / nshards + u64::from(s < n % nshards)).collect())
                        }
                        Requests::Unset => None,
                    };
                    for (s, shard) in cl.shards.iter().enumerate() {
                        conns.push(ConnPlan {
                            shard: Some(s as u16),
                            group_base,
                            endpoint: Some(Endpoint::Tcp { host: shard.host.clone(), port: shard.port }),
                            seed: seed.wrapping_add((s as u64) << 40),
                            key_min,
                            key_max,
                            limit: per_shard.as_ref().map(|v| v[s]),
                        });
                    }
                }
            }
        }
        out.push(conns);
    }
    out
}

pub fn endpoint(cfg: &Config) -> Endpoint {
    match &cfg.unix_socket {
        Some(p) => Endpoint::Unix(p.clone()),
        None => Endpoint::Tcp { host: cfg.server.clone(), port: cfg.port },
    }
}

pub fn discover_cluster(cfg: &Config) -> Result<ClusterPlan, RunError> {
    let ep = endpoint(cfg);
    let v = crate::net::query(cfg, &ep, &["CLUSTER", "SLOTS"]).map_err(RunError)?;
    let default_host = match &ep {
        Endpoint::Tcp { host, .. } => host.clone(),
        Endpoint::Unix(_) => "127.0.0.1".into(),
    };
    let (shards, owner) = parse_cluster_slots(&v, &default_host).map_err(RunError)?;
    Ok(ClusterPlan { shards, owner })
}

pub fn run_once(cfg: &Arc<Config>, wl: &Arc<Workload>, events: &Events) -> Result<RunResult, RunError> {
    let cluster = if cfg.cluster_mode { Some(Arc::new(discover_cluster(cfg)?)) } else { None };
    let plans = plan_connections(cfg, wl, cluster.as_deref());
    let configured_connections = plans.iter().map(|p| p.len() as u64).sum();
    let requests_total = (cfg.requests != Requests::Unset).then(|| plans.iter().flatten().map(|p| p.limit.unwrap_or(0)).sum());
    let mut workers = Workers::start(cfg, wl, cluster, plans, events, requests_total)?;
    workers.wait_connected()?;
    let warmup_seconds = match cfg.warmup_time {
        t if t > 0.0 => workers.warm_up(Duration::from_secs_f64(t))?,
        _ => 0.0,
    };
    let window = workers.measure(cfg)?;
    let stats = workers.collect(wl.templates.len())?;
    let start_unix_ms = (window.start_unix * 1000.0) as u64;
    Ok(RunResult {
        stats,
        start_unix_ms,
        end_unix_ms: start_unix_ms + (window.seconds * 1000.0) as u64,
        measured_seconds: window.seconds,
        warmup_seconds,
        cpu_user_s: window.cpu_user_s,
        cpu_system_s: window.cpu_system_s,
        interrupted: false,
        configured_connections,
    })
}

/// The phases of a run, as the threads see them (`code`) and as `--events` names them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connect,
    Warmup,
    Measure,
    Done,
}

impl Phase {
    fn code(self) -> u8 {
        match self {
            Phase::Connect => PHASE_CONNECT,
            Phase::Warmup => PHASE_WARMUP,
            Phase::Measure => PHASE_MEASURE,
            Phase::Done => PHASE_DONE,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Phase::Connect => "connect",
            Phase::Warmup => "warmup",
            Phase::Measure => "measure",
            Phase::Done => "done",
        }
    }
}

/// How a driven phase ended.
#[derive(PartialEq, Eq)]
enum PhaseEnd {
    /// Its length ran out.
    TimeUp,
    /// Every thread finished its request-count work.
    AllFinished,
}

/// The measured window as the main thread saw it.
struct Window {
    /// Wall-clock time at its start (Unix seconds).
    start_unix: f64,
    seconds: f64,
    cpu_user_s: f64,
    cpu_system_s: f64,
}

/// The worker threads as the main thread sees them: their handles, messages and wakers, the
/// phase they share, and which of them finished their request-count work.
struct Workers<'a> {
    shared: Arc<Shared>,
    rx: Receiver<WorkerMsg>,
    wakers: Vec<mio::Waker>,
    threads: Vec<JoinHandle<ThreadStats>>,
    events: &'a Events,
    requests_total: Option<u64>,
    finished_threads: usize,
    last_finish_ns: u64,
}

impl<'a> Workers<'a> {
    /// Start one thread per plan; they connect at once.
    fn start(
        cfg: &Arc<Config>,
        wl: &Arc<Workload>,
        cluster: Option<Arc<ClusterPlan>>,
        plans: Vec<Vec<ConnPlan>>,
        events: &'a Events,
        requests_total: Option<u64>,
    ) -> Result<Workers<'a>, RunError> {
        let shared = Arc::new(Shared {
            phase: AtomicU8::new(Phase::Connect.code()),
            base: Instant::now(),
            measure_start_ns: AtomicU64::new(0),
            measure_end_ns: AtomicU64::new(0),
            progress: (0..cfg.threads).map(|_| Default::default()).collect(),
        });
        let (tx, rx) = channel::<WorkerMsg>();
        let (waker_tx, waker_rx) = channel::<mio::Waker>();
        events.phase(Phase::Connect.name());
        let ep = endpoint(cfg);
        let threads = plans
            .into_iter()
            .enumerate()
            .map(|(t, conns)| {
                let spec = WorkerSpec {
                    thread: t,
                    cfg: cfg.clone(),
                    workload: wl.clone(),
                    endpoint: ep.clone(),
                    conns,
                    cluster: cluster.clone(),
                    shared: shared.clone(),
                    tx: tx.clone(),
                };
                let wtx = waker_tx.clone();
                std::thread::Builder::new()
                    .name(format!("redline-load-{t}"))
                    .spawn(move || worker::run_with_waker(spec, wtx))
                    .map_err(|e| RunError(format!("cannot start thread: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let wakers = (0..threads.len()).map_while(|_| waker_rx.recv_timeout(Duration::from_secs(10)).ok()).collect();
        Ok(Workers { shared, rx, wakers, threads, events, requests_total, finished_threads: 0, last_finish_ns: 0 })
    }

    fn wake_all(&self) {
        for w in &self.wakers {
            let _ = w.wake();
        }
    }

    /// Publish a phase to the threads and announce it; returns its wall-clock start.
    fn enter(&self, phase: Phase) -> f64 {
        self.shared.phase.store(phase.code(), Ordering::Release);
        self.wake_all();
        self.events.phase(phase.name())
    }

    /// Stop every thread: the run failed with `msg`.
    fn abort(&self, msg: String) -> RunError {
        self.shared.phase.store(Phase::Done.code(), Ordering::Release);
        self.wake_all();
        RunError(msg)
    }

    /// Wait until every thread has connected (or the first failure).
    fn wait_connected(&self) -> Result<(), RunError> {
        let mut connected = 0;
        while connected < self.threads.len() {
            match self.rx.recv_timeout(Duration::from_secs(60)) {
                Ok(WorkerMsg::Connected) => connected += 1,
                Ok(WorkerMsg::Fatal(m)) => return Err(self.abort(m)),
                Ok(WorkerMsg::Finished { .. }) => {}
                Err(_) => return Err(self.abort("timed out connecting".into())),
            }
        }
        Ok(())
    }

    /// The warm-up: load for `length`, nothing recorded. Returns its length in seconds.
    fn warm_up(&mut self, length: Duration) -> Result<f64, RunError> {
        self.enter(Phase::Warmup);
        let start = Instant::now();
        self.drive(Phase::Warmup, Some(length), false)?;
        Ok(start.elapsed().as_secs_f64())
    }

    /// The measured window, from its opening to the end of the run (the threads are told to stop).
    fn measure(&mut self, cfg: &Config) -> Result<Window, RunError> {
        let cpu0 = cpu_times();
        let start_ns = self.shared.now_ns().max(1);
        self.shared.measure_start_ns.store(start_ns, Ordering::Release);
        // Time-based runs: the window's end is known now; workers stop at that instant even if
        // this thread is scheduled late.
        let planned_end_ns = cfg.test_time.map(|t| start_ns + t * 1_000_000_000);
        if let Some(e) = planned_end_ns {
            self.shared.measure_end_ns.store(e, Ordering::Release);
        }
        let start_unix = self.enter(Phase::Measure);
        // Request-count runs end when every thread is done (with --test-time too, as in
        // memtier's `-n allkeys --test-time`, whichever comes first).
        let limited = cfg.requests != Requests::Unset;
        let end = self.drive(Phase::Measure, cfg.test_time.map(Duration::from_secs), limited)?;
        let end_ns = match planned_end_ns {
            Some(e) if end == PhaseEnd::TimeUp => e.min(self.shared.now_ns()),
            _ => self.last_finish_ns.max(start_ns),
        };
        self.shared.measure_end_ns.store(end_ns, Ordering::Release);
        let cpu1 = cpu_times();
        self.enter(Phase::Done);
        Ok(Window {
            start_unix,
            seconds: (end_ns - start_ns) as f64 / 1e9,
            cpu_user_s: cpu1.0 - cpu0.0,
            cpu_system_s: cpu1.1 - cpu0.1,
        })
    }

    /// Run the current phase for `length` (`None`: no limit) or, with `until_finished`, until
    /// every thread has finished its request-count work, announcing the progress each second.
    fn drive(&mut self, phase: Phase, length: Option<Duration>, until_finished: bool) -> Result<PhaseEnd, RunError> {
        let start = Instant::now();
        let end = length.map(|l| start + l);
        let mut next_tick = start + Duration::from_secs(1);
        let mut last_ops = 0u64;
        loop {
            let now = Instant::now();
            if end.is_some_and(|e| now >= e) {
                return Ok(PhaseEnd::TimeUp);
            }
            if until_finished && self.finished_threads == self.threads.len() {
                return Ok(PhaseEnd::AllFinished);
            }
            let wait = end.map_or(next_tick, |e| e.min(next_tick)).saturating_duration_since(now);
            match self.rx.recv_timeout(wait) {
                Ok(WorkerMsg::Fatal(m)) => return Err(self.abort(m)),
                Ok(WorkerMsg::Finished { at_ns }) => {
                    self.finished_threads += 1;
                    self.last_finish_ns = self.last_finish_ns.max(at_ns);
                    continue;
                }
                Ok(WorkerMsg::Connected) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.abort("worker threads ended unexpectedly".into()))
                }
            }
            if Instant::now() >= next_tick {
                let ops = self.shared.progress.iter().map(|p| p.ops.load(Ordering::Relaxed)).sum();
                self.events.progress(&ProgressEvent {
                    phase: phase.name(),
                    elapsed_s: start.elapsed().as_secs_f64(),
                    ops,
                    ops_per_sec: ops.saturating_sub(last_ops) as f64,
                    requests_done: if phase == Phase::Measure { ops } else { 0 },
                    requests_total: self.requests_total,
                });
                last_ops = ops;
                next_tick += Duration::from_secs(1);
            }
        }
    }

    /// Wait for the threads to end and sum their statistics.
    fn collect(self, ncmds: usize) -> Result<ThreadStats, RunError> {
        let mut total = ThreadStats::new(ncmds);
        for h in self.threads {
            let s = h.join().map_err(|_| RunError("a worker thread panicked".into()))?;
            // A thread that failed before it started has no tallies.
            if s.cmds.len() == ncmds {
                total.merge(&s);
            }
        }
        // A fatal error reported while the threads were stopping.
        match self.rx.try_iter().find_map(|m| if let WorkerMsg::Fatal(m) = m { Some(m) } else { None }) {
            Some(m) => Err(RunError(m)),
            None => Ok(total),
        }
    }
}
