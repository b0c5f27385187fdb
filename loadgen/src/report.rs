//! Result output: memtier's JSON shape ("ALL STATS" with per-command entries and "Totals",
//! "Runtime", per-second "Time-Serie", percentiles, compressed HDR histograms) plus redline's
//! own "redline" object, and a short text table on stdout.

use crate::cli::Config;
use crate::iopath::Decision;
use crate::stats::{Resolution, SecondTally, Tally, ThreadStats, WindowTally};
use crate::workload::Workload;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use serde_json::{json, Map, Value};

pub struct RunResult {
    pub stats: ThreadStats,
    pub start_unix_ms: u64,
    pub end_unix_ms: u64,
    pub measured_seconds: f64,
    pub warmup_seconds: f64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    pub interrupted: bool,
    pub configured_connections: u64,
}

impl RunResult {
    pub fn total(&self) -> WindowTally {
        self.stats.total()
    }
    pub fn ops_per_sec(&self) -> f64 {
        self.total().ops as f64 / self.measured_seconds.max(1e-9)
    }

    /// A run's result from its statistics and its measured window (phase.rs).
    pub fn of_window(stats: ThreadStats, w: &crate::phase::Window, warmup_seconds: f64, configured_connections: u64) -> RunResult {
        let start_unix_ms = (w.start_unix * 1000.0) as u64;
        RunResult {
            stats,
            start_unix_ms,
            end_unix_ms: start_unix_ms + (w.seconds * 1000.0) as u64,
            measured_seconds: w.seconds,
            warmup_seconds,
            cpu_user_s: w.cpu_user_s,
            cpu_system_s: w.cpu_system_s,
            interrupted: false,
            configured_connections,
        }
    }

    /// Several runs as one: their tallies summed and their durations too, so that rates are
    /// averages over the runs (memtier's aggregate of --run-count); no per-second series.
    pub fn aggregate(runs: &[RunResult]) -> RunResult {
        let mut stats = ThreadStats::new(runs[0].stats.cmds.len());
        runs.iter().for_each(|r| stats.merge(&r.stats));
        stats.seconds.clear();
        RunResult {
            stats,
            start_unix_ms: runs[0].start_unix_ms,
            end_unix_ms: runs[runs.len() - 1].end_unix_ms,
            measured_seconds: runs.iter().map(|r| r.measured_seconds).sum(),
            warmup_seconds: runs.iter().map(|r| r.warmup_seconds).sum(),
            cpu_user_s: runs.iter().map(|r| r.cpu_user_s).sum(),
            cpu_system_s: runs.iter().map(|r| r.cpu_system_s).sum(),
            interrupted: false,
            configured_connections: runs[0].configured_connections,
        }
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn base64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = ((b[0] as u32) << 16) | ((b[1] as u32) << 8) | b[2] as u32;
        out.push(B64[(n >> 18) as usize & 63] as char);
        out.push(B64[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 { B64[(n >> 6) as usize & 63] as char } else { '=' });
        out.push(if chunk.len() > 2 { B64[n as usize & 63] as char } else { '=' });
    }
    out
}

/// A tally's latency histogram in the standard "HISTFAA..." form: V2 compressed
/// serialization, base64.
pub fn encode_histogram<C: Resolution>(t: &Tally<C>) -> String {
    encode_histogram_of(&t.histogram())
}

pub fn encode_histogram_of<C: Resolution>(h: &hdrhistogram::Histogram<C>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut bytes).expect("histogram serialization");
    base64(&bytes)
}

/// memtier's percentile key: "p%.3f" truncated to 6 characters ("p50.00", "p99.90").
pub fn percentile_key(q: f64) -> String {
    let s = format!("p{:.3}", q);
    s.chars().take(6).collect()
}

fn r2(x: f64) -> Value {
    json!((x * 100.0).round() / 100.0)
}
fn r3(x: f64) -> Value {
    json!((x * 1000.0).round() / 1000.0)
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Which keys a document carries. memtier mode writes memtier's whole set; a role writes the
/// keys its document has always had: no bytes, hit rates or connection errors, no
/// "Interrupted", its own percentiles, and none at all when no event carried a latency.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    Memtier { cluster: bool },
    Role,
}

