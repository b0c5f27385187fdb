//! One thread's event loop: its connections on one I/O path (iopath/: epoll or io_uring), a
//! sliding window of `--pipeline` requests per connection, replies parsed in place, completions
//! recorded into the thread's statistics. The loop is the same on both paths: wait for events,
//! parse what arrived, then top up every connection that received replies or can send again.

use crate::cli::Config;
use crate::iopath::{epoll::EpollIo, uring::UringIo, Event, Io, Path};
use crate::net::{self, ConnectError, Endpoint};
use crate::phase::{Shared, Waker, WorkerMsg, PHASE_CONNECT, PHASE_DONE, PHASE_MEASURE, PHASE_WARMUP};
use crate::resp::{ReplyKind, ReplyParser};
use crate::slots::{Shard, SlotTable};
use crate::stats::{Completion, ThreadStats};
use crate::workload::{Generator, GeneratorSpec, ReplyUse, Route, Workload};
use std::collections::VecDeque;
use std::io::ErrorKind;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

/// Give up when the server cannot be reached for this long.
const UNREACHABLE_LIMIT: Duration = Duration::from_secs(5);

/// Per-connection assignment computed by the planner.
#[derive(Clone, Debug)]
pub struct ConnPlan {
    /// Cluster mode: the shard this connection talks to, and where its client's group of
    /// connections (one per shard) starts within the thread.
    pub shard: Option<u16>,
    pub group_base: usize,
    pub endpoint: Option<Endpoint>,
    pub seed: u64,
    pub key_min: u64,
    pub key_max: u64,
    /// Requests this connection issues in the measured window (None: time-based).
    pub limit: Option<u64>,
}

pub struct WorkerSpec {
    pub thread: usize,
    pub cfg: Arc<Config>,
    pub workload: Arc<Workload>,
    pub endpoint: Endpoint,
    pub conns: Vec<ConnPlan>,
    pub cluster: Option<Arc<ClusterPlan>>,
    pub shared: Arc<Shared>,
    pub tx: Sender<WorkerMsg>,
    pub io: Path,
}

#[derive(Clone, Copy)]
struct InFlight {
    sent_ns: u64,
    /// First key index (re-sent with the same key after MOVED/ASK).
    key: u64,
    /// Template index, or INTERNAL for an ASKING whose reply is not a result.
    cmd: u32,
    size: u32,
    /// Connection credited with the completion (NO_ORIGIN: this one).
    origin: u32,
}

const INTERNAL: u32 = u32::MAX;
const NO_ORIGIN: u32 = u32::MAX;

struct Redirect {
    req: InFlight,
    ask: bool,
    slot: u16,
    host: String,
    port: u16,
    from: usize,
}

/// Cluster mode state of one thread.
pub struct ClusterState {
    pub shards: Vec<Shard>,
    pub table: SlotTable,
}

/// What the planner hands over about the cluster.
#[derive(Clone, Debug)]
pub struct ClusterPlan {
    pub shards: Vec<Shard>,
    pub owner: Vec<u16>,
}

#[derive(PartialEq, Eq, Clone, Copy, Debug)]
enum State {
    Ready,
    /// Waiting to reconnect at `retry_ns`; unreachable since `down_since_ns`.
    Backoff { retry_ns: u64, down_since_ns: u64, delay_ms: u64 },
    /// Closing for --reconnect-interval once the in-flight requests are answered.
    Draining,
    Finished,
}

struct Conn {
    endpoint: Endpoint,
    group_base: usize,
    /// Attached to the I/O path (connected).
    open: bool,
    state: State,
    gen: Generator,
    parser: ReplyParser,
    wbuf: Vec<u8>,
    wpos: usize,
    /// Received bytes not parsed yet (the start of a reply cut by the end of a read).
    rbuf: Vec<u8>,
    inflight: VecDeque<InFlight>,
    /// Requests lost with a connection, sent again first after the reconnect.
    resend: VecDeque<InFlight>,
    limit: Option<u64>,
    /// Request limits count in the measured window only (not during warm-up).
    limit_active: bool,
    generated: u64,
    completed: u64,
    since_connect: u64,
    next_send_ns: u64,
    interval_ns: u64,
    writable: bool,
    /// Listed in `Worker::touched` (to top up after this wait's events).
    touched: bool,
}

