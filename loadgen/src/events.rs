//! `--events`: machine-readable progress as JSON lines on stderr, flushed at once.

use serde_json::json;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

pub fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

pub struct Events {
    pub enabled: bool,
}

pub struct ProgressEvent<'a> {
    pub phase: &'a str,
    pub elapsed_s: f64,
    pub ops: u64,
    pub ops_per_sec: f64,
    pub requests_done: u64,
    pub requests_total: Option<u64>,
}

impl Events {
    fn emit(&self, v: serde_json::Value) {
        if !self.enabled {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{v}");
        let _ = err.flush();
    }

    /// Emit a phase change stamped with the current wall-clock time; returns that time.
    pub fn phase(&self, phase: &str) -> f64 {
        let t = unix_now();
        self.emit(json!({"event": "phase", "phase": phase, "t": t}));
        t
    }

    pub fn progress(&self, p: &ProgressEvent) {
        self.emit(json!({
            "event": "progress",
            "phase": p.phase,
            "elapsed_s": (p.elapsed_s * 1000.0).round() / 1000.0,
            "ops": p.ops,
            "ops_per_sec": p.ops_per_sec.round(),
            "requests_done": p.requests_done,
            "requests_total": p.requests_total,
        }));
    }

    pub fn warning(&self, msg: &str) {
        self.emit(json!({"event": "warning", "message": msg}));
    }
}