/// The percentiles a role's document gives: over the window, and per second.
pub const ROLE_PERCENTILES: [f64; 5] = [50.0, 90.0, 99.0, 99.9, 99.99];
const ROLE_SECOND_PERCENTILES: [f64; 2] = [50.0, 99.0];

/// One entry of "ALL STATS" besides Runtime and Totals: a command's tally (`cmd`), or one
/// that is always empty (memtier's "Waits").
pub struct Entry {
    pub name: String,
    pub cmd: Option<usize>,
    pub hits_misses: bool,
}

/// What "ALL STATS" holds and how its tallies are written.
pub struct Layout<'a> {
    pub keys: Keys,
    pub entries: Vec<Entry>,
    pub percentiles: &'a [f64],
    pub second_percentiles: &'a [f64],
}

impl<'a> Layout<'a> {
    pub fn memtier(cfg: &'a Config, wl: &Workload) -> Layout<'a> {
        let mut entries: Vec<Entry> = wl
            .templates
            .iter()
            .enumerate()
            .map(|(i, t)| Entry {
                name: t.stats_name.clone(),
                cmd: Some(i),
                hits_misses: t.reply_use != crate::workload::ReplyUse::None,
            })
            .collect();
        if wl.builtin_ratio.is_some() {
            entries.push(Entry { name: "Waits".into(), cmd: None, hits_misses: false });
        }
        Layout {
            keys: Keys::Memtier { cluster: cfg.cluster_mode },
            entries,
            percentiles: &cfg.print_percentiles,
            second_percentiles: &cfg.print_percentiles,
        }
    }

    /// A role's document: one entry (`name`, e.g. "Messages") besides Totals.
    pub fn role(name: &str) -> Layout<'static> {
        Layout {
            keys: Keys::Role,
            entries: vec![Entry { name: name.to_string(), cmd: Some(0), hits_misses: false }],
            percentiles: &ROLE_PERCENTILES,
            second_percentiles: &ROLE_SECOND_PERCENTILES,
        }
    }
}

fn second_json(s: &SecondTally, keys: Keys, percentiles: &[f64]) -> Value {
    let memtier = keys != Keys::Role;
    let mut m = Map::new();
    if memtier {
        m.insert("Bytes RX".into(), json!(s.bytes_rx));
        m.insert("Bytes TX".into(), json!(s.bytes_tx));
    }
    m.insert("Count".into(), json!(s.ops));
    if s.timed() > 0 {
        if memtier {
            m.insert("Average Latency".into(), r3(s.mean_latency_ms()));
            m.insert("Accumulated Latency".into(), json!(s.latency_sum_ns / 1_000_000));
            m.insert("Min Latency".into(), r3(ms(s.latency_min_ns)));
            m.insert("Max Latency".into(), r3(ms(s.latency_max_ns)));
        }
        for q in percentiles {
            if let Some(v) = s.percentile_ms(*q) {
                m.insert(format!("p{:.2}", q), r3(v));
            }
        }
    }
    Value::Object(m)
}

/// memtier's counts besides the tally's own (a role's document has none of them).
pub struct MemtierCounts {
    /// Cluster mode: MOVED and ASK redirects.
    pub cluster: Option<(u64, u64)>,
    pub connection_errors: u64,
    pub hits_misses: bool,
}

pub struct CmdJsonInput<'a> {
    pub stats: &'a WindowTally,
    pub seconds: Vec<SecondTally>,
    pub duration_s: f64,
    pub layout: &'a Layout<'a>,
    pub memtier: Option<MemtierCounts>,
}