/// Thread entry point: builds the thread's I/O path, hands its waker to the main thread, then
/// runs the event loop.
pub fn run_with_waker(spec: WorkerSpec, waker_tx: Sender<Waker>) -> ThreadStats {
    let connections = spec.conns.len();
    match spec.io {
        Path::Epoll => run_on(spec, waker_tx, EpollIo::new(connections)),
        Path::IoUring => run_on(spec, waker_tx, UringIo::new(connections)),
    }
}

fn run_on<I: Io>(spec: WorkerSpec, waker_tx: Sender<Waker>, io: Result<I, String>) -> ThreadStats {
    let tx = spec.tx.clone();
    let started = io.and_then(|io| {
        let _ = waker_tx.send(io.waker()?);
        Ok(io)
    });
    drop(waker_tx);
    let mut io = match started {
        Ok(io) => io,
        Err(msg) => {
            let _ = tx.send(WorkerMsg::Fatal(msg));
            return ThreadStats::new(0);
        }
    };
    let mut w = Worker::new(spec);
    if let Err(msg) = w.run(&mut io) {
        let _ = tx.send(WorkerMsg::Fatal(msg));
    }
    w.stats
}

pub struct Worker {
    spec: WorkerSpec,
    conns: Vec<Conn>,
    pub stats: ThreadStats,
    measuring: bool,
    measure_start_ns: u64,
    end_ns: u64,
    phase: u8,
    ops_in_phase: u64,
    finished_conns: usize,
    reported_finished: bool,
    /// Some connection may be waiting to reconnect: the timer scans must look at every one.
    /// Without rate limiting and lost connections the event loop skips those scans.
    reconnecting: bool,
    cluster: Option<ClusterState>,
    redirects: Vec<Redirect>,
    credits: Vec<u32>,
    last_slot_refresh_ns: u64,
    /// Connections that received replies or can send again during this wait.
    touched: Vec<usize>,
    /// Connections the I/O path reported closed during this wait, and why.
    lost: Vec<(usize, String)>,
    /// The first error that ends the run, met while handling a wait's events.
    failure: Option<String>,
}

impl Worker {
    fn new(spec: WorkerSpec) -> Worker {
        let ncmds = spec.workload.templates.len();
        Worker {
            conns: Vec::new(),
            stats: ThreadStats::new(ncmds),
            measuring: false,
            measure_start_ns: 0,
            end_ns: u64::MAX,
            phase: PHASE_CONNECT,
            ops_in_phase: 0,
            finished_conns: 0,
            reported_finished: false,
            reconnecting: false,
            cluster: spec.cluster.as_ref().map(|c| ClusterState {
                shards: c.shards.clone(),
                table: SlotTable::new(&c.owner),
            }),
            redirects: Vec::new(),
            credits: Vec::new(),
            last_slot_refresh_ns: 0,
            touched: Vec::new(),
            lost: Vec::new(),
            failure: None,
            spec,
        }
    }

