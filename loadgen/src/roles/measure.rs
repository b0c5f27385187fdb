//! What every role measures, with memtier mode's parts: the phase driver (phase.rs) moves the
//! run through warm-up and the measured window, each thread counts its events in the window
//! with a `Recorder` (the tallies of stats.rs, one "command": the role's events), and the result
//! is written by report.rs (`role_document`).

use crate::phase::{Driver, Shared, Window};
use crate::resp::ReplyKind;
use crate::stats::{Completion, ThreadStats};
use serde_json::Value;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// One thread's events in the measured window: counted, with their latencies when they carry
/// one, per second too; the run's progress counter follows.
pub struct Recorder<'a> {
    pub stats: ThreadStats,
    shared: &'a Shared,
}

impl<'a> Recorder<'a> {
    pub fn new(shared: &'a Shared) -> Recorder<'a> {
        Recorder { stats: ThreadStats::new(1), shared }
    }

    pub fn now_ns(&self) -> u64 {
        self.shared.now_ns()
    }

    /// Count an event that happened at `at_ns` (ignored outside the window), with its latency.
    pub fn record(&mut self, at_ns: u64, latency_ns: Option<u64>) {
        let Some(second) = self.shared.second_of(at_ns) else { return };
        match latency_ns {
            Some(latency_ns) => {
                let event = Completion {
                    cmd: 0,
                    latency_ns,
                    bytes_rx: 0,
                    bytes_tx: 0,
                    reply: ReplyKind::Value,
                    error_line: b"",
                    counts_hits: false,
                };
                self.stats.record(&event, second);
            }
            None => self.stats.record_untimed(0, second),
        }
        self.shared.progress[0].ops.fetch_add(1, Ordering::Relaxed);
    }
}

/// A role's phases, driven on the calling thread once its threads run: warm-up (redline's
/// --warmup-time; with `warmup_work`, also until the role's warm-up work is done), then the
/// measured window (`window_s`, or until the role's measured work is done).
pub fn run_phases(driver: &mut Driver, warmup_s: f64, warmup_work: bool, window_s: Option<f64>)
                  -> Result<(f64, Window), super::RoleError> {
    driver
        .run(Duration::from_secs_f64(warmup_s), warmup_work, window_s.map(Duration::from_secs_f64), window_s.is_none())
        .map_err(|e| super::RoleError::Run(e.0))
}

/// Everything one role run reports.
pub struct Outcome {
    pub name: &'static str, // the "ALL STATS" entry besides Totals, e.g. "Messages"
    pub stats: ThreadStats,
    pub window: Window,
    pub warmup_seconds: f64,
    pub connections: u64,
    pub lost: u64,
    pub role: Value, // the role's own counts
    pub latency_from: &'static str,
    pub warnings: Vec<String>,
}