fn cmd_json(i: &CmdJsonInput) -> Value {
    let s = i.stats;
    let d = i.duration_s.max(1e-9);
    let mut m = Map::new();
    m.insert("Count".into(), json!(s.ops));
    m.insert("Ops/sec".into(), r2(s.ops as f64 / d));
    if let Some(mt) = &i.memtier {
        m.insert("Hits/sec".into(), r2(if mt.hits_misses { s.hits as f64 / d } else { 0.0 }));
        m.insert("Misses/sec".into(), r2(if mt.hits_misses { s.misses as f64 / d } else { 0.0 }));
        if let Some((moved, ask)) = mt.cluster {
            m.insert("MOVED/sec".into(), r2(moved as f64 / d));
            m.insert("ASK/sec".into(), r2(ask as f64 / d));
        }
        m.insert("Connection Errors/sec".into(), r2(mt.connection_errors as f64 / d));
        m.insert("Connection Errors".into(), json!(mt.connection_errors));
    }
    let avg = s.mean_latency_ms();
    let has = s.timed() > 0;
    m.insert("Latency".into(), r3(avg));
    m.insert("Average Latency".into(), r3(avg));
    if i.memtier.is_some() {
        m.insert("Accumulated Latency".into(), json!(s.latency_sum_ns / 1_000_000));
    }
    m.insert("Min Latency".into(), r3(if has { ms(s.latency_min_ns) } else { 0.0 }));
    m.insert("Max Latency".into(), r3(if has { ms(s.latency_max_ns) } else { 0.0 }));
    if i.memtier.is_some() {
        let kb = (s.bytes_rx + s.bytes_tx) as f64 / 1024.0 / d;
        m.insert("KB/sec".into(), r2(kb));
        m.insert("KB/sec RX/TX".into(), r2(kb));
        m.insert("KB/sec RX".into(), r2(s.bytes_rx as f64 / 1024.0 / d));
        m.insert("KB/sec TX".into(), r2(s.bytes_tx as f64 / 1024.0 / d));
    }
    let mut ts = Map::new();
    for (sec, st) in i.seconds.iter().enumerate() {
        ts.insert(sec.to_string(), second_json(st, i.layout.keys, i.layout.second_percentiles));
    }
    m.insert("Time-Serie".into(), Value::Object(ts));
    let mut pl = Map::new();
    if i.memtier.is_some() || has {
        for q in i.layout.percentiles {
            pl.insert(percentile_key(*q), r3(s.percentile_ms(*q).unwrap_or(0.0)));
        }
        pl.insert("Histogram log format".into(), json!({"Compressed Histogram": encode_histogram(s)}));
    }
    m.insert("Percentile Latencies".into(), Value::Object(pl));
    Value::Object(m)
}

/// The "ALL STATS"-style object for one run.
pub fn stats_object(layout: &Layout, r: &RunResult) -> Value {
    let mut m = Map::new();
    let mut runtime = json!({
        "Start time": r.start_unix_ms,
        "Finish time": r.end_unix_ms,
        "Total duration": r.end_unix_ms.saturating_sub(r.start_unix_ms),
        "Time unit": "MILLISECONDS",
    });
    if layout.keys != Keys::Role {
        runtime["Interrupted"] = json!(if r.interrupted { "true" } else { "false" });
    }
    m.insert("Runtime".into(), runtime);
    let n_seconds = ((r.measured_seconds - 1e-3).ceil().max(1.0)) as usize;
    let cluster = matches!(layout.keys, Keys::Memtier { cluster: true });
    let empty = WindowTally::default();
    let entry = |stats: &WindowTally, seconds: Vec<SecondTally>, memtier: MemtierCounts| {
        cmd_json(&CmdJsonInput {
            stats,
            seconds,
            duration_s: r.measured_seconds,
            layout,
            memtier: (layout.keys != Keys::Role).then_some(memtier),
        })
    };
    for e in &layout.entries {
        let (stats, seconds) = match e.cmd {
            Some(i) => (&r.stats.cmds[i], r.stats.second_series(Some(i), n_seconds)),
            None => (&empty, vec![SecondTally::default(); n_seconds]),
        };
        let counts = MemtierCounts { cluster: cluster.then_some((0, 0)), connection_errors: 0, hits_misses: e.hits_misses };
        m.insert(e.name.clone(), entry(stats, seconds, counts));
    }
    let counts = MemtierCounts {
        cluster: cluster.then_some((r.stats.moved, r.stats.ask)),
        connection_errors: r.stats.conns.lost,
        hits_misses: true,
    };
    m.insert("Totals".into(), entry(&r.total(), r.stats.second_series(None, n_seconds), counts));
    Value::Object(m)
}