    fn connect_all(&mut self, io: &mut impl Io) -> Result<(), String> {
        let cfg = self.spec.cfg.clone();
        let mut jitter_rng = crate::rng::Rng::new(0xC0FFEE ^ self.spec.thread as u64);
        let interval_ns = cfg.rate_limiting.map(|r| 1_000_000_000 / r as u64).unwrap_or(0);
        let scan_mode = self.spec.workload.scan_continuation.is_some();
        for (i, plan) in self.spec.conns.iter().enumerate() {
            if cfg.conn_start_max_jitter_us > 0 {
                let us = jitter_rng.range(cfg.conn_start_min_jitter_us, cfg.conn_start_max_jitter_us);
                std::thread::sleep(Duration::from_micros(us));
            }
            let endpoint = plan.endpoint.clone().unwrap_or_else(|| self.spec.endpoint.clone());
            let stream = match net::connect(&cfg, &endpoint, Duration::from_secs(2)) {
                Ok(s) => s,
                Err(ConnectError::Unreachable(e)) => return Err(format!("cannot connect to {endpoint}: {e}")),
                Err(ConnectError::Rejected(e)) => return Err(format!("{endpoint}: {e}")),
            };
            io.attach(i, stream)?;
            let mut parser = ReplyParser::new();
            parser.capture_first_bulk = scan_mode;
            let mut gen = Generator::new(
                &cfg,
                &self.spec.workload,
                &GeneratorSpec { seed: plan.seed, key_min: plan.key_min, key_max: plan.key_max },
            );
            if let (Some(cl), Some(shard)) = (&self.cluster, plan.shard) {
                gen.route = Some(Route { table: cl.table.clone(), shard });
            }
            let finished = plan.limit == Some(0);
            self.conns.push(Conn {
                endpoint,
                group_base: plan.group_base,
                open: true,
                state: if finished { State::Finished } else { State::Ready },
                gen,
                parser,
                wbuf: Vec::with_capacity(16 * 1024),
                wpos: 0,
                rbuf: Vec::new(),
                inflight: VecDeque::with_capacity(cfg.pipeline as usize),
                resend: VecDeque::new(),
                limit: plan.limit,
                limit_active: false,
                generated: 0,
                completed: 0,
                since_connect: 0,
                next_send_ns: 0,
                interval_ns,
                writable: true,
                touched: false,
            });
            if finished {
                self.finished_conns += 1;
            }
            self.stats.conns.opened += 1;
        }
        Ok(())
    }

    fn run(&mut self, io: &mut impl Io) -> Result<(), String> {
        self.connect_all(io)?;
        let _ = self.spec.tx.send(WorkerMsg::Connected);
        let shared = self.spec.shared.clone();
        // Wait for the go signal.
        while shared.phase.load(Ordering::Acquire) == PHASE_CONNECT {
            self.wait(io, Some(Duration::from_millis(100)))?;
        }
        self.sync_phase(shared.now_ns());
        let now = shared.now_ns();
        for c in 0..self.conns.len() {
            self.conns[c].next_send_ns = now + self.rate_offset(c);
            self.fill_and_flush(io, c, now)?;
        }
        loop {
            if self.phase == PHASE_DONE {
                break;
            }
            let timeout = self.poll_timeout(shared.now_ns());
            self.wait(io, timeout)?;
            if self.sync_phase(shared.now_ns()) {
                break;
            }
            self.timers(io, shared.now_ns())?;
            shared.progress[self.spec.thread].ops.store(self.ops_in_phase, Ordering::Relaxed);
            if !self.reported_finished && self.finished_conns == self.conns.len() && self.measuring {
                self.reported_finished = true;
                let _ = self.spec.tx.send(WorkerMsg::Finished { at_ns: shared.now_ns() });
            }
        }
        shared.progress[self.spec.thread].ops.store(self.ops_in_phase, Ordering::Relaxed);
        Ok(())
    }

    /// One wait for events: replies are parsed as they arrive; then lost connections are
    /// closed, redirected requests re-sent, and every touched connection topped up (or
    /// reconnected when it was draining for --reconnect-interval).
    fn wait(&mut self, io: &mut impl Io, timeout: Option<Duration>) -> Result<(), String> {
        let shared = self.spec.shared.clone();
        io.wait(timeout, |event| match event {
            Event::Data(c, bytes) => self.on_data(c, bytes, shared.now_ns()),
            Event::Writable(c) => {
                self.conns[c].writable = true;
                self.touch(c);
            }
            Event::Lost(c, why) => self.lost.push((c, why)),
        })?;
        if let Some(failure) = self.failure.take() {
            return Err(failure);
        }
        let now = shared.now_ns();
        for (c, why) in std::mem::take(&mut self.lost) {
            self.connection_lost(io, c, now, &why);
        }
        if !self.redirects.is_empty() {
            self.handle_redirects(io, now)?;
        }
        let touched = std::mem::take(&mut self.touched);
        for &c in &touched {
            self.conns[c].touched = false;
            if self.conns[c].open && self.conns[c].state == State::Ready {
                self.fill_and_flush(io, c, now)?;
            } else if self.conns[c].state == State::Draining && self.conns[c].inflight.is_empty() {
                self.reconnect_now(io, c, now)?;
            }
        }
        self.touched = touched;
        self.touched.clear();
        Ok(())
    }

