//! redline-load: a memtier_benchmark-compatible load generator for Redis-protocol servers,
//! designed to spend little client CPU per operation. See docs/loadgen.md.

mod bufwrite;
mod check;
mod cli;
mod events;
mod io_choice;
mod iopath;
mod keys;
mod net;
mod options;
mod phase;
mod report;
mod resp;
mod roles;
mod rng;
mod runner;
mod slots;
mod stats;
mod tls;
mod worker;
mod workload;

use cli::{parse_args, CliError};
use events::Events;
use std::sync::Arc;

const EXIT_OK: i32 = 0;
const EXIT_RUN_FAILED: i32 = 1;
const EXIT_USAGE: i32 = 2;

fn fail(code: i32, msg: &str) -> ! {
    eprintln!("redline-load: {msg}");
    std::process::exit(code);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args == [check::FLAG] {
        std::process::exit(check::serve());
    }
    if args.first().map(String::as_str) == Some(roles::FLAG) {
        std::process::exit(roles::main(&args[1..]));
    }
    let cfg = match parse_args(&args) {
        Ok(c) => c,
        Err(CliError::Info(text)) => {
            print!("{text}");
            std::process::exit(EXIT_OK);
        }
        Err(CliError::Usage(m)) => fail(EXIT_USAGE, &m),
    };
    let wl = match workload::build_workload(&cfg) {
        Ok(w) => w,
        Err(m) => fail(EXIT_USAGE, &m),
    };
    if let Err(m) = check_value_memory(&cfg) {
        fail(EXIT_USAGE, &m);
    }
    let events = Events { enabled: cfg.events };
    let mut warnings = cfg.warnings.clone();
    warnings.extend(wl.warnings.iter().cloned());
    warnings.extend(runner::allkeys_note(&cfg, &wl));
    for w in &warnings {
        eprintln!("redline-load: warning: {w}");
        events.warning(w);
    }
    let io = match iopath::decide(cfg.io, cfg.tls.enabled) {
        Ok(d) => d,
        Err(m) => fail(EXIT_RUN_FAILED, &m),
    };
    let cfg = Arc::new(cfg);
    let wl = Arc::new(wl);

    if cfg.show_config {
        println!("{}", serde_json::to_string_pretty(&report::config_object(&cfg)).expect("json"));
    }
    let mut runs = Vec::new();
    let mut text = String::new();
    for i in 0..cfg.run_count {
        match runner::run_once(&cfg, &wl, &events, io.path) {
            Ok(r) => {
                let header = if cfg.run_count > 1 { format!("[RUN #{} RESULTS]", i + 1) } else { "ALL STATS".into() };
                let table = report::format_table(&cfg, &wl, &r, &header);
                if cfg.out_file.is_none() {
                    print!("{table}");
                }
                text.push_str(&table);
                runs.push(r);
            }
            Err(runner::RunError(m)) => fail(EXIT_RUN_FAILED, &m),
        }
    }
    if let Some(path) = &cfg.out_file {
        if let Err(e) = std::fs::write(path, &text) {
            fail(EXIT_RUN_FAILED, &format!("cannot write --out-file {path}: {e}"));
        }
    }

    if let Some(path) = &cfg.json_out_file {
        let doc = report::memtier_document(&cfg, &wl, &runs, &warnings, &io);
        let text = serde_json::to_string_pretty(&doc).expect("json");
        if let Err(e) = std::fs::write(path, text + "\n") {
            fail(EXIT_RUN_FAILED, &format!("cannot write --json-out-file {path}: {e}"));
        }
    }
    if let Some(prefix) = &cfg.hdr_file_prefix {
        write_hdr_files(&wl, &runs, prefix);
    }
    // The results are written (so the reason can be read in them), but they are not a result.
    if let Some(problem) = runs.iter().find_map(|r| not_a_result(&cfg, r)) {
        fail(EXIT_RUN_FAILED, &problem);
    }
    std::process::exit(EXIT_OK);
}

/// Why a finished run's numbers must not be taken as a measurement: nothing completed in its
/// measured window, or connections were lost (their requests waited for the reconnect, so the
/// latencies are not the server's) and --reconnect-on-error did not accept that.
fn not_a_result(cfg: &cli::Config, r: &report::RunResult) -> Option<String> {
    let lost = r.stats.conns.lost;
    if r.total().ops == 0 && r.measured_seconds > 0.0 {
        let connections = if lost > 0 { format!(" ({lost} connections lost)") } else { String::new() };
        return Some(format!("no request completed in the measured {:.1} s{connections}", r.measured_seconds));
    }
    if lost > 0 && !cfg.reconnect_on_error {
        return Some(format!(
            "{lost} connections were lost during the run (the server closed them); their requests \
             waited for a reconnect, so the results are not the server's (--reconnect-on-error accepts them)"
        ));
    }
    None
}

/// Each connection keeps one buffer as large as the largest value: refuse sizes this machine
/// cannot hold before allocating them (an allocation failure would abort without a word).
fn check_value_memory(cfg: &cli::Config) -> Result<(), String> {
    let largest = match cfg.data_size {
        cli::DataSize::Fixed(n) => n,
        cli::DataSize::Range { max, .. } => max,
    } as u64;
    let connections = cfg.clients as u64 * cfg.threads as u64;
    let needed = largest.saturating_mul(connections);
    match available_memory_bytes() {
        Some(available) if needed > available / 2 => Err(format!(
            "--data-size {largest} bytes × {connections} connections needs {needed} bytes of value buffers, \
             more than half of this machine's available memory ({available} bytes)"
        )),
        _ => Ok(()),
    }
}

fn available_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn write_hdr_files(wl: &workload::Workload, runs: &[report::RunResult], prefix: &str) {
    if let Some(r) = runs.last() {
        for (i, t) in wl.templates.iter().enumerate() {
            let path = format!("{prefix}_{}.hgrm.b64", t.stats_name.replace(['/', ' ', '<', '>'], "_"));
            let _ = std::fs::write(&path, report::encode_histogram(&r.stats.cmds[i]) + "\n");
        }
    }
}
