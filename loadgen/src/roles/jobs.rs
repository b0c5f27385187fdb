//! The job-queue roles (`sidekiq-bench`, `celery-bench`, `resque-bench`, `bullmq-bench`): one
//! producer connection enqueues jobs as fast as the server takes them while --workers worker
//! connections fetch them, each library's way (queues.rs). First the --warmup-jobs (and
//! redline's --warmup-time), drained before the window opens; then the measured window: the
//! next --jobs jobs until the last is fetched, or redline's --window seconds of enqueuing. After
//! it every enqueued job is waited for, and each job id is accounted for: fetched exactly once,
//! fetched twice (duplicates), or never (lost, and the keys that still hold jobs say where).
//! Measures jobs fetched per second in the window and enqueue→fetch latency; Resque's
//! --idle-poll-duration-s adds idle LPOPs per second with no jobs left.

use super::flags::Flags;
use super::measure::{wait_until, Clock, Meter, Outcome};
use super::queues::{job_tag, Fetched, Library, Protocol};
use super::wire::{Conn, Value};
use super::{ensure_fds, Context, RoleError};
use crate::events::{Events, ProgressEvent};
use serde_json::{json, Map};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Waiting for workers to fetch what was enqueued ends after this long without progress.
const NO_PROGRESS_NS: u64 = 10_000_000_000;

struct Shared {
    fetched: AtomicU64,
    empty_fetches: AtomicU64,
    stop: AtomicBool,
}

#[derive(Default)]
struct WorkerTally {
    meter: Meter,
    ids: Vec<u64>,
    untagged: u64,
    error: Option<String>,
}

fn library(role: &str) -> Library {
    match role {
        "sidekiq-bench" => Library::Sidekiq,
        "celery-bench" => Library::Celery,
        "resque-bench" => Library::Resque,
        _ => Library::BullMq,
    }
}

fn worker(proto: &Protocol, mut conn: Conn, index: usize, shared: &Shared, clock: &Clock, poll: Duration) -> WorkerTally {
    let mut tally = WorkerTally::default();
    let queue = index % proto.queue_count();
    while !shared.stop.load(Ordering::SeqCst) {
        match proto.fetch(&mut conn, queue, index) {
            Ok(Fetched::Job(payload)) => {
                let now = clock.now_ns();
                match job_tag(&payload) {
                    Some((id, enqueued)) => {
                        tally.ids.push(id);
                        tally.meter.record(clock, now, Some(now.saturating_sub(enqueued)));
                        if let Err(e) = proto.delivered(&mut conn, queue, id, &payload) {
                            tally.error = Some(e);
                            break;
                        }
                    }
                    None => tally.untagged += 1,
                }
                shared.fetched.fetch_add(1, Ordering::SeqCst);
            }
            Ok(Fetched::Nothing) => {
                shared.empty_fetches.fetch_add(1, Ordering::Relaxed);
                if proto.library == Library::Resque {
                    std::thread::sleep(poll);
                }
            }
            Err(e) => {
                if !shared.stop.load(Ordering::SeqCst) {
                    tally.error = Some(e);
                }
                break;
            }
        }
    }
    if tally.error.is_some() {
        shared.stop.store(true, Ordering::SeqCst);
    }
    tally
}