    fn touch(&mut self, c: usize) {
        if !self.conns[c].touched {
            self.conns[c].touched = true;
            self.touched.push(c);
        }
    }

    fn rate_offset(&self, c: usize) -> u64 {
        let n = self.conns.len().max(1) as u64;
        let interval = self.conns[c].interval_ns;
        interval * c as u64 / n
    }

    /// Apply a phase change published by the main thread. Returns true when the run is over.
    fn sync_phase(&mut self, now: u64) -> bool {
        let phase = self.spec.shared.phase.load(Ordering::Acquire);
        if phase == self.phase {
            return false;
        }
        if phase >= PHASE_MEASURE && !self.measuring {
            self.measuring = true;
            self.stats.reset();
            self.ops_in_phase = 0;
            self.measure_start_ns = self.spec.shared.measure_start_ns.load(Ordering::Acquire);
            let planned_end = self.spec.shared.measure_end_ns.load(Ordering::Acquire);
            if planned_end > 0 {
                self.end_ns = planned_end;
            }
            // Request counts apply to the measured window only.
            for c in self.conns.iter_mut() {
                c.generated = (c.inflight.len() + c.resend.len()) as u64;
                c.completed = 0;
                c.limit_active = true;
            }
        } else if phase == PHASE_WARMUP {
            self.ops_in_phase = 0;
        }
        if phase == PHASE_DONE {
            let end = self.spec.shared.measure_end_ns.load(Ordering::Acquire);
            self.end_ns = if end == 0 { now } else { end.min(self.end_ns) };
        }
        self.phase = phase;
        phase == PHASE_DONE
    }

    /// Whether any connection has a deadline (a reconnect, or a rate-limited send).
    fn has_timers(&self) -> bool {
        self.reconnecting || self.spec.cfg.rate_limiting.is_some()
    }

    fn poll_timeout(&self, now: u64) -> Option<Duration> {
        if !self.has_timers() {
            return None;
        }
        let mut earliest: Option<u64> = None;
        let rate = self.spec.cfg.rate_limiting.is_some();
        for c in &self.conns {
            let t = match c.state {
                State::Backoff { retry_ns, .. } => Some(retry_ns),
                State::Ready if rate && c.inflight.len() < self.spec.cfg.pipeline as usize && c.may_generate() => {
                    Some(c.next_send_ns)
                }
                _ => None,
            };
            if let Some(t) = t {
                earliest = Some(earliest.map_or(t, |e: u64| e.min(t)));
            }
        }
        earliest.map(|t| Duration::from_nanos(t.saturating_sub(now)))
    }

    fn timers(&mut self, io: &mut impl Io, now: u64) -> Result<(), String> {
        if !self.has_timers() {
            return Ok(());
        }
        let rate = self.spec.cfg.rate_limiting.is_some();
        for c in 0..self.conns.len() {
            match self.conns[c].state {
                State::Backoff { retry_ns, .. } if retry_ns <= now => self.try_reconnect(io, c, now)?,
                State::Ready if rate && self.conns[c].next_send_ns <= now => self.fill_and_flush(io, c, now)?,
                _ => {}
            }
        }
        self.reconnecting = self.conns.iter().any(|c| matches!(c.state, State::Backoff { .. }));
        Ok(())
    }

    /// Bytes received on `c`: parse the replies they complete (after what an earlier read left).
    fn on_data(&mut self, c: usize, bytes: &[u8], now: u64) {
        if self.failure.is_some() || !self.conns[c].open {
            return;
        }
        self.touch(c);
        let mut rbuf = std::mem::take(&mut self.conns[c].rbuf);
        let parsed = if rbuf.is_empty() {
            self.consume(c, bytes, now).map(|used| rbuf.extend_from_slice(&bytes[used..]))
        } else {
            rbuf.extend_from_slice(bytes);
            self.consume(c, &rbuf, now).map(|used| {
                rbuf.drain(..used);
            })
        };
        self.conns[c].rbuf = rbuf;
        if let Err(e) = parsed {
            self.failure = Some(e);
        }
    }

