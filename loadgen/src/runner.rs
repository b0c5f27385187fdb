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
use crate::worker::{self, ClusterPlan, ConnPlan, Shared, WorkerMsg, WorkerSpec, PHASE_DONE, PHASE_MEASURE, PHASE_WARMUP};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct RunError(pub String);

fn cpu_times() -> (f64, f64) {
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
    let total_conns: u64 = plans.iter().map(|p| p.len() as u64).sum();
    let requests_total: Option<u64> = if cfg.requests == Requests::Unset {
        None
    } else {
        Some(plans.iter().flatten().map(|p| p.limit.unwrap_or(0)).sum())
    };
    let shared = Arc::new(Shared {
        phase: AtomicU8::new(worker::PHASE_CONNECT),
        base: Instant::now(),
        measure_start_ns: AtomicU64::new(0),
        measure_end_ns: AtomicU64::new(0),
        progress: (0..cfg.threads).map(|_| Default::default()).collect(),
    });
    let (tx, rx) = channel::<WorkerMsg>();
    events.phase("connect");
    let ep = endpoint(cfg);
    let mut handles = Vec::new();
    let (waker_tx, waker_rx) = channel::<mio::Waker>();
    for (t, conns) in plans.into_iter().enumerate() {
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
        let h = std::thread::Builder::new()
            .name(format!("redline-load-{t}"))
            .spawn(move || worker::run_with_waker(spec, wtx))
            .map_err(|e| RunError(format!("cannot start thread: {e}")))?;
        handles.push(h);
    }
    drop(tx);
    let mut wakers = Vec::new();
    for _ in 0..cfg.threads {
        match waker_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(w) => wakers.push(w),
            Err(_) => break,
        }
    }
    let wake_all = |wakers: &Vec<mio::Waker>| {
        for w in wakers {
            let _ = w.wake();
        }
    };
    let abort = |msg: String, shared: &Arc<Shared>, wakers: &Vec<mio::Waker>| -> RunError {
        shared.phase.store(PHASE_DONE, Ordering::Release);
        wake_all(wakers);
        RunError(msg)
    };

    // Connect phase: wait for every thread (or the first failure).
    let mut connected = 0;
    while connected < cfg.threads as usize {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(WorkerMsg::Connected) => connected += 1,
            Ok(WorkerMsg::Fatal(m)) => return Err(abort(m, &shared, &wakers)),
            Ok(WorkerMsg::Finished { .. }) => {}
            Err(_) => return Err(abort("timed out connecting".into(), &shared, &wakers)),
        }
    }

    let mut finished_threads = 0usize;
    let mut last_finish_ns = 0u64;
    let progress_ops = |shared: &Arc<Shared>| -> u64 { shared.progress.iter().map(|p| p.ops.load(Ordering::Relaxed)).sum() };

    // Warm-up.
    let mut warmup_seconds = 0.0;
    if cfg.warmup_time > 0.0 {
        shared.phase.store(PHASE_WARMUP, Ordering::Release);
        wake_all(&wakers);
        events.phase("warmup");
        let start = Instant::now();
        let end = start + Duration::from_secs_f64(cfg.warmup_time);
        let mut last_ops = 0;
        let mut next_tick = start + Duration::from_secs(1);
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            let wait = next_tick.min(end).saturating_duration_since(now);
            match rx.recv_timeout(wait) {
                Ok(WorkerMsg::Fatal(m)) => return Err(abort(m, &shared, &wakers)),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
            }
            if Instant::now() >= next_tick {
                let ops = progress_ops(&shared);
                events.progress(&ProgressEvent {
                    phase: "warmup",
                    elapsed_s: start.elapsed().as_secs_f64(),
                    ops,
                    ops_per_sec: ops.saturating_sub(last_ops) as f64,
                    requests_done: 0,
                    requests_total,
                });
                last_ops = ops;
                next_tick += Duration::from_secs(1);
            }
        }
        warmup_seconds = start.elapsed().as_secs_f64();
    }

    // Measured window.
    let cpu0 = cpu_times();
    let start_ns = shared.now_ns().max(1);
    shared.measure_start_ns.store(start_ns, Ordering::Release);
    // Time-based runs: the window's end is known now; workers stop at that instant even if
    // this thread is scheduled late.
    let planned_end_ns = cfg.test_time.map(|t| start_ns + t * 1_000_000_000);
    if let Some(e) = planned_end_ns {
        shared.measure_end_ns.store(e, Ordering::Release);
    }
    shared.phase.store(PHASE_MEASURE, Ordering::Release);
    let start_unix = events.phase("measure");
    wake_all(&wakers);
    let start = Instant::now();
    let deadline = cfg.test_time.map(|t| start + Duration::from_secs(t));
    let mut next_tick = start + Duration::from_secs(1);
    let mut last_ops = 0u64;
    let limited = cfg.requests != Requests::Unset;
    let mut finished_early = false;
    // Threads that finished their request-count work before the window opened (e.g. 0 keys).
    loop {
        let now = Instant::now();
        if let Some(d) = deadline {
            if now >= d {
                break;
            }
        }
        // Request-count runs end when every thread is done (with --test-time too, as in
        // memtier's `-n allkeys --test-time`, whichever comes first).
        if limited && finished_threads == cfg.threads as usize {
            finished_early = true;
            break;
        }
        let mut wait = next_tick.saturating_duration_since(now);
        if let Some(d) = deadline {
            wait = wait.min(d.saturating_duration_since(now));
        }
        match rx.recv_timeout(wait) {
            Ok(WorkerMsg::Fatal(m)) => return Err(abort(m, &shared, &wakers)),
            Ok(WorkerMsg::Finished { at_ns }) => {
                finished_threads += 1;
                last_finish_ns = last_finish_ns.max(at_ns);
                continue;
            }
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(abort("worker threads ended unexpectedly".into(), &shared, &wakers))
            }
        }
        if Instant::now() >= next_tick {
            let ops = progress_ops(&shared);
            events.progress(&ProgressEvent {
                phase: "measure",
                elapsed_s: start.elapsed().as_secs_f64(),
                ops,
                ops_per_sec: ops.saturating_sub(last_ops) as f64,
                requests_done: ops,
                requests_total,
            });
            last_ops = ops;
            next_tick += Duration::from_secs(1);
        }
    }
    let end_ns = match planned_end_ns {
        Some(e) if !finished_early => e.min(shared.now_ns()),
        _ => last_finish_ns.max(start_ns),
    };
    shared.measure_end_ns.store(end_ns, Ordering::Release);
    shared.phase.store(PHASE_DONE, Ordering::Release);
    let cpu1 = cpu_times();
    events.phase("done");
    wake_all(&wakers);
    let measured_seconds = (end_ns - start_ns) as f64 / 1e9;

    let mut total = ThreadStats::new(wl.templates.len());
    for h in handles {
        match h.join() {
            Ok(s) => {
                if s.cmds.len() == total.cmds.len() {
                    total.merge(&s)
                }
            }
            Err(_) => return Err(RunError("a worker thread panicked".into())),
        }
    }
    // A fatal error reported while the threads were stopping.
    while let Ok(m) = rx.try_recv() {
        if let WorkerMsg::Fatal(m) = m {
            return Err(RunError(m));
        }
    }
    let start_unix_ms = (start_unix * 1000.0) as u64;
    Ok(RunResult {
        stats: total,
        start_unix_ms,
        end_unix_ms: start_unix_ms + (measured_seconds * 1000.0) as u64,
        measured_seconds,
        warmup_seconds,
        cpu_user_s: cpu1.0 - cpu0.0,
        cpu_system_s: cpu1.1 - cpu0.1,
        interrupted: false,
        configured_connections: total_conns,
    })
}