/// Wait until `target` jobs were fetched; false when the workers stopped making progress.
fn wait_fetched(shared: &Shared, clock: &Clock, target: u64, events: &Events, total: Option<(u64, u64)>) -> bool {
    let mut last = (shared.fetched.load(Ordering::SeqCst), clock.now_ns());
    let mut next_progress = clock.now_ns() + 1_000_000_000;
    loop {
        let fetched = shared.fetched.load(Ordering::SeqCst);
        if fetched >= target {
            return true;
        }
        if shared.stop.load(Ordering::SeqCst) {
            return false;
        }
        let now = clock.now_ns();
        if fetched != last.0 {
            last = (fetched, now);
        } else if now - last.1 > NO_PROGRESS_NS {
            return false;
        }
        if let Some((base, of)) = total.filter(|_| now >= next_progress) {
            progress(events, clock, fetched.saturating_sub(base), Some(of));
            next_progress += 1_000_000_000;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn progress(events: &Events, clock: &Clock, done: u64, total: Option<u64>) {
    events.progress(&ProgressEvent {
        phase: "measure",
        elapsed_s: clock.window_elapsed_s(),
        ops: done,
        ops_per_sec: 0.0,
        requests_done: done,
        requests_total: total,
    });
}

/// What the producer did: jobs enqueued, and whether the workers kept up.
struct Produced {
    enqueued: u64,
    drained: bool,
    idle_polls_per_sec: Option<f64>,
}

fn produce(proto: &Protocol, f: &Flags, ctx: &Context, shared: &Shared) -> Result<Produced, String> {
    let clock = &ctx.clock;
    let mut conn = Conn::open(&ctx.host, ctx.port)?;
    let warmup_jobs = f.int("warmup-jobs");
    let queues = proto.queue_count() as u64;
    let mut next_id = 0u64;
    let enqueue = |conn: &mut Conn, id: u64| proto.enqueue(conn, (id % queues) as usize, id, clock.now_ns());
    if warmup_jobs > 0 || ctx.warmup_s > 0.0 {
        ctx.events.phase("warmup");
        let until = clock.now_ns() + (ctx.warmup_s * 1e9) as u64;
        while next_id < warmup_jobs {
            enqueue(&mut conn, next_id)?;
            next_id += 1;
        }
        if !wait_fetched(shared, clock, next_id, &ctx.events, None) {
            return Ok(Produced { enqueued: next_id, drained: false, idle_polls_per_sec: None });
        }
        wait_until(clock, until, || shared.stop.load(Ordering::SeqCst));
    }
    ctx.events.phase("measure");
    clock.start_window();
    let start = clock.now_ns();
    match ctx.window_s {
        Some(window) => {
            let end = start + (window * 1e9) as u64;
            clock.set_end(end);
            let mut next_progress = start + 1_000_000_000;
            while clock.now_ns() < end && !shared.stop.load(Ordering::SeqCst) {
                enqueue(&mut conn, next_id)?;
                next_id += 1;
                if clock.now_ns() >= next_progress {
                    progress(&ctx.events, clock, shared.fetched.load(Ordering::Relaxed).saturating_sub(warmup_jobs), None);
                    next_progress += 1_000_000_000;
                }
            }
            wait_until(clock, end, || shared.stop.load(Ordering::SeqCst));
        }
        None => {
            let jobs = f.int("jobs");
            for _ in 0..jobs {
                enqueue(&mut conn, next_id)?;
                next_id += 1;
            }
            let done = wait_fetched(shared, clock, next_id, &ctx.events, Some((warmup_jobs, jobs)));
            clock.end_window();
            if !done {
                ctx.events.phase("done");
                return Ok(Produced { enqueued: next_id, drained: false, idle_polls_per_sec: None });
            }
        }
    }
    ctx.events.phase("done");
    let drained = wait_fetched(shared, clock, next_id, &ctx.events, None);
    let idle_s = f.int("idle-poll-duration-s") as f64;
    let idle_polls_per_sec = if proto.library == Library::Resque && idle_s > 0.0 && drained {
        let idle_s = ctx.window_s.map_or(idle_s, |w| idle_s.min(w));
        let before = shared.empty_fetches.load(Ordering::SeqCst);
        wait_until(clock, clock.now_ns() + (idle_s * 1e9) as u64, || shared.stop.load(Ordering::SeqCst));
        Some((shared.empty_fetches.load(Ordering::SeqCst) - before) as f64 * queues as f64 / idle_s)
    } else {
        None
    };
    Ok(Produced { enqueued: next_id, drained, idle_polls_per_sec })
}

pub fn run(f: &Flags, ctx: &Context) -> Result<Outcome, RoleError> {
    let library = library(&f.role);
    let workers = f.int("workers");
    if workers == 0 {
        return Err(RoleError::Usage("--workers must be at least 1".into()));
    }
    if ctx.window_s.is_none() && f.int("jobs") == 0 {
        return Err(RoleError::Usage("--jobs must be at least 1 (or redline's --window)".into()));
    }
    let mut proto = Protocol::new(library, f.int("num-queues"), f.int("priorities"), f.int("brpop-timeout-secs"));
    if library == Library::BullMq && proto.queue_count() as u64 > workers {
        return Err(RoleError::Usage(format!("--num-queues {} needs at least as many --workers", proto.queue_count())));
    }
    ensure_fds(workers + 2)?;
    let mut admin = Conn::open(&ctx.host, ctx.port)?;
    proto.setup(&mut admin)?;
    let mut conns = Vec::with_capacity(workers as usize);
    let mut client_ids = Vec::with_capacity(workers as usize);
    for _ in 0..workers {
        let mut c = Conn::open(&ctx.host, ctx.port)?;
        match c.call(&[b"CLIENT", b"ID"])? {
            Value::Int(id) => client_ids.push(id.to_string()),
            other => return Err(RoleError::Run(format!("CLIENT ID replied {other:?}"))),
        }
        conns.push(c);
    }
    let shared = Shared { fetched: AtomicU64::new(0), empty_fetches: AtomicU64::new(0), stop: AtomicBool::new(false) };
    let poll = Duration::from_millis(f.int("poll-interval-ms"));
    let cpu_start = crate::runner::cpu_times();
    let (produced, tallies) = std::thread::scope(|scope| {
        let handles: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let (proto, shared, clock) = (&proto, &shared, &ctx.clock);
                scope.spawn(move || worker(proto, c, i, shared, clock, poll))
            })
            .collect();
        let produced = produce(&proto, f, ctx, &shared);
        shared.stop.store(true, Ordering::SeqCst);
        for id in &client_ids {
            let _ = admin.call(&[b"CLIENT", b"UNBLOCK", id.as_bytes()]);
        }
        let tallies: Vec<WorkerTally> = handles.into_iter().map(|h| h.join().expect("worker thread")).collect();
        (produced, tallies)
    });
    let cpu_end = crate::runner::cpu_times();
    if let Some(e) = tallies.iter().find_map(|t| t.error.clone()) {
        return Err(RoleError::Run(format!("a worker failed: {e}")));
    }
    let produced = produced.map_err(|e| RoleError::Run(format!("the producer failed: {e}")))?;
    let mut ids: Vec<u64> = tallies.iter().flat_map(|t| t.ids.iter().copied()).collect();
    ids.sort_unstable();
    let fetched = ids.len() as u64;
    ids.dedup();
    let distinct = ids.len() as u64;
    let duplicates = fetched - distinct;
    let lost = produced.enqueued.saturating_sub(distinct);
    let mut left = Map::new();
    for key in proto.pending_keys() {
        if let Ok(Value::Int(n)) = admin.call(&[b"LLEN", key.as_bytes()]) {
            if n > 0 {
                left.insert(key.clone(), json!(n));
            }
        }
    }
    let mut warnings = Vec::new();
    if duplicates > 0 || lost > 0 {
        warnings.push(format!("job accounting: {duplicates} jobs fetched twice, {lost} never fetched of {}", produced.enqueued));
    }
    if !produced.drained {
        warnings.push(format!("the workers stopped fetching for {} s before every job was fetched", NO_PROGRESS_NS / 1_000_000_000));
    }
    let meter = Meter::sum(tallies.iter().map(|t| &t.meter));
    Ok(Outcome {
        name: "Jobs",
        meter,
        cpu_start,
        cpu_end,
        connections: workers + 2,
        lost: 0,
        errors: Map::new(),
        role: json!({
            "library": format!("{library:?}").to_lowercase(),
            "workers": workers,
            "queues": proto.queue_count(),
            "fetch_keys": proto.pending_keys(),
            "enqueued": produced.enqueued,
            "fetched": fetched,
            "fetched_once": distinct,
            "fetched_twice_or_more": duplicates,
            "never_fetched": lost,
            "untagged_payloads": tallies.iter().map(|t| t.untagged).sum::<u64>(),
            "exactly_once": duplicates == 0 && lost == 0,
            "left_in_keys": left,
            "empty_fetches": shared.empty_fetches.load(Ordering::SeqCst),
            "idle_polls_per_sec": produced.idle_polls_per_sec,
        }),
        latency_from: "enqueue (the job's own enqueue time)",
        warnings,
    })
}