    /// Parse complete replies from `data` and record them; returns the bytes used.
    fn consume(&mut self, c: usize, data: &[u8], now: u64) -> Result<usize, String> {
        let wl = &self.spec.workload;
        let measuring = self.measuring;
        let end_ns = self.end_ns;
        let second_base = self.measure_start_ns;
        let stats = &mut self.stats;
        let conn = &mut self.conns[c];
        let inflight = &mut conn.inflight;
        let gen = &mut conn.gen;
        let cluster = self.cluster.is_some();
        let redirects = &mut self.redirects;
        let credits = &mut self.credits;
        let mut done = 0u64;
        let mut protocol_error = None;
        let result = conn.parser.feed(data, |r| {
            if r.kind == ReplyKind::Push {
                return;
            }
            let req = match inflight.pop_front() {
                Some(q) => q,
                None => {
                    protocol_error = Some("reply without a request".to_string());
                    return;
                }
            };
            if req.cmd == INTERNAL {
                return;
            }
            if cluster && r.kind == ReplyKind::Error {
                let ask = r.error_line.starts_with(b"ASK ");
                if ask || r.error_line.starts_with(b"MOVED ") {
                    if let Some((slot, host, port)) = crate::slots::parse_redirect(r.error_line) {
                        redirects.push(Redirect { req, ask, slot, host, port, from: c });
                        return;
                    }
                }
            }
            if req.origin == NO_ORIGIN {
                done += 1;
            } else {
                credits.push(req.origin);
            }
            if wl.scan_continuation.is_some() {
                gen.scan_reply(r.captured, r.kind != ReplyKind::Error, req.cmd == 1);
            }
            if !measuring || now > end_ns {
                return;
            }
            let second = (now.saturating_sub(second_base) / 1_000_000_000) as usize;
            stats.record(
                &Completion {
                    cmd: req.cmd as usize,
                    latency_ns: now.saturating_sub(req.sent_ns),
                    bytes_rx: r.bytes,
                    bytes_tx: req.size as u64,
                    reply: r.kind,
                    error_line: r.error_line,
                    counts_hits: wl.templates[req.cmd as usize].reply_use == ReplyUse::HitIfNotNull,
                },
                second,
            );
        });
        let used = match result {
            Ok(u) => u,
            Err(crate::resp::ParseError::Protocol(m)) => {
                return Err(format!("protocol error from {}: {m}", self.spec.endpoint))
            }
        };
        if let Some(m) = protocol_error {
            return Err(format!("protocol error from {}: {m}", self.spec.endpoint));
        }
        conn.completed += done;
        conn.since_connect += done;
        self.ops_in_phase += done;
        self.check_finished(c);
        if !self.credits.is_empty() {
            let credits = std::mem::take(&mut self.credits);
            for &o in &credits {
                self.conns[o as usize].completed += 1;
                self.ops_in_phase += 1;
                self.check_finished(o as usize);
            }
            self.credits = credits;
            self.credits.clear();
        }
        let conn = &mut self.conns[c];
        if let Some(ri) = self.spec.cfg.reconnect_interval {
            if conn.state == State::Ready && conn.since_connect >= ri {
                conn.state = State::Draining;
            }
        }
        Ok(used)
    }

    fn fill_and_flush(&mut self, io: &mut impl Io, c: usize, now: u64) -> Result<(), String> {
        if self.phase == PHASE_CONNECT || self.phase == PHASE_DONE {
            return Ok(());
        }
        if now >= self.end_ns {
            return Ok(());
        }
        let pipeline = self.spec.cfg.pipeline as usize;
        let reconnect_interval = self.spec.cfg.reconnect_interval;
        let wl = &self.spec.workload;
        let conn = &mut self.conns[c];
        if conn.state != State::Ready {
            return Ok(());
        }
        let rate = conn.interval_ns > 0;
        while conn.inflight.len() < pipeline {
            let r = match conn.resend.pop_front() {
                Some(r) => r,
                None => break,
            };
            conn.gen.forced_key = Some(r.key);
            let size = conn.gen.write_request(wl, r.cmd as usize, &mut conn.wbuf);
            conn.gen.forced_key = None;
            conn.inflight.push_back(InFlight { size: size as u32, ..r });
        }
        while conn.inflight.len() < pipeline && conn.may_generate() {
            if let Some(ri) = reconnect_interval {
                if conn.since_connect + conn.inflight.len() as u64 >= ri {
                    break;
                }
            }
            let sent_ns = if rate {
                if conn.next_send_ns > now {
                    break;
                }
                let t = conn.next_send_ns;
                conn.next_send_ns += conn.interval_ns;
                t
            } else {
                now
            };
            let idx = conn.gen.choose(wl);
            let size = conn.gen.write_request(wl, idx, &mut conn.wbuf);
            conn.inflight.push_back(InFlight {
                sent_ns,
                key: conn.gen.last_first_key,
                cmd: idx as u32,
                size: size as u32,
                origin: NO_ORIGIN,
            });
            conn.generated += 1;
        }
        self.flush(io, c, now)
    }

