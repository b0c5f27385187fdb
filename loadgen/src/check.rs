//! `redline-load --check-arguments`: decide, without running anything, whether redline-load
//! would accept each command line. One JSON array of arguments per stdin line in, one JSON
//! object per line out (`{"ok": true, "warnings": [...]}` or `{"ok": false, "error": "..."}`),
//! so that redline's conformance test puts hundreds of suite lines through one process.
//! It checks what a run checks before connecting (the command line and the commands), except
//! the machine-dependent memory check.

use crate::cli::{parse_args, CliError};
use crate::workload::build_workload;
use serde_json::{json, Value};
use std::io::{BufRead, Write};

pub const FLAG: &str = "--check-arguments";

pub fn serve() -> i32 {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let answer = match line.map_err(|e| e.to_string()).and_then(|l| arguments(&l)) {
            Ok(args) => decide(&args),
            Err(m) => json!({"ok": false, "error": format!("{FLAG}: {m}"), "input": true}),
        };
        if writeln!(out, "{answer}").and_then(|_| out.flush()).is_err() {
            return 1;
        }
    }
    0
}

fn arguments(line: &str) -> Result<Vec<String>, String> {
    serde_json::from_str::<Vec<String>>(line).map_err(|e| format!("each line must be a JSON array of strings ({e})"))
}

fn decide(args: &[String]) -> Value {
    let cfg = match parse_args(args) {
        Ok(cfg) => cfg,
        Err(CliError::Info(_)) => return json!({"ok": true, "warnings": []}),
        Err(CliError::Usage(m)) => return json!({"ok": false, "error": m}),
    };
    match build_workload(&cfg) {
        Ok(wl) => json!({"ok": true, "warnings": cfg.warnings.iter().chain(&wl.warnings).collect::<Vec<_>>()}),
        Err(m) => json!({"ok": false, "error": m}),
    }
}
