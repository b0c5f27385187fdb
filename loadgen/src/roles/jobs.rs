//! The job-queue roles (`sidekiq-bench`, `celery-bench`, `resque-bench`, `bullmq-bench`,
//! `rq-bench`): one producer connection enqueues jobs as fast as the server takes them while
//! --workers worker connections fetch them, each library's way (queues.rs, rq.rs); RQ's workers
//! also register their birth before the first fetch and their death after the last. First the
//! --warmup-jobs (and redline's --warmup-time), drained before the window opens; then the measured
//! window: the next --jobs jobs until the last is fetched, or redline's --window seconds of
//! enqueuing. After it every enqueued job is waited for, and each job id is accounted for: fetched
//! exactly once, fetched twice (duplicates), or never (lost, and the keys that still hold jobs say
//! where). Measures jobs fetched per second in the window and enqueue→fetch latency; Resque's
//! --idle-poll-duration-s adds idle LPOPs per second with no jobs left.

use super::flags::Flags;
use super::measure::{run_phases, Outcome, Recorder};
use super::fetched::{job_tag, Fetched};
use super::queues::{Library, Protocol};
use super::wire::{Conn, Value};
use super::{ensure_fds, Context, RoleError};
use crate::phase::{Driver, Shared as Phases, WorkerMsg, PHASE_CONNECT, PHASE_DONE, PHASE_MEASURE, PHASE_WARMUP};
use crate::stats::ThreadStats;
use serde_json::{json, Map};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

/// Waiting for workers to fetch what was enqueued ends after this long without progress.
const NO_PROGRESS_NS: u64 = 10_000_000_000;

struct Shared {
    fetched: AtomicU64,
    empty_fetches: AtomicU64,
    stop: AtomicBool,
}

struct WorkerTally {
    recorded: ThreadStats,
    ids: Vec<u64>,
    untagged: u64,
    error: Option<String>,
}

fn worker(proto: &Protocol, mut conn: Conn, index: usize, shared: &Shared, phases: &Phases, poll: Duration) -> WorkerTally {
    let mut recorder = Recorder::new(phases);
    let (mut ids, mut untagged, mut error) = (Vec::new(), 0, None);
    let queue = index % proto.queue_count();
    if let Err(e) = proto.worker_started(&mut conn, index) {
        shared.stop.store(true, Ordering::SeqCst);
        return WorkerTally { recorded: recorder.stats, ids, untagged, error: Some(e) };
    }
    while !shared.stop.load(Ordering::SeqCst) {
        match proto.fetch(&mut conn, queue, index) {
            Ok(Fetched::Job(payload)) => {
                let now = phases.now_ns();
                match job_tag(&payload) {
                    Some((id, enqueued)) => {
                        ids.push(id);
                        recorder.record(now, Some(now.saturating_sub(enqueued)));
                        if let Err(e) = proto.delivered(&mut conn, queue, index, id, &payload) {
                            error = Some(e);
                            break;
                        }
                    }
                    None => untagged += 1,
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
                    error = Some(e);
                }
                break;
            }
        }
    }
    if error.is_none() {
        error = proto.worker_stopped(&mut conn, index).err();
    }
    if error.is_some() {
        shared.stop.store(true, Ordering::SeqCst);
    }
    WorkerTally { recorded: recorder.stats, ids, untagged, error }
}