    fn flush(&mut self, io: &mut impl Io, c: usize, now: u64) -> Result<(), String> {
        loop {
            let conn = &mut self.conns[c];
            // `>=`: a path that took the bytes by swapping buffers leaves `wbuf` empty.
            if conn.wpos >= conn.wbuf.len() || !conn.open {
                break;
            }
            match io.write(c, &mut conn.wbuf, conn.wpos) {
                Ok(0) => {
                    self.connection_lost(io, c, now, "write returned 0");
                    return Ok(());
                }
                Ok(n) => conn.wpos += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    conn.writable = false;
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    self.connection_lost(io, c, now, &e.to_string());
                    return Ok(());
                }
            }
        }
        let conn = &mut self.conns[c];
        conn.wbuf.clear();
        conn.wpos = 0;
        Ok(())
    }

    fn drop_stream(&mut self, io: &mut impl Io, c: usize) {
        io.detach(c);
        let conn = &mut self.conns[c];
        conn.open = false;
        // Unanswered requests are issued again after the reconnect, with the same key (so a
        // preload interrupted by a server restart still writes every key).
        while let Some(r) = conn.inflight.pop_front() {
            if r.cmd != INTERNAL {
                conn.resend.push_back(r);
            }
        }
        conn.wbuf.clear();
        conn.wpos = 0;
        conn.rbuf.clear();
        conn.parser.reset();
        conn.since_connect = 0;
    }

    fn connection_lost(&mut self, io: &mut impl Io, c: usize, now: u64, why: &str) {
        if !self.conns[c].open {
            return;
        }
        if self.spec.cfg.debug {
            eprintln!("redline-load: connection {} lost: {why}", c);
        }
        self.drop_stream(io, c);
        self.stats.conns.lost += 1;
        let conn = &mut self.conns[c];
        if conn.state != State::Finished {
            conn.state = State::Backoff { retry_ns: now + 10_000_000, down_since_ns: now, delay_ms: 10 };
            self.reconnecting = true;
        }
    }

    fn reconnect_now(&mut self, io: &mut impl Io, c: usize, now: u64) -> Result<(), String> {
        self.drop_stream(io, c);
        self.conns[c].state = State::Backoff { retry_ns: now, down_since_ns: now, delay_ms: 10 };
        self.reconnecting = true;
        self.try_reconnect(io, c, now)
    }

    fn try_reconnect(&mut self, io: &mut impl Io, c: usize, now: u64) -> Result<(), String> {
        let (down_since, delay) = match self.conns[c].state {
            State::Backoff { down_since_ns, delay_ms, .. } => (down_since_ns, delay_ms),
            _ => return Ok(()),
        };
        let endpoint = self.conns[c].endpoint.clone();
        match net::connect(&self.spec.cfg, &endpoint, Duration::from_millis(500)) {
            Ok(s) => {
                io.attach(c, s)?;
                let conn = &mut self.conns[c];
                conn.open = true;
                conn.state = State::Ready;
                conn.writable = true;
                // Rate limiting: intended send times kept running while disconnected.
                if self.measuring {
                    self.stats.conns.reconnects += 1;
                }
                self.fill_and_flush(io, c, now)
            }
            Err(ConnectError::Rejected(m)) => Err(format!("{endpoint}: {m}")),
            Err(ConnectError::Unreachable(m)) => {
                let now2 = self.spec.shared.now_ns();
                if now2.saturating_sub(down_since) >= UNREACHABLE_LIMIT.as_nanos() as u64 {
                    return Err(format!(
                        "lost connection to {endpoint} and could not reconnect for {} s: {m}",
                        UNREACHABLE_LIMIT.as_secs()
                    ));
                }
                let next = (delay * 2).min(500);
                self.conns[c].state =
                    State::Backoff { retry_ns: now2 + delay * 1_000_000, down_since_ns: down_since, delay_ms: next };
                Ok(())
            }
        }
    }
}

