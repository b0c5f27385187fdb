//! The phases of a run (connect, warm-up, measured window, done) and the one driver that moves
//! them, for memtier mode (runner.rs) and every role (roles/) alike. The main thread drives:
//! it publishes each phase in `Shared`, wakes the threads that make the load, announces the
//! phase and the progress of each second (`--events`), opens and closes the measured window and
//! reads the client's CPU over it. The threads read the phase and the window from `Shared` and
//! report through `WorkerMsg` (connected, finished their request-count work, failed).

use crate::events::{Events, ProgressEvent};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const PHASE_CONNECT: u8 = 0;
pub const PHASE_WARMUP: u8 = 1;
pub const PHASE_MEASURE: u8 = 2;
pub const PHASE_DONE: u8 = 3;

pub struct RunError(pub String);

/// The client process's CPU so far (user, system seconds): every thread of the process,
/// including the kernel's work done on its behalf in its own threads.
pub fn cpu_times() -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// The phases of a run, as the threads see them (`code`) and as `--events` names them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Phase {
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

#[derive(Default)]
pub struct Progress {
    /// Completed requests (a role: counted events) in the current phase.
    pub ops: AtomicU64,
}

/// What the driver and the load threads share.
pub struct Shared {
    pub phase: AtomicU8,
    pub base: Instant,
    /// ns since `base` at which the measured window started / ends (0 = not yet).
    pub measure_start_ns: AtomicU64,
    pub measure_end_ns: AtomicU64,
    pub progress: Vec<Progress>,
}

impl Shared {
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    pub fn phase(&self) -> u8 {
        self.phase.load(Ordering::Acquire)
    }

    /// The second of the measured window that `at_ns` falls in; None before the window opened
    /// and from its end on (an end not yet known leaves the window open).
    pub fn second_of(&self, at_ns: u64) -> Option<usize> {
        let start = self.measure_start_ns.load(Ordering::Acquire);
        let end = self.measure_end_ns.load(Ordering::Acquire);
        if start == 0 || at_ns < start || (end != 0 && at_ns >= end) {
            return None;
        }
        Some(((at_ns - start) / 1_000_000_000) as usize)
    }
}

pub enum WorkerMsg {
    Connected,
    /// All request-count work of this thread for the current phase is complete (at `at_ns`).
    Finished { at_ns: u64 },
    Fatal(String),
}

/// Wakes a thread that waits for events, so that it sees a new phase at once.
pub type Waker = Box<dyn Fn() + Send>;

/// How a driven phase ended.
#[derive(PartialEq, Eq)]
enum PhaseEnd {
    /// Its length ran out.
    TimeUp,
    /// Every thread finished its request-count work.
    AllFinished,
}

/// The measured window as the main thread saw it.
pub struct Window {
    /// Wall-clock time at its start (Unix seconds).
    pub start_unix: f64,
    pub seconds: f64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
}

/// The phases of one run, driven from the main thread for `threads` load threads.
pub struct Driver<'a> {
    shared: Arc<Shared>,
    rx: Receiver<WorkerMsg>,
    wakers: Vec<Waker>,
    threads: usize,
    events: &'a Events,
    requests_total: Option<u64>,
    finished_threads: usize,
    last_finish_ns: u64,
}

impl<'a> Driver<'a> {
    /// A run in its connect phase (announced); the threads report on the returned sender and
    /// count their progress in `progress_slots` counters.
    pub fn new(threads: usize, progress_slots: usize, events: &'a Events, requests_total: Option<u64>) -> (Driver<'a>, Sender<WorkerMsg>) {
        let shared = Arc::new(Shared {
            phase: AtomicU8::new(Phase::Connect.code()),
            base: Instant::now(),
            measure_start_ns: AtomicU64::new(0),
            measure_end_ns: AtomicU64::new(0),
            progress: (0..progress_slots).map(|_| Default::default()).collect(),
        });
        let (tx, rx) = channel::<WorkerMsg>();
        events.phase(Phase::Connect.name());
        let driver =
            Driver { shared, rx, wakers: Vec::new(), threads, events, requests_total, finished_threads: 0, last_finish_ns: 0 };
        (driver, tx)
    }

    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    pub fn add_waker(&mut self, waker: Waker) {
        self.wakers.push(waker);
    }

