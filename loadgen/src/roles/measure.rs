//! What every role measures and reports: a clock shared by its threads (warm-up, measured
//! window), a meter per thread (events counted, latencies in an HDR histogram, a per-second
//! series), and the result JSON in memtier's shape ("ALL STATS" → "Totals") plus a "redline"
//! object with the role's own counts.

use crate::events::{unix_now, Events};
use crate::report::{encode_histogram_of, percentile_key};
use crate::stats::{new_histogram, HIST_MAX_US};
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const NOT_YET: u64 = u64::MAX;
pub const PERCENTILES: [f64; 5] = [50.0, 90.0, 99.0, 99.9, 99.99];

/// When the measured window starts and ends, as nanoseconds since the role started.
pub struct Clock {
    base: Instant,
    base_unix: f64,
    start_ns: AtomicU64,
    end_ns: AtomicU64,
}

impl Clock {
    pub fn new() -> Clock {
        Clock { base: Instant::now(), base_unix: unix_now(), start_ns: AtomicU64::new(NOT_YET), end_ns: AtomicU64::new(NOT_YET) }
    }
    /// A clock whose window is fixed (golden tests).
    #[cfg(test)]
    pub fn fixed(base_unix: f64, start_ns: u64, end_ns: u64) -> Clock {
        Clock { base: Instant::now(), base_unix, start_ns: AtomicU64::new(start_ns), end_ns: AtomicU64::new(end_ns) }
    }
    pub fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }
    pub fn unix_of(&self, ns: u64) -> f64 {
        self.base_unix + ns as f64 / 1e9
    }
    pub fn start_window(&self) {
        self.start_ns.store(self.now_ns(), Ordering::SeqCst);
    }
    /// The window's end, when it is known in advance (events recorded late still fall inside).
    pub fn set_end(&self, at_ns: u64) {
        self.end_ns.store(at_ns, Ordering::SeqCst);
    }
    pub fn window_elapsed_s(&self) -> f64 {
        let s = self.start_ns.load(Ordering::SeqCst);
        if s == NOT_YET { 0.0 } else { self.now_ns().saturating_sub(s) as f64 / 1e9 }
    }
    pub fn end_window(&self) {
        self.end_ns.store(self.now_ns(), Ordering::SeqCst);
    }
    /// The second of the measured window `at_ns` falls in, or None outside it.
    pub fn second_of(&self, at_ns: u64) -> Option<usize> {
        let start = self.start_ns.load(Ordering::Relaxed);
        if start == NOT_YET || at_ns < start || at_ns >= self.end_ns.load(Ordering::Relaxed) {
            return None;
        }
        Some(((at_ns - start) / 1_000_000_000) as usize)
    }
    pub fn window_s(&self) -> f64 {
        let (s, e) = (self.start_ns.load(Ordering::SeqCst), self.end_ns.load(Ordering::SeqCst));
        if s == NOT_YET || e == NOT_YET { 0.0 } else { (e - s) as f64 / 1e9 }
    }
    pub fn warmup_s(&self) -> f64 {
        let s = self.start_ns.load(Ordering::SeqCst);
        if s == NOT_YET { 0.0 } else { s as f64 / 1e9 }
    }
    pub fn window_unix(&self) -> (f64, f64) {
        (self.unix_of(self.start_ns.load(Ordering::SeqCst)), self.unix_of(self.end_ns.load(Ordering::SeqCst)))
    }
}

/// Events of one thread in the measured window: how many, and the latencies of those that
/// carry one (microseconds).
pub struct Meter {
    pub count: u64,
    latency: Histogram<u64>,
    seconds: Vec<(u64, Histogram<u32>)>,
}

impl Default for Meter {
    fn default() -> Self {
        Meter { count: 0, latency: new_histogram(), seconds: Vec::new() }
    }
}

impl Meter {
    /// Count an event that happened at `at_ns` (ignored outside the window), with its latency.
    pub fn record(&mut self, clock: &Clock, at_ns: u64, latency_ns: Option<u64>) {
        let Some(second) = clock.second_of(at_ns) else { return };
        self.count += 1;
        while self.seconds.len() <= second {
            self.seconds.push((0, new_histogram()));
        }
        self.seconds[second].0 += 1;
        if let Some(ns) = latency_ns {
            let us = ((ns + 500) / 1000).clamp(1, HIST_MAX_US);
            let _ = self.latency.record(us);
            let _ = self.seconds[second].1.record(us);
        }
    }
}

impl Meter {
    pub fn merge(&mut self, o: &Meter) {
        self.count += o.count;
        let _ = self.latency.add(&o.latency);
        while self.seconds.len() < o.seconds.len() {
            self.seconds.push((0, new_histogram()));
        }
        for (i, (n, h)) in o.seconds.iter().enumerate() {
            self.seconds[i].0 += n;
            let _ = self.seconds[i].1.add(h);
        }
    }
    pub fn sum<'a>(meters: impl IntoIterator<Item = &'a Meter>) -> Meter {
        let mut m = Meter::default();
        meters.into_iter().for_each(|o| m.merge(o));
        m
    }
}

/// Sleep until `deadline_ns` on the clock or until `stop()` says so, in short steps.
pub fn wait_until(clock: &Clock, deadline_ns: u64, stop: impl Fn() -> bool) {
    while clock.now_ns() < deadline_ns && !stop() {
        let left = deadline_ns - clock.now_ns().min(deadline_ns);
        std::thread::sleep(Duration::from_nanos(left.min(50_000_000)));
    }
}

