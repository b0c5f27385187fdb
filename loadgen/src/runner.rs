//! One benchmark run: plan the connections, start one worker thread per --threads, drive the
//! phases through the one phase driver (phase.rs), and collect the statistics.

use crate::cli::{Config, KeyPattern, Requests, DEFAULT_REQUESTS};
use crate::events::Events;
use crate::iopath::Path;
use crate::keys::{distinct_requests, parallel_slice};
use crate::net::Endpoint;
pub use crate::phase::RunError;
use crate::phase::{Driver, Waker};
use crate::report::RunResult;
use crate::stats::ThreadStats;
use crate::slots::{key_slot, parse_cluster_slots};
use crate::workload::{format_key, Generator, Workload};
use crate::worker::{self, ClusterPlan, ConnPlan, WorkerSpec};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

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

pub fn run_once(cfg: &Arc<Config>, wl: &Arc<Workload>, events: &Events, io: Path) -> Result<RunResult, RunError> {
    let cluster = if cfg.cluster_mode { Some(Arc::new(discover_cluster(cfg)?)) } else { None };
    let plans = plan_connections(cfg, wl, cluster.as_deref());
    let configured_connections = plans.iter().map(|p| p.len() as u64).sum();
    let requests_total = (cfg.requests != Requests::Unset).then(|| plans.iter().flatten().map(|p| p.limit.unwrap_or(0)).sum());
    let threads = plans.len();
    let (mut driver, tx) = Driver::new(threads, threads, events, requests_total);
    let handles = start_workers(cfg, wl, cluster, plans, io, &mut driver, tx)?;
    // Request-count runs end when every thread is done (with --test-time too, as in memtier's
    // `-n allkeys --test-time`, whichever comes first).
    let length = cfg.test_time.map(Duration::from_secs);
    let (warmup_seconds, window) =
        driver.run(Duration::from_secs_f64(cfg.warmup_time), false, length, cfg.requests != Requests::Unset)?;
    let stats = collect(handles, wl.templates.len())?;
    if let Some(e) = driver.late_failure() {
        return Err(e);
    }
    Ok(RunResult::of_window(stats, &window, warmup_seconds, configured_connections))
}

/// Start one thread per plan (they connect at once) and hand their wakers to the driver.
fn start_workers(
    cfg: &Arc<Config>,
    wl: &Arc<Workload>,
    cluster: Option<Arc<ClusterPlan>>,
    plans: Vec<Vec<ConnPlan>>,
    io: Path,
    driver: &mut Driver,
    tx: std::sync::mpsc::Sender<crate::phase::WorkerMsg>,
) -> Result<Vec<JoinHandle<ThreadStats>>, RunError> {
    let (waker_tx, waker_rx) = channel::<Waker>();
    let ep = endpoint(cfg);
    let handles = plans
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
                shared: driver.shared(),
                tx: tx.clone(),
                io,
            };
            let wtx = waker_tx.clone();
            std::thread::Builder::new()
                .name(format!("redline-load-{t}"))
                .spawn(move || worker::run_with_waker(spec, wtx))
                .map_err(|e| RunError(format!("cannot start thread: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    for waker in (0..handles.len()).map_while(|_| waker_rx.recv_timeout(Duration::from_secs(10)).ok()) {
        driver.add_waker(waker);
    }
    Ok(handles)
}

/// Wait for the threads to end and sum their statistics.
fn collect(handles: Vec<JoinHandle<ThreadStats>>, ncmds: usize) -> Result<ThreadStats, RunError> {
    let mut total = ThreadStats::new(ncmds);
    for h in handles {
        let s = h.join().map_err(|_| RunError("a worker thread panicked".into()))?;
        // A thread that failed before it started has no tallies.
        if s.cmds.len() == ncmds {
            total.merge(&s);
        }
    }
    Ok(total)
}