    fn wake_all(&self) {
        for w in &self.wakers {
            w();
        }
    }

    /// Publish a phase to the threads and announce it; returns its wall-clock start.
    fn enter(&mut self, phase: Phase) -> f64 {
        self.finished_threads = 0;
        self.shared.phase.store(phase.code(), Ordering::Release);
        self.wake_all();
        self.events.phase(phase.name())
    }

    /// Stop every thread: the run failed with `msg`.
    pub fn abort(&self, msg: String) -> RunError {
        self.shared.phase.store(Phase::Done.code(), Ordering::Release);
        self.wake_all();
        RunError(msg)
    }

    /// Wait until every thread has connected (or the first failure).
    fn wait_connected(&self) -> Result<(), RunError> {
        let mut connected = 0;
        while connected < self.threads {
            match self.rx.recv_timeout(Duration::from_secs(60)) {
                Ok(WorkerMsg::Connected) => connected += 1,
                Ok(WorkerMsg::Fatal(m)) => return Err(self.abort(m)),
                Ok(WorkerMsg::Finished { .. }) => {}
                Err(_) => return Err(self.abort("timed out connecting".into())),
            }
        }
        Ok(())
    }

    /// A run's phases once its threads are started: wait until they connected, warm up
    /// (`warmup` long; with `warmup_work`, also until the threads' warm-up work is finished),
    /// then the measured window (`length` long, or with `until_finished` until the threads'
    /// request-count work is finished, whichever comes first). Returns the warm-up's length in
    /// seconds and the window.
    pub fn run(&mut self, warmup: Duration, warmup_work: bool, length: Option<Duration>, until_finished: bool)
               -> Result<(f64, Window), RunError> {
        self.wait_connected()?;
        let warmup_seconds = if warmup.is_zero() && !warmup_work { 0.0 } else { self.warm_up(warmup, warmup_work)? };
        Ok((warmup_seconds, self.measure(length, until_finished)?))
    }

    /// The warm-up: load for `length`, nothing recorded; with `work`, also until every thread
    /// has finished its warm-up work (a role's warm-up jobs), whichever ends later. Returns its
    /// length in seconds.
    fn warm_up(&mut self, length: Duration, work: bool) -> Result<f64, RunError> {
        self.enter(Phase::Warmup);
        let start = Instant::now();
        if work {
            self.drive(Phase::Warmup, None, true)?;
        }
        if let Some(left) = length.checked_sub(start.elapsed()).filter(|l| !l.is_zero()) {
            self.drive(Phase::Warmup, Some(left), false)?;
        }
        Ok(start.elapsed().as_secs_f64())
    }

    /// The measured window, from its opening to the end of the run (the threads are told to
    /// stop): `length` long, or with `until_finished` until every thread has finished its
    /// request-count work, whichever comes first.
    fn measure(&mut self, length: Option<Duration>, until_finished: bool) -> Result<Window, RunError> {
        let cpu0 = cpu_times();
        let start_ns = self.shared.now_ns().max(1);
        self.shared.measure_start_ns.store(start_ns, Ordering::Release);
        // Time-based runs: the window's end is known now; threads stop at that instant even if
        // this thread is scheduled late.
        let planned_end_ns = length.map(|t| start_ns + t.as_nanos() as u64);
        if let Some(e) = planned_end_ns {
            self.shared.measure_end_ns.store(e, Ordering::Release);
        }
        let start_unix = self.enter(Phase::Measure);
        let end = self.drive(Phase::Measure, length, until_finished)?;
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
            if until_finished && self.finished_threads == self.threads {
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

    /// A fatal error a thread reported while the threads were stopping.
    pub fn late_failure(&self) -> Option<RunError> {
        self.rx.try_iter().find_map(|m| if let WorkerMsg::Fatal(m) = m { Some(RunError(m)) } else { None })
    }
}