/// Everything one role run reports.
pub struct Outcome {
    pub name: &'static str,      // the "ALL STATS" entry besides Totals, e.g. "Messages"
    pub meter: Meter,
    pub cpu_start: (f64, f64),
    pub cpu_end: (f64, f64),
    pub connections: u64,
    pub lost: u64,
    pub errors: Map<String, Value>,
    pub role: Value,              // the role's own counts
    pub latency_from: &'static str,
    pub warnings: Vec<String>,
}

fn r3(x: f64) -> Value {
    json!((x * 1000.0).round() / 1000.0)
}

fn tally_json(count: u64, h: &Histogram<u64>, seconds: &[(u64, Histogram<u32>)], d: f64) -> Value {
    let has = h.len() > 0;
    let ms = |us: u64| us as f64 / 1000.0;
    let mut m = Map::new();
    m.insert("Count".into(), json!(count));
    m.insert("Ops/sec".into(), json!(((count as f64 / d.max(1e-9)) * 100.0).round() / 100.0));
    m.insert("Latency".into(), r3(if has { h.mean() / 1000.0 } else { 0.0 }));
    m.insert("Average Latency".into(), r3(if has { h.mean() / 1000.0 } else { 0.0 }));
    m.insert("Min Latency".into(), r3(if has { ms(h.min()) } else { 0.0 }));
    m.insert("Max Latency".into(), r3(if has { ms(h.max()) } else { 0.0 }));
    let mut ts = Map::new();
    for (i, (n, sh)) in seconds.iter().enumerate() {
        let mut s = Map::new();
        s.insert("Count".into(), json!(n));
        if sh.len() > 0 {
            for q in [50.0, 99.0] {
                s.insert(format!("p{q:.2}"), r3(ms(sh.value_at_quantile(q / 100.0))));
            }
        }
        ts.insert(i.to_string(), Value::Object(s));
    }
    m.insert("Time-Serie".into(), Value::Object(ts));
    let mut pl = Map::new();
    if has {
        for q in PERCENTILES {
            pl.insert(percentile_key(q), r3(ms(h.value_at_quantile(q / 100.0))));
        }
        pl.insert("Histogram log format".into(), json!({"Compressed Histogram": encode_histogram_of(h)}));
    }
    m.insert("Percentile Latencies".into(), Value::Object(pl));
    Value::Object(m)
}

pub fn result_json(configuration: Value, clock: &Clock, o: &Outcome) -> Value {
    let d = clock.window_s();
    let (start, end) = clock.window_unix();
    let n_seconds = (d - 1e-3).ceil().max(1.0) as usize;
    let mut seconds = o.meter.seconds.clone();
    seconds.truncate(n_seconds);
    while seconds.len() < n_seconds {
        seconds.push((0, new_histogram()));
    }
    let tally = tally_json(o.meter.count, &o.meter.latency, &seconds, d);
    json!({
        "configuration": configuration,
        "ALL STATS": {
            "Runtime": {"Start time": (start * 1000.0) as u64, "Finish time": (end * 1000.0) as u64,
                        "Total duration": ((end - start) * 1000.0) as u64, "Time unit": "MILLISECONDS"},
            o.name: tally.clone(),
            "Totals": tally,
        },
        "redline": {
            "version": env!("CARGO_PKG_VERSION"),
            "role": configuration["role"],
            "warmup_seconds": clock.warmup_s(),
            "measured_seconds": d,
            "latency_measured_from": o.latency_from,
            "latency_unit_histogram": "microseconds",
            "client_cpu": {"user_s": o.cpu_end.0 - o.cpu_start.0, "system_s": o.cpu_end.1 - o.cpu_start.1},
            "connections": {"configured": o.connections, "opened": o.connections, "reconnects": 0, "lost": o.lost},
            "ops": o.meter.count,
            "errors": o.errors,
            "error_examples": {},
            "warnings": o.warnings,
            "role_counts": o.role,
        },
    })
}

/// Phase events and the window, for the roles that run for a time: warm-up, then `window_s`.
/// `edge("measure")` and `edge("done")` run at the window's start and end.
pub fn timed_window(clock: &Clock, events: &Events, warmup_s: f64, window_s: f64, stop: impl Fn() -> bool + Copy,
                    mut edge: impl FnMut(&str)) {
    if warmup_s > 0.0 {
        events.phase("warmup");
        wait_until(clock, clock.now_ns() + (warmup_s * 1e9) as u64, stop);
    }
    edge("measure");
    events.phase("measure");
    clock.start_window();
    let start = clock.now_ns();
    let end = start + (window_s * 1e9) as u64;
    clock.set_end(end);
    let mut next = start + 1_000_000_000;
    while clock.now_ns() < end && !stop() {
        wait_until(clock, next.min(end), stop);
        events.progress(&crate::events::ProgressEvent {
            phase: "measure",
            elapsed_s: (clock.now_ns() - start) as f64 / 1e9,
            ops: 0,
            ops_per_sec: 0.0,
            requests_done: 0,
            requests_total: None,
        });
        next += 1_000_000_000;
    }
    if stop() {
        clock.end_window();
    }
    edge("done");
    events.phase("done");
}