/// What a "redline" object says besides the run's own numbers.
pub struct About<'a> {
    pub latency_from: &'a str,
    pub warnings: &'a [String],
    /// memtier mode: the command line and the workload (hits, misses, the send pattern).
    pub memtier: Option<(&'a Config, &'a Workload)>,
    /// A role: its name and its own counts.
    pub role: Option<(&'a str, &'a Value)>,
    /// The I/O path the run used (`redline.io`).
    pub io: Value,
}

impl<'a> About<'a> {
    pub fn memtier(cfg: &'a Config, wl: &'a Workload, warnings: &'a [String], io: &Decision) -> About<'a> {
        let latency_from = if cfg.rate_limiting.is_some() { "intended_send" } else { "send" };
        About { latency_from, warnings, memtier: Some((cfg, wl)), role: None, io: io.to_json() }
    }
}

/// The send pattern of a memtier-mode run (`redline.send_pattern`).
fn send_pattern(cfg: &Config, wl: &Workload) -> Value {
    json!({
        "pipeline": cfg.pipeline,
        "threads": cfg.threads,
        "clients_per_thread": cfg.clients,
        "rate_limit_per_conn": cfg.rate_limiting,
        "time_based": cfg.is_time_based(),
        "test_time": cfg.test_time,
        "requests": match cfg.requests {
            crate::cli::Requests::PerClient(n) => json!(n),
            crate::cli::Requests::AllKeys => json!("allkeys"),
            crate::cli::Requests::Unset => Value::Null,
        },
        "protocol": if cfg.protocol == crate::cli::Protocol::Resp3 { "resp3" } else { "resp2" },
        "cluster_mode": cfg.cluster_mode,
        "commands": wl.templates.iter().filter(|t| t.executable).map(|t| json!({
            "name": t.stats_name, "type": t.command_type, "ratio": t.ratio,
            "key_pattern": t.key_pattern.letter().to_string()})).collect::<Vec<_>>(),
    })
}

pub fn redline_object(r: &RunResult, about: &About) -> Value {
    let total = r.total();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let errors: Map<String, Value> = r.stats.errors.iter().map(|(k, n)| (text(k), json!(n))).collect();
    let error_examples: Map<String, Value> =
        r.stats.error_examples.iter().map(|(k, line)| (text(k), json!(text(line)))).collect();
    let mut m = Map::new();
    m.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    if let Some((role, _)) = about.role {
        m.insert("role".into(), json!(role));
    }
    m.insert("warmup_seconds".into(), json!(r.warmup_seconds));
    m.insert("measured_seconds".into(), json!(r.measured_seconds));
    m.insert("latency_measured_from".into(), json!(about.latency_from));
    m.insert("latency_unit_histogram".into(), json!("microseconds"));
    m.insert("client_cpu".into(), json!({"user_s": r.cpu_user_s, "system_s": r.cpu_system_s}));
    m.insert("io".into(), about.io.clone());
    m.insert(
        "connections".into(),
        json!({
            "configured": r.configured_connections,
            "opened": r.stats.conns.opened,
            "reconnects": r.stats.conns.reconnects,
            "lost": r.stats.conns.lost,
        }),
    );
    m.insert("ops".into(), json!(total.ops));
    if let Some((_, wl)) = about.memtier {
        let builtin = wl.builtin_ratio.is_some();
        let (hits, misses) = if builtin { (total.hits, total.misses) } else { (r.stats.value_replies, r.stats.null_replies) };
        m.insert("hits".into(), json!(hits));
        m.insert("misses".into(), json!(misses));
        m.insert(
            "hits_counted_as".into(),
            json!(if builtin {
                "GET replies that are not null (memtier)"
            } else {
                "non-null, non-error replies of every command; misses are null replies"
            }),
        );
    }
    m.insert("errors".into(), Value::Object(errors));
    m.insert("error_examples".into(), Value::Object(error_examples));
    if let Some((cfg, wl)) = about.memtier {
        m.insert("send_pattern".into(), send_pattern(cfg, wl));
    }
    m.insert("warnings".into(), json!(about.warnings));
    if let Some((_, counts)) = about.role {
        m.insert("role_counts".into(), counts.clone());
    }
    Value::Object(m)
}

/// The whole --json-out-file document of memtier mode: one run, or with --run-count memtier's
/// best, worst and aggregate.
pub fn memtier_document(cfg: &Config, wl: &Workload, runs: &[RunResult], warnings: &[String], io: &Decision) -> Value {
    let layout = Layout::memtier(cfg, wl);
    let about = About::memtier(cfg, wl, warnings, io);
    let mut root = Map::new();
    root.insert("configuration".into(), config_object(cfg));
    if runs.len() == 1 {
        root.insert("ALL STATS".into(), stats_object(&layout, &runs[0]));
        root.insert("redline".into(), redline_object(&runs[0], &about));
    } else {
        let best = (0..runs.len()).max_by(|a, b| runs[*a].ops_per_sec().total_cmp(&runs[*b].ops_per_sec())).unwrap();
        let worst = (0..runs.len()).min_by(|a, b| runs[*a].ops_per_sec().total_cmp(&runs[*b].ops_per_sec())).unwrap();
        root.insert("BEST RUN RESULTS".into(), stats_object(&layout, &runs[best]));
        root.insert("WORST RUN RESULTS".into(), stats_object(&layout, &runs[worst]));
        let agg = RunResult::aggregate(runs);
        root.insert(format!("AGGREGATED AVERAGE RESULTS ({} runs)", runs.len()), stats_object(&layout, &agg));
        let mut rl = redline_object(&agg, &about);
        let each = About { warnings: &[], io: about.io.clone(), ..about };
        rl["runs"] = json!(runs.iter().map(|r| redline_object(r, &each)).collect::<Vec<_>>());
        root.insert("redline".into(), rl);
    }
    Value::Object(root)
}

/// The whole document of a role (`--role`): its flags as the configuration, its events as one
/// entry `name` besides Totals, and its own counts in `redline.role_counts`.
pub fn role_document(configuration: Value, name: &str, r: &RunResult, about: &About) -> Value {
    json!({
        "configuration": configuration,
        "ALL STATS": stats_object(&Layout::role(name), r),
        "redline": redline_object(r, about),
    })
}

pub fn config_object(cfg: &Config) -> Value {
    json!({
        "server": cfg.server,
        "port": cfg.port,
        "unix socket": cfg.unix_socket,
        "protocol": if cfg.protocol == crate::cli::Protocol::Resp3 { "resp3" } else { "redis" },
        "clients": cfg.clients,
        "threads": cfg.threads,
        "pipeline": cfg.pipeline,
        "test_time": cfg.test_time.unwrap_or(0),
        "ratio": format!("{}:{}", cfg.ratio.0, cfg.ratio.1),
        "key_prefix": cfg.key_prefix,
        "key_minimum": cfg.key_minimum,
        "key_maximum": cfg.key_maximum,
        "key_pattern": format!("{}:{}", cfg.key_pattern.0.letter(), cfg.key_pattern.1.letter()),
        "run_count": cfg.run_count,
        "cluster_mode": cfg.cluster_mode,
        "rate_limiting": cfg.rate_limiting.unwrap_or(0),
    })
}

/// memtier-style text table of one run.
pub fn format_table(cfg: &Config, wl: &Workload, r: &RunResult, header: &str) -> String {
    let mut out = String::new();
    out.push_str(&format!("\n{header}\n"));
    let mut line = format!("{:<12}{:>14}{:>14}{:>14}{:>14}", "Type", "Ops/sec", "Hits/sec", "Misses/sec", "Avg. Latency");
    for q in &cfg.print_percentiles {
        line.push_str(&format!("{:>14}", format!("p{} Latency", q)));
    }
    line.push_str(&format!("{:>14}\n", "KB/sec"));
    out.push_str(&line);
    out.push_str(&"-".repeat(line.len().saturating_sub(1)));
    out.push('\n');
    let d = r.measured_seconds.max(1e-9);
    let mut rows: Vec<(String, WindowTally, bool)> = wl
        .templates
        .iter()
        .enumerate()
        .map(|(i, t)| (t.stats_name.clone(), r.stats.cmds[i].clone(), t.reply_use != crate::workload::ReplyUse::None))
        .collect();
    rows.push(("Totals".into(), r.total(), true));
    for (name, s, hm) in rows {
        let mut l = format!(
            "{:<12}{:>14.2}{:>14.2}{:>14.2}{:>14.5}",
            name,
            s.ops as f64 / d,
            if hm { s.hits as f64 / d } else { 0.0 },
            if hm { s.misses as f64 / d } else { 0.0 },
            s.mean_latency_ms()
        );
        for q in &cfg.print_percentiles {
            l.push_str(&format!("{:>14.5}", s.percentile_ms(*q).unwrap_or(0.0)));
        }
        l.push_str(&format!("{:>14.2}\n", (s.bytes_rx + s.bytes_tx) as f64 / 1024.0 / d));
        out.push_str(&l);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_known_vectors() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn percentile_keys_like_memtier() {
        assert_eq!(percentile_key(50.0), "p50.00");
        assert_eq!(percentile_key(99.9), "p99.90");
        assert_eq!(percentile_key(99.99), "p99.99");
        assert_eq!(percentile_key(100.0), "p100.0");
    }

    #[test]
    fn histogram_encoding_starts_like_hdr_tools() {
        let mut t = WindowTally::default();
        t.record(&crate::stats::Completion {
            cmd: 0,
            latency_ns: 100_000,
            bytes_rx: 5,
            bytes_tx: 20,
            reply: crate::resp::ReplyKind::Value,
            error_line: b"",
            counts_hits: false,
        });
        assert!(encode_histogram(&t).starts_with("HISTF"));
    }
}

/// The whole --json-out-file document for fixed inputs, compared with a stored copy, so that a
/// change to how statistics are tallied or written cannot alter one byte unnoticed.
/// After an intended change of the output: `REDLINE_UPDATE_GOLDEN=1 cargo test golden`.
#[cfg(test)]
mod golden {
    use crate::cli::parse_args;
    use crate::resp::ReplyKind;
    use crate::stats::{Completion, ThreadStats};
    use crate::workload::{build_workload, ReplyUse, Workload};

    /// A deterministic stream of replies over three seconds, tallied as a worker does.
    fn tally(wl: &Workload, seed: u64) -> ThreadStats {
        let mut stats = ThreadStats::new(wl.templates.len());
        for i in 0..3000u64 {
            let cmd = (i % wl.templates.len() as u64) as usize;
            let kind = match (i * 7 + seed) % 11 {
                0 => ReplyKind::Error,
                1..=3 => ReplyKind::Null,
                _ => ReplyKind::Value,
            };
            let completion = Completion {
                cmd,
                latency_ns: 20_000 + (i * i * 7919 + seed * 104_729) % 3_000_000,
                bytes_rx: 5 + i % 40,
                bytes_tx: 30 + i % 17,
                reply: kind,
                error_line: if i % 2 == 0 { b"ERR odd thing" } else { b"WRONGTYPE no" },
                counts_hits: wl.templates[cmd].reply_use != ReplyUse::None,
            };
            stats.record(&completion, (i / 1000) as usize);
        }
        stats.conns.opened = 4;
        stats.conns.lost = seed;
        stats.moved = 3 * seed;
        stats.ask = seed;
        stats
    }

    fn run(wl: &Workload, seed: u64) -> super::RunResult {
        super::RunResult {
            stats: tally(wl, seed),
            start_unix_ms: 1_700_000_000_000 + seed * 5000,
            end_unix_ms: 1_700_000_003_000 + seed * 5000,
            measured_seconds: 2.9 + seed as f64 / 10.0,
            warmup_seconds: 0.5,
            cpu_user_s: 0.25 * seed as f64,
            cpu_system_s: 0.125,
            interrupted: false,
            configured_connections: 4,
        }
    }

    fn document(args: &[&str], runs: u64) -> String {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let cfg = parse_args(&args).unwrap_or_else(|_| panic!("arguments {args:?}"));
        let wl = build_workload(&cfg).expect("workload");
        let runs: Vec<_> = (1..=runs).map(|seed| run(&wl, seed)).collect();
        let io = crate::iopath::Decision { path: crate::iopath::Path::IoUring, requested: crate::io_choice::Choice::Auto, note: None };
        let doc = super::memtier_document(&cfg, &wl, &runs, &["a warning".to_string()], &io);
        let mut text = serde_json::to_string_pretty(&doc).expect("json");
        for r in &runs {
            text.push_str(&super::format_table(&cfg, &wl, r, "TABLE"));
        }
        text
    }

    fn check(name: &str, text: &str) {
        // cargo test sets CARGO_MANIFEST_DIR when it runs the test, to the checkout it runs from: a
        // target directory shared by two checkouts may hold a binary compiled in the other one
        let root = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
        let path = format!("{root}/testdata/{name}");
        if std::env::var_os("REDLINE_UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, text).expect("write golden file");
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(want == text, "{path} differs from this output:\n{text}");
    }

    #[test]
    fn golden_builtin_mix_one_run() {
        check("builtin-one-run.txt", &document(&["--test-time=3", "--ratio=1:3"], 1));
    }

    #[test]
    fn golden_cluster_two_runs() {
        check(
            "cluster-two-runs.txt",
            &document(&["--cluster-mode", "-n", "1000", "--run-count=2", "--print-percentiles=50,90,99.99"], 2),
        );
    }

    /// A role's document: events over three seconds of a 2.9 s window, half a second of them
    /// outside it; with `timed`, each carries a latency.
    fn role_document(name: &'static str, timed: bool) -> String {
        use crate::phase::{Shared, Window};
        use crate::roles::measure::Recorder;
        use std::sync::atomic::{AtomicU64, AtomicU8};
        let shared = Shared {
            phase: AtomicU8::new(crate::phase::PHASE_MEASURE),
            base: std::time::Instant::now(),
            measure_start_ns: AtomicU64::new(1_500_000_000),
            measure_end_ns: AtomicU64::new(4_400_000_000),
            progress: vec![Default::default()],
        };
        let mut recorder = Recorder::new(&shared);
        for i in 0..4000u64 {
            let at_ns = 1_000_000 * i + 400_000;
            recorder.record(at_ns, timed.then(|| 20_000 + (i * i * 7919) % 3_000_000));
        }
        let mut stats = recorder.stats;
        stats.conns.opened = 10;
        stats.conns.lost = 1;
        let window = Window { start_unix: 1_700_000_001.75, seconds: 2.9, cpu_user_s: 0.75, cpu_system_s: 0.125 };
        let run = super::RunResult::of_window(stats, &window, 1.5, 10);
        let counts = serde_json::json!({"enqueued": 3100, "exactly_once": true});
        let warnings = ["a warning".to_string()];
        let about = super::About {
            latency_from: "enqueue (the job's own enqueue time)",
            warnings: &warnings,
            memtier: None,
            role: Some(("sidekiq-bench", &counts)),
            io: serde_json::json!({"path": "blocking", "requested": null, "note": "roles keep their own I/O"}),
        };
        let configuration = serde_json::json!({"role": "sidekiq-bench", "workers": "8", "window": "2.9"});
        serde_json::to_string_pretty(&super::role_document(configuration, name, &run, &about)).expect("json")
    }

    #[test]
    fn golden_role_with_latencies() {
        check("role-jobs.txt", &role_document("Jobs", true));
    }

    #[test]
    fn golden_role_without_latencies() {
        check("role-invalidations.txt", &role_document("Invalidations", false));
    }

    #[test]
    fn golden_commands() {
        let args = ["--command=SET __key__ __data__", "--command=GET __key__", "--command=HGETALL __key__",
                    "--test-time=3"];
        check("commands.txt", &document(&args, 1));
    }
}