impl Worker {
    /// After a MOVED, reload the whole slot map (as memtier does) at most every 100 ms, so
    /// that one redirect per moved range suffices.
    fn refresh_slots(&mut self, host: &str, port: u16, now: u64) {
        if now.saturating_sub(self.last_slot_refresh_ns) < 100_000_000 {
            return;
        }
        self.last_slot_refresh_ns = now;
        let ep = Endpoint::Tcp { host: host.to_string(), port };
        let v = match net::query(&self.spec.cfg, &ep, &["CLUSTER", "SLOTS"]) {
            Ok(v) => v,
            Err(_) => return,
        };
        let (shards, owner) = match crate::slots::parse_cluster_slots(&v, host) {
            Ok(x) => x,
            Err(_) => return,
        };
        if let Some(cl) = &self.cluster {
            let map: Vec<Option<u16>> = shards
                .iter()
                .map(|s| cl.shards.iter().position(|k| k == s).map(|i| i as u16))
                .collect();
            for (slot, o) in owner.iter().enumerate() {
                if let Some(Some(local)) = map.get(*o as usize) {
                    cl.table.set_owner(slot as u16, *local);
                }
            }
        }
    }

    fn check_finished(&mut self, c: usize) {
        let conn = &mut self.conns[c];
        if let Some(limit) = conn.limit {
            if self.measuring && conn.completed >= limit && conn.state != State::Finished {
                conn.state = State::Finished;
                self.finished_conns += 1;
            }
        }
    }

    /// Re-send requests answered with MOVED / ASK on the connection of the right shard.
    fn handle_redirects(&mut self, io: &mut impl Io, now: u64) -> Result<(), String> {
        let redirects = std::mem::take(&mut self.redirects);
        for rd in redirects {
            let origin = if rd.req.origin == NO_ORIGIN { rd.from as u32 } else { rd.req.origin };
            if self.measuring {
                if rd.ask {
                    self.stats.ask += 1;
                } else {
                    self.stats.moved += 1;
                }
            }
            let cl = match &self.cluster {
                Some(cl) => cl,
                None => continue,
            };
            let shard = cl.shards.iter().position(|s| s.port == rd.port && (s.host == rd.host || rd.host.is_empty()));
            let target = shard.map(|s| self.conns[rd.from].group_base + s);
            let usable = matches!(target, Some(t) if t < self.conns.len() && self.conns[t].open);
            if !usable {
                // A shard this client has no connection to: count it and move on.
                if self.measuring {
                    self.stats.record_error(b"MOVED-UNROUTABLE");
                }
                self.conns[origin as usize].completed += 1;
                self.check_finished(origin as usize);
                continue;
            }
            let (s, t) = (shard.unwrap(), target.unwrap());
            if !rd.ask {
                cl.table.set_owner(rd.slot, s as u16);
                self.refresh_slots(&rd.host, rd.port, now);
            }
            let wl = self.spec.workload.clone();
            let conn = &mut self.conns[t];
            if rd.ask {
                conn.wbuf.extend_from_slice(b"*1\r\n$6\r\nASKING\r\n");
                conn.inflight.push_back(InFlight { sent_ns: now, key: 0, cmd: INTERNAL, size: 0, origin: NO_ORIGIN });
            }
            conn.gen.forced_key = Some(rd.req.key);
            let size = conn.gen.write_request(&wl, rd.req.cmd as usize, &mut conn.wbuf);
            conn.gen.forced_key = None;
            conn.inflight.push_back(InFlight { size: size as u32, origin, ..rd.req });
            self.flush(io, t, now)?;
        }
        Ok(())
    }
}

impl Conn {
    #[inline]
    fn may_generate(&self) -> bool {
        let within = match self.limit {
            Some(l) if self.limit_active => self.generated < l,
            _ => true,
        };
        within && self.gen.route.as_ref().is_none_or(|r| r.has_slots())
    }
}