/// Wait until `target` jobs were fetched; false when the workers stopped making progress (or
/// the run was stopped).
fn wait_fetched(shared: &Shared, phases: &Phases, target: u64) -> bool {
    let mut last = (shared.fetched.load(Ordering::SeqCst), phases.now_ns());
    loop {
        let fetched = shared.fetched.load(Ordering::SeqCst);
        if fetched >= target {
            return true;
        }
        if shared.stop.load(Ordering::SeqCst) {
            return false;
        }
        let now = phases.now_ns();
        if fetched != last.0 {
            last = (fetched, now);
        } else if now - last.1 > NO_PROGRESS_NS {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Sleep in short steps while the run is in `phase` (and `until_ns` is not reached).
fn wait_while(phases: &Phases, phase: u8, until_ns: u64) {
    while phases.phase() == phase && phases.now_ns() < until_ns {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What the producer did: jobs enqueued, and whether the workers kept up.
struct Produced {
    enqueued: u64,
    drained: bool,
    idle_polls_per_sec: Option<f64>,
}

/// The producer, the one thread the phase driver waits for: the warm-up jobs until fetched
/// (then it reports them finished), in the window the next --jobs jobs until fetched (then it
/// reports them finished) or jobs as fast as the server takes them until the window's end;
/// once the run is done, it waits until every job was fetched and, for Resque, counts idle
/// polls.
fn produce(proto: &Protocol, f: &Flags, ctx: &Context, shared: &Shared, phases: &Phases, tx: &Sender<WorkerMsg>)
           -> Result<Produced, String> {
    let mut conn = Conn::open(&ctx.host, ctx.port)?;
    let _ = tx.send(WorkerMsg::Connected);
    let queues = proto.queue_count() as u64;
    let mut next_id = 0u64;
    let enqueue = |conn: &mut Conn, id: &mut u64| -> Result<(), String> {
        proto.enqueue(conn, (*id % queues) as usize, *id, phases.now_ns())?;
        *id += 1;
        Ok(())
    };
    wait_while(phases, PHASE_CONNECT, u64::MAX);
    if phases.phase() == PHASE_WARMUP {
        for _ in 0..f.int("warmup-jobs") {
            enqueue(&mut conn, &mut next_id)?;
        }
        if !wait_fetched(shared, phases, next_id) {
            return Err(format!("the workers fetched no warm-up job for {} s", NO_PROGRESS_NS / 1_000_000_000));
        }
        let _ = tx.send(WorkerMsg::Finished { at_ns: phases.now_ns() });
        wait_while(phases, PHASE_WARMUP, u64::MAX);
    }
    let mut drained = true;
    if phases.phase() == PHASE_MEASURE {
        match ctx.window_s {
            Some(_) => {
                let end = phases.measure_end_ns.load(Ordering::Acquire);
                while phases.phase() == PHASE_MEASURE && phases.now_ns() < end && !shared.stop.load(Ordering::SeqCst) {
                    enqueue(&mut conn, &mut next_id)?;
                }
            }
            None => {
                for _ in 0..f.int("jobs") {
                    enqueue(&mut conn, &mut next_id)?;
                }
                drained = wait_fetched(shared, phases, next_id);
                let _ = tx.send(WorkerMsg::Finished { at_ns: phases.now_ns() });
            }
        }
        wait_while(phases, PHASE_MEASURE, u64::MAX);
    }
    drained = drained && wait_fetched(shared, phases, next_id);
    let idle_s = f.int("idle-poll-duration-s") as f64;
    let idle_polls_per_sec = if proto.library == Library::Resque && idle_s > 0.0 && drained {
        let idle_s = ctx.window_s.map_or(idle_s, |w| idle_s.min(w));
        let before = shared.empty_fetches.load(Ordering::SeqCst);
        wait_while(phases, PHASE_DONE, phases.now_ns() + (idle_s * 1e9) as u64);
        Some((shared.empty_fetches.load(Ordering::SeqCst) - before) as f64 * queues as f64 / idle_s)
    } else {
        None
    };
    Ok(Produced { enqueued: next_id, drained, idle_polls_per_sec })
}

pub fn run(library: Library, f: &Flags, ctx: &Context) -> Result<Outcome, RoleError> {
    let workers = f.int("workers");
    if workers == 0 {
        return Err(RoleError::Usage("--workers must be at least 1".into()));
    }
    if ctx.window_s.is_none() && f.int("jobs") == 0 {
        return Err(RoleError::Usage("--jobs must be at least 1 (or redline's --window)".into()));
    }
    let mut proto = Protocol::new(library, f.int("num-queues"), f.int("priorities"), f.int("brpop-timeout-secs"), f.int("worker-ttl"));
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
    let jobs = ctx.window_s.is_none().then(|| f.int("jobs"));
    let (mut driver, tx) = Driver::new(1, 1, &ctx.events, jobs);
    let phases = driver.shared();
    let warmup_work = f.int("warmup-jobs") > 0;
    let (produced, phased, tallies) = std::thread::scope(|scope| {
        let handles: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let (proto, shared, phases) = (&proto, &shared, &phases);
                scope.spawn(move || worker(proto, c, i, shared, phases, poll))
            })
            .collect();
        let producer = scope.spawn(|| {
            let produced = produce(&proto, f, ctx, &shared, &phases, &tx);
            if let Err(e) = &produced {
                let _ = tx.send(WorkerMsg::Fatal(e.clone()));
            }
            produced
        });
        let phased = run_phases(&mut driver, ctx.warmup_s, warmup_work, ctx.window_s);
        let produced = producer.join().expect("producer thread");
        shared.stop.store(true, Ordering::SeqCst);
        // A worker that was not yet blocked when the run stopped blocks afterwards (RQ's pop
        // waits minutes): unblock until every worker has ended.
        while !handles.iter().all(|h| h.is_finished()) {
            for id in &client_ids {
                let _ = admin.call(&[b"CLIENT", b"UNBLOCK", id.as_bytes()]);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let tallies: Vec<WorkerTally> = handles.into_iter().map(|h| h.join().expect("worker thread")).collect();
        (produced, phased, tallies)
    });
    if let Some(e) = tallies.iter().find_map(|t| t.error.clone()) {
        return Err(RoleError::Run(format!("a worker failed: {e}")));
    }
    let produced = produced.map_err(|e| RoleError::Run(format!("the producer failed: {e}")))?;
    let (warmup_seconds, window) = phased?;
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
    let mut recorded = ThreadStats::new(1);
    tallies.iter().for_each(|t| recorded.merge(&t.recorded));
    Ok(Outcome {
        name: "Jobs",
        stats: recorded,
        window,
        warmup_seconds,
        connections: workers + 2,
        lost: 0,
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
