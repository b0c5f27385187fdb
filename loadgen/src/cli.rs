//! memtier_benchmark-compatible command line parsing.
//!
//! Semantics follow memtier's getopt_long: `--name=value`, `--name value`, `-x value`,
//! `-xvalue`, unique prefixes of long names; a single-valued option given twice keeps the
//! last value; `--command` accumulates and `--command-ratio` / `--command-key-pattern` apply
//! to the most recent `--command`.

use crate::tls::TlsOptions;
use std::fmt;

#[derive(Debug)]
pub enum CliError {
    /// Usage error: message printed after "redline-load: ", exit code 2.
    Usage(String),
    /// `--help` or `--version` was requested: text printed to stdout, exit 0.
    Info(String),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Info(m) => f.write_str(m),
        }
    }
}

fn usage<T>(msg: impl Into<String>) -> Result<T, CliError> {
    Err(CliError::Usage(msg.into()))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Resp2,
    Resp3,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyPattern {
    Random,
    Sequential,
    Gaussian,
    Parallel,
    Zipf,
}

impl KeyPattern {
    pub fn parse(s: &str) -> Option<KeyPattern> {
        match s {
            "R" => Some(KeyPattern::Random),
            "S" => Some(KeyPattern::Sequential),
            "G" => Some(KeyPattern::Gaussian),
            "P" => Some(KeyPattern::Parallel),
            "Z" => Some(KeyPattern::Zipf),
            _ => None,
        }
    }
    pub fn letter(self) -> char {
        match self {
            KeyPattern::Random => 'R',
            KeyPattern::Sequential => 'S',
            KeyPattern::Gaussian => 'G',
            KeyPattern::Parallel => 'P',
            KeyPattern::Zipf => 'Z',
        }
    }
}

/// memtier's request count per connection when neither -n nor --test-time is given.
pub const DEFAULT_REQUESTS: u64 = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requests {
    /// Not given: time-based if --test-time, else memtier's default of 10000 per client.
    Unset,
    PerClient(u64),
    AllKeys,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataSize {
    Fixed(u32),
    Range { min: u32, max: u32 },
}

#[derive(Clone, Debug)]
pub struct CommandSpec {
    pub text: String,
    pub ratio: u32,
    pub key_pattern: KeyPattern,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub server: String,
    pub port: u16,
    pub unix_socket: Option<String>,
    /// -4 / -6: which address family to use when the server name resolves to both.
    pub ip_family: Option<u8>,
    pub protocol: Protocol,
    pub authenticate: Option<String>,
    pub select_db: Option<u32>,
    pub tls: TlsOptions,
    pub cluster_mode: bool,
    pub clients: u32,
    pub threads: u32,
    pub pipeline: u32,
    pub requests: Requests,
    pub test_time: Option<u64>,
    pub warmup_time: f64,
    pub run_count: u32,
    pub ratio: (u32, u32),
    pub key_pattern: (KeyPattern, KeyPattern),
    pub key_minimum: u64,
    pub key_maximum: u64,
    pub key_prefix: String,
    pub key_stddev: Option<f64>,
    pub key_median: Option<f64>,
    pub key_zipf_exp: f64,
    pub data_size: DataSize,
    pub data_size_pattern_sequential: bool,
    pub random_data: bool,
    pub commands: Vec<CommandSpec>,
    pub distinct_client_seed: bool,
    pub randomize: bool,
    pub rate_limiting: Option<u32>,
    pub reconnect_interval: Option<u64>,
    /// Lost connections are reconnected either way; without this flag they fail the run.
    pub reconnect_on_error: bool,
    pub conn_start_min_jitter_us: u64,
    pub conn_start_max_jitter_us: u64,
    pub scan_incremental_iteration: bool,
    pub scan_incremental_max_iterations: u64,
    pub print_percentiles: Vec<f64>,
    pub hide_histogram: bool,
    pub json_out_file: Option<String>,
    pub hdr_file_prefix: Option<String>,
    pub out_file: Option<String>,
    pub events: bool,
    pub debug: bool,
    pub show_config: bool,
    pub warnings: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            server: "localhost".into(),
            port: 6379,
            unix_socket: None,
            ip_family: None,
            protocol: Protocol::Resp2,
            authenticate: None,
            select_db: None,
            tls: TlsOptions::default(),
            cluster_mode: false,
            clients: 50,
            threads: 4,
            pipeline: 1,
            requests: Requests::Unset,
            test_time: None,
            warmup_time: 0.0,
            run_count: 1,
            ratio: (1, 10),
            key_pattern: (KeyPattern::Random, KeyPattern::Random),
            key_minimum: 0,
            key_maximum: 10_000_000,
            key_prefix: "memtier-".into(),
            key_stddev: None,
            key_median: None,
            key_zipf_exp: 1.0,
            data_size: DataSize::Fixed(32),
            data_size_pattern_sequential: false,
            random_data: false,
            commands: Vec::new(),
            distinct_client_seed: false,
            randomize: false,
            rate_limiting: None,
            reconnect_interval: None,
            reconnect_on_error: false,
            conn_start_min_jitter_us: 0,
            conn_start_max_jitter_us: 0,
            scan_incremental_iteration: false,
            scan_incremental_max_iterations: 0,
            print_percentiles: vec![50.0, 99.0, 99.9],
            hide_histogram: false,
            json_out_file: None,
            hdr_file_prefix: None,
            out_file: None,
            events: false,
            debug: false,
            show_config: false,
            warnings: Vec::new(),
        }
    }
}

impl Config {
    /// Requests per client for request-count runs (`None` for time-based runs).
    pub fn is_time_based(&self) -> bool {
        self.test_time.is_some()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Arg {
    None,
    Required,
}

/// (long name, short letter, argument)
const OPTIONS: &[(&str, Option<char>, Arg)] = &[
    ("server", Some('s'), Arg::Required),
    ("host", Some('h'), Arg::Required),
    ("port", Some('p'), Arg::Required),
    ("unix-socket", Some('S'), Arg::Required),
    ("ipv4", Some('4'), Arg::None),
    ("ipv6", Some('6'), Arg::None),
    ("protocol", Some('P'), Arg::Required),
    ("uri", Some('u'), Arg::Required),
    ("tls", None, Arg::None),
    ("cert", None, Arg::Required),
    ("key", None, Arg::Required),
    ("cacert", None, Arg::Required),
    ("tls-skip-verify", None, Arg::None),
    ("sni", None, Arg::Required),
    ("tls-protocols", None, Arg::Required),
    ("out-file", Some('o'), Arg::Required),
    ("hdr-file-prefix", None, Arg::Required),
    ("run-count", Some('x'), Arg::Required),
    ("debug", Some('D'), Arg::None),
    ("show-config", None, Arg::None),
    ("hide-histogram", None, Arg::None),
    ("print-percentiles", None, Arg::Required),
    ("distinct-client-seed", None, Arg::None),
    ("randomize", None, Arg::None),
    ("requests", Some('n'), Arg::Required),
    ("clients", Some('c'), Arg::Required),
    ("threads", Some('t'), Arg::Required),
    ("test-time", None, Arg::Required),
    ("ratio", None, Arg::Required),
    ("pipeline", None, Arg::Required),
    ("data-size", Some('d'), Arg::Required),
    ("random-data", Some('R'), Arg::None),
    ("data-size-range", None, Arg::Required),
    ("data-size-pattern", None, Arg::Required),
    ("key-prefix", None, Arg::Required),
    ("key-minimum", None, Arg::Required),
    ("key-maximum", None, Arg::Required),
    ("key-pattern", None, Arg::Required),
    ("key-stddev", None, Arg::Required),
    ("key-median", None, Arg::Required),
    ("key-zipf-exp", None, Arg::Required),
    ("reconnect-interval", None, Arg::Required),
    ("reconnect-on-error", None, Arg::None),
    ("thread-conn-start-min-jitter-micros", None, Arg::Required),
    ("thread-conn-start-max-jitter-micros", None, Arg::Required),
    ("authenticate", Some('a'), Arg::Required),
    ("select-db", None, Arg::Required),
    ("json-out-file", None, Arg::Required),
    ("cluster-mode", None, Arg::None),
    ("help", None, Arg::None),
    ("version", Some('v'), Arg::None),
    ("command", None, Arg::Required),
    ("command-key-pattern", None, Arg::Required),
    ("command-ratio", None, Arg::Required),
    ("rate-limiting", None, Arg::Required),
    ("scan-incremental-iteration", None, Arg::None),
    ("scan-incremental-max-iterations", None, Arg::Required),
    // redline extensions
    ("warmup-time", None, Arg::Required),
    ("events", None, Arg::None),
];

/// memtier options that redline-load recognises but does not implement: an explicit error
/// rather than silently ignoring them.
const UNSUPPORTED: &[&str] = &[
    "client-stats", "print-all-runs", "data-offset", "data-size-list", "expiry-range",
    "data-import", "data-verify", "verify-only", "generate-keys",
    "max-reconnect-attempts", "reconnect-backoff-factor", "connection-timeout",
    "multi-key-get", "no-expiry", "wait-ratio", "num-slaves", "wait-timeout",
    "monitor-input", "monitor-pattern", "command-stats-breakdown", "statsd-host",
    "statsd-port", "statsd-prefix", "statsd-run-label", "graphite-port", "clients-start",
    "clients-step", "step-duration",
];

pub const HELP: &str = "Usage: redline-load [options]\n\
A memtier_benchmark-compatible load generator (see docs/loadgen.md).\n\
Connection: -s/--server, -p/--port, -S/--unix-socket, -P/--protocol resp2|resp3|redis,\n\
  -a/--authenticate, --select-db, --cluster-mode, --tls --cert --key --cacert --tls-skip-verify --sni\n\
Test: -n/--requests N|allkeys, --test-time SECS, -c/--clients, -t/--threads, --pipeline,\n\
  --ratio SET:GET, --rate-limiting N, --reconnect-interval N, --reconnect-on-error,\n\
  -x/--run-count, \
  --thread-conn-start-min-jitter-micros, --thread-conn-start-max-jitter-micros\n\
Objects: -d/--data-size, --data-size-range MIN-MAX, --data-size-pattern R|S, -R/--random-data,\n\
  --key-prefix, --key-minimum, --key-maximum, --key-pattern SET:GET (R,S,G,P,Z),\n\
  --key-stddev, --key-median, --key-zipf-exp, --distinct-client-seed, --randomize\n\
Commands: --command \"CMD __key__ __data__\" (repeatable), --command-ratio, --command-key-pattern,\n\
  --scan-incremental-iteration, --scan-incremental-max-iterations\n\
Output: --json-out-file, --hide-histogram, --print-percentiles, --hdr-file-prefix, -o/--out-file\n\
redline: --warmup-time SECS, --events\n";

fn parse_u64(name: &str, v: &str) -> Result<u64, CliError> {
    v.trim().parse::<u64>().or_else(|_| usage(format!("--{name}: expected a non-negative integer, got '{v}'")))
}

fn parse_positive(name: &str, v: &str) -> Result<u64, CliError> {
    let n = parse_u64(name, v)?;
    if n == 0 {
        return usage(format!("--{name}: must be greater than zero"));
    }
    Ok(n)
}

fn parse_u32_positive(name: &str, v: &str) -> Result<u32, CliError> {
    let n = parse_positive(name, v)?;
    u32::try_from(n).or_else(|_| usage(format!("--{name}: value {v} is too large")))
}

fn parse_f64(name: &str, v: &str) -> Result<f64, CliError> {
    match v.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => usage(format!("--{name}: expected a number, got '{v}'")),
    }
}

fn parse_ratio(v: &str) -> Result<(u32, u32), CliError> {
    let bad = || usage(format!("--ratio: must be expressed as [0-n]:[0-n], got '{v}'"));
    let (a, b) = match v.split_once(':') {
        Some(p) => p,
        None => return bad(),
    };
    match (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
        (Ok(a), Ok(b)) if a > 0 || b > 0 => Ok((a, b)),
        _ => bad(),
    }
}

fn parse_key_pattern(v: &str) -> Result<(KeyPattern, KeyPattern), CliError> {
    let bad = || usage(format!("--key-pattern: must be SET:GET with each one of R, S, G, P, Z; got '{v}'"));
    let (a, b) = match v.split_once(':') {
        Some(p) => p,
        None => return bad(),
    };
    match (KeyPattern::parse(a), KeyPattern::parse(b)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => bad(),
    }
}

fn parse_percentiles(v: &str) -> Result<Vec<f64>, CliError> {
    let mut out = Vec::new();
    for part in v.split(',') {
        match part.trim().parse::<f64>() {
            Ok(q) if (0.0..=100.0).contains(&q) => out.push(q),
            _ => {
                return usage(format!(
                    "--print-percentiles: quantiles must be expressed as [0.0-100.0],[0.0-100.0](,...); got '{v}'"
                ))
            }
        }
    }
    Ok(out)
}

fn parse_data_size_range(v: &str) -> Result<DataSize, CliError> {
    let bad = || usage(format!("--data-size-range: must be MIN-MAX with 0 < MIN <= MAX, got '{v}'"));
    let (a, b) = match v.split_once('-') {
        Some(p) => p,
        None => return bad(),
    };
    match (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
        (Ok(min), Ok(max)) if min > 0 && min <= max => Ok(DataSize::Range { min, max }),
        _ => bad(),
    }
}

/// Resolve a long option name (possibly an unambiguous prefix, as getopt_long allows).
fn resolve_long(name: &str) -> Result<(&'static str, Arg), CliError> {
    if let Some(o) = OPTIONS.iter().find(|o| o.0 == name) {
        return Ok((o.0, o.2));
    }
    if let Some(u) = UNSUPPORTED.iter().find(|u| **u == name) {
        return usage(format!("option '--{u}' is not supported by redline-load"));
    }
    let matches: Vec<_> = OPTIONS.iter().filter(|o| o.0.starts_with(name)).collect();
    match matches.len() {
        1 => Ok((matches[0].0, matches[0].2)),
        0 => usage(format!("unknown option '--{name}'")),
        _ => usage(format!("option '--{name}' is ambiguous")),
    }
}

fn resolve_short(c: char) -> Result<(&'static str, Arg), CliError> {
    match OPTIONS.iter().find(|o| o.1 == Some(c)) {
        Some(o) => Ok((o.0, o.2)),
        None => usage(format!("unknown option '-{c}'")),
    }
}

/// Parse argv (without the program name).
pub fn parse_args(args: &[String]) -> Result<Config, CliError> {
    let mut cfg = Config::default();
    let mut data_size_fixed: Option<u32> = None;
    let mut data_size_range: Option<DataSize> = None;
    let mut given: Vec<&'static str> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        let mut pending: Vec<(&'static str, Option<String>)> = Vec::new();
        if let Some(body) = arg.strip_prefix("--") {
            if body.is_empty() {
                // getopt stops at "--"; memtier_benchmark never looks at what follows.
                args[i..].iter().for_each(|a| cfg.warnings.push(stray_argument(a)));
                break;
            }
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            let (full, kind) = resolve_long(name)?;
            let value = match (kind, inline) {
                (Arg::None, Some(_)) => return usage(format!("option '--{full}' doesn't allow an argument")),
                (Arg::None, None) => None,
                (Arg::Required, Some(v)) => Some(v),
                (Arg::Required, None) => {
                    if i >= args.len() {
                        return usage(format!("option '--{full}' requires an argument"));
                    }
                    i += 1;
                    Some(args[i - 1].clone())
                }
            };
            pending.push((full, value));
        } else if arg.len() > 1 && arg.starts_with('-') {
            let chars: Vec<char> = arg[1..].chars().collect();
            let mut j = 0;
            while j < chars.len() {
                let (full, kind) = resolve_short(chars[j])?;
                j += 1;
                if kind == Arg::Required {
                    let rest: String = chars[j..].iter().collect();
                    let value = if !rest.is_empty() {
                        rest
                    } else {
                        if i >= args.len() {
                            return usage(format!("option '-{}' requires an argument", chars[j - 1]));
                        }
                        i += 1;
                        args[i - 1].clone()
                    };
                    pending.push((full, Some(value)));
                    break;
                }
                pending.push((full, None));
            }
        } else {
            cfg.warnings.push(stray_argument(arg));
            continue;
        }

        for (name, value) in pending {
            given.push(name);
            let v = value.unwrap_or_default();
            match name {
                "server" | "host" => cfg.server = v,
                "port" => {
                    cfg.port = match v.trim().parse::<u16>() {
                        Ok(p) if p > 0 => p,
                        _ => return usage(format!("--port: expected 1-65535, got '{v}'")),
                    }
                }
                "unix-socket" => cfg.unix_socket = Some(v),
                "ipv4" => cfg.ip_family = Some(4),
                "ipv6" => cfg.ip_family = Some(6),
                "protocol" => {
                    cfg.protocol = match v.as_str() {
                        "redis" | "resp2" => Protocol::Resp2,
                        "resp3" => Protocol::Resp3,
                        _ => {
                            return usage(format!(
                                "--protocol: '{v}' is not supported (use redis, resp2 or resp3)"
                            ))
                        }
                    }
                }
                "uri" => parse_uri(&mut cfg, &v)?,
                "tls" => cfg.tls.enabled = true,
                "cert" => cfg.tls.cert = Some(v),
                "key" => cfg.tls.key = Some(v),
                "cacert" => cfg.tls.cacert = Some(v),
                "tls-skip-verify" => cfg.tls.skip_verify = true,
                "sni" => cfg.tls.sni = Some(v),
                "tls-protocols" => cfg.tls.protocols = Some(v),
                "out-file" => cfg.out_file = Some(v),
                "hdr-file-prefix" => cfg.hdr_file_prefix = Some(v),
                "run-count" => cfg.run_count = parse_u32_positive(name, &v)?,
                "debug" => cfg.debug = true,
                "show-config" => cfg.show_config = true,
                "hide-histogram" => cfg.hide_histogram = true,
                "print-percentiles" => cfg.print_percentiles = parse_percentiles(&v)?,
                "distinct-client-seed" => cfg.distinct_client_seed = true,
                "randomize" => cfg.randomize = true,
                "requests" => {
                    if v == "allkeys" {
                        cfg.requests = Requests::AllKeys;
                    } else {
                        cfg.requests = Requests::PerClient(parse_positive(name, &v)?);
                        if cfg.test_time.is_some() {
                            return usage("--test-time and --requests are mutually exclusive");
                        }
                    }
                }
                "clients" => cfg.clients = parse_u32_positive(name, &v)?,
                "threads" => cfg.threads = parse_u32_positive(name, &v)?,
                "test-time" => {
                    cfg.test_time = Some(parse_positive(name, &v)?);
                    if cfg.requests != Requests::Unset {
                        return usage("--test-time and --requests are mutually exclusive");
                    }
                }
                "ratio" => cfg.ratio = parse_ratio(&v)?,
                "pipeline" => cfg.pipeline = parse_u32_positive(name, &v)?,
                "data-size" => data_size_fixed = Some(parse_u32_positive(name, &v)?),
                "random-data" => cfg.random_data = true,
                "data-size-range" => data_size_range = Some(parse_data_size_range(&v)?),
                "data-size-pattern" => {
                    cfg.data_size_pattern_sequential = match v.as_str() {
                        "R" => false,
                        "S" => true,
                        _ => return usage(format!("--data-size-pattern: must be R or S, got '{v}'")),
                    }
                }
                "key-prefix" => cfg.key_prefix = v,
                "key-minimum" => cfg.key_minimum = parse_u64(name, &v)?,
                "key-maximum" => cfg.key_maximum = parse_positive(name, &v)?,
                "key-pattern" => cfg.key_pattern = parse_key_pattern(&v)?,
                "key-stddev" => cfg.key_stddev = Some(parse_f64(name, &v)?),
                "key-median" => cfg.key_median = Some(parse_f64(name, &v)?),
                "key-zipf-exp" => {
                    let e = parse_f64(name, &v)?;
                    if !(0.0..=5.0).contains(&e) {
                        return usage(format!("--key-zipf-exp: must be within 0 and 5, got '{v}'"));
                    }
                    cfg.key_zipf_exp = e;
                }
                "reconnect-interval" => cfg.reconnect_interval = Some(parse_positive(name, &v)?),
                "reconnect-on-error" => cfg.reconnect_on_error = true,
                "thread-conn-start-min-jitter-micros" => cfg.conn_start_min_jitter_us = parse_u64(name, &v)?,
                "thread-conn-start-max-jitter-micros" => cfg.conn_start_max_jitter_us = parse_u64(name, &v)?,
                "authenticate" => cfg.authenticate = Some(v),
                "select-db" => cfg.select_db = Some(parse_u64(name, &v)? as u32),
                "json-out-file" => cfg.json_out_file = Some(v),
                "cluster-mode" => cfg.cluster_mode = true,
                "help" => return Err(CliError::Info(HELP.to_string())),
                "version" => {
                    return Err(CliError::Info(format!("redline-load {}\n", env!("CARGO_PKG_VERSION"))))
                }
                "command" => cfg.commands.push(CommandSpec {
                    text: v,
                    ratio: 1,
                    key_pattern: KeyPattern::Random,
                }),
                "command-key-pattern" => {
                    let last = match cfg.commands.last_mut() {
                        Some(c) => c,
                        None => return usage("--command-key-pattern given before any --command"),
                    };
                    last.key_pattern = match KeyPattern::parse(v.trim()) {
                        Some(p) => p,
                        None => {
                            return usage(format!(
                                "--command-key-pattern: must be one of R, S, G, P, Z; got '{v}' (for command '{}')",
                                last.text
                            ))
                        }
                    };
                }
                "command-ratio" => {
                    let last = match cfg.commands.last_mut() {
                        Some(c) => c,
                        None => return usage("--command-ratio given before any --command"),
                    };
                    last.ratio = match v.trim().parse::<u32>() {
                        Ok(r) => r,
                        Err(_) => {
                            return usage(format!(
                                "--command-ratio: expected a non-negative integer, got '{v}' (for command '{}')",
                                last.text
                            ))
                        }
                    };
                }
                "rate-limiting" => cfg.rate_limiting = Some(parse_u32_positive(name, &v)?),
                "scan-incremental-iteration" => cfg.scan_incremental_iteration = true,
                "scan-incremental-max-iterations" => cfg.scan_incremental_max_iterations = parse_u64(name, &v)?,
                "warmup-time" => {
                    let w = parse_f64(name, &v)?;
                    if w < 0.0 {
                        return usage(format!("--warmup-time: must be >= 0, got '{v}'"));
                    }
                    cfg.warmup_time = w;
                }
                "events" => cfg.events = true,
                other => return usage(format!("internal: unhandled option '--{other}'")),
            }
        }
    }

    // Data size: a range wins over the fixed size (as in memtier, where the range is checked
    // after the fixed size when building the object generator).
    if let Some(r) = data_size_range {
        cfg.data_size = r;
    } else if let Some(d) = data_size_fixed {
        cfg.data_size = DataSize::Fixed(d);
    }
    refuse_as_memtier(&cfg, &given)?;
    validate(&mut cfg)?;
    Ok(cfg)
}

/// memtier_benchmark's getopt moves non-option arguments to the end and memtier never reads
/// them, so it runs without them (upstream suites with a broken quote inside `--command`
/// thereby run a cut command); redline-load does the same and says so.
fn stray_argument(arg: &str) -> String {
    format!("ignoring the stray argument '{arg}' (not an option; memtier_benchmark ignores it too)")
}

/// Option combinations memtier_benchmark refuses with a usage error (exit 2), refused the same
/// way so that a command line redline-load runs is one memtier runs.
fn refuse_as_memtier(cfg: &Config, given: &[&str]) -> Result<(), CliError> {
    let (set, get) = cfg.key_pattern;
    if (set == KeyPattern::Parallel) != (get == KeyPattern::Parallel) {
        return usage(format!(
            "--key-pattern {}:{}: the parallel pattern P must be given for both SET and GET (as memtier_benchmark requires)",
            set.letter(),
            get.letter()
        ));
    }
    if !cfg.commands.is_empty() {
        for (option, what) in [("ratio", "ratio"), ("key-pattern", "key pattern")] {
            if given.contains(&option) {
                return usage(format!(
                    "--{option} cannot be combined with --command: give each command's {what} with --command-{option} (memtier_benchmark refuses this too)"
                ));
            }
        }
        let parallel = cfg.commands.iter().filter(|c| c.key_pattern == KeyPattern::Parallel).count();
        if parallel > 0 && parallel < cfg.commands.len() {
            return usage(format!(
                "--command-key-pattern P is given for {parallel} of {} --command options: the parallel pattern must be given for every --command (memtier_benchmark refuses this too)",
                cfg.commands.len()
            ));
        }
    }
    if cfg.cluster_mode {
        for option in ["reconnect-interval", "unix-socket"] {
            if given.contains(&option) {
                return usage(format!("--cluster-mode cannot be combined with --{option} (memtier_benchmark refuses this too)"));
            }
        }
    }
    Ok(())
}

fn parse_uri(cfg: &mut Config, v: &str) -> Result<(), CliError> {
    let (rest, tls) = if let Some(r) = v.strip_prefix("rediss://") {
        (r, true)
    } else if let Some(r) = v.strip_prefix("redis://") {
        (r, false)
    } else {
        return usage(format!("--uri: must start with redis:// or rediss://, got '{v}'"));
    };
    cfg.tls.enabled |= tls;
    let (auth, hostpart) = match rest.rsplit_once('@') {
        Some((a, h)) => (Some(a), h),
        None => (None, rest),
    };
    if let Some(a) = auth {
        cfg.authenticate = Some(a.to_string());
    }
    let (hostport, db) = match hostpart.split_once('/') {
        Some((h, d)) => (h, Some(d)),
        None => (hostpart, None),
    };
    if let Some(d) = db.filter(|d| !d.is_empty()) {
        cfg.select_db = Some(d.parse::<u32>().or_else(|_| usage(format!("--uri: bad database number in '{v}'")))?);
    }
    match hostport.rsplit_once(':') {
        Some((h, p)) => {
            cfg.server = h.to_string();
            cfg.port = p.parse::<u16>().or_else(|_| usage(format!("--uri: bad port in '{v}'")))?;
        }
        None => {
            if !hostport.is_empty() {
                cfg.server = hostport.to_string();
            }
        }
    }
    Ok(())
}

fn validate(cfg: &mut Config) -> Result<(), CliError> {
    if cfg.key_minimum > cfg.key_maximum {
        return usage(format!(
            "--key-minimum ({}) must not exceed --key-maximum ({})",
            cfg.key_minimum, cfg.key_maximum
        ));
    }
    if cfg.conn_start_min_jitter_us > cfg.conn_start_max_jitter_us && cfg.conn_start_max_jitter_us > 0 {
        return usage("--thread-conn-start-min-jitter-micros must not exceed --thread-conn-start-max-jitter-micros");
    }
    if cfg.scan_incremental_iteration && cfg.commands.is_empty() {
        return usage("--scan-incremental-iteration needs a --command (a SCAN command)");
    }
    if !cfg.commands.is_empty() && cfg.commands.iter().all(|c| c.ratio == 0) {
        return usage("--command-ratio: at least one command needs a ratio above zero");
    }
    if cfg.tls.enabled && cfg.unix_socket.is_some() {
        return usage("--tls cannot be combined with --unix-socket");
    }
    if cfg.tls.enabled {
        // Validate certificates and options now: a usage error, not a failed run.
        if let Err(m) = crate::tls::build_config(&cfg.tls) {
            return usage(m);
        }
    }
    if cfg.requests == Requests::Unset && cfg.test_time.is_none() {
        cfg.requests = Requests::PerClient(DEFAULT_REQUESTS);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Config, CliError> {
        parse_args(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn last_value_wins_and_commands_accumulate() {
        let c = p(&["-c", "3", "--clients=5", "--command", "SET __key__ __data__", "--command-ratio", "2",
            "--command=GET __key__", "--command-key-pattern", "S"]).unwrap();
        assert_eq!(c.clients, 5);
        assert_eq!(c.commands.len(), 2);
        assert_eq!(c.commands[0].ratio, 2);
        assert_eq!(c.commands[1].key_pattern, KeyPattern::Sequential);
    }

    #[test]
    fn unknown_option_is_named() {
        match p(&["--foo"]) {
            Err(CliError::Usage(m)) => assert_eq!(m, "unknown option '--foo'"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn short_options_and_prefixes() {
        let c = p(&["-t1", "-R", "-n", "allkeys", "--key-pattern", "P:P", "--threads", "2"]).unwrap();
        assert_eq!(c.threads, 2);
        assert!(c.random_data);
        assert_eq!(c.requests, Requests::AllKeys);
        assert_eq!(c.key_pattern, (KeyPattern::Parallel, KeyPattern::Parallel));
    }

    #[test]
    fn test_time_and_requests_conflict() {
        assert!(p(&["-n", "5", "--test-time", "3"]).is_err());
        let c = p(&["--test-time", "3"]).unwrap();
        assert_eq!(c.requests, Requests::Unset);
    }

    fn usage_message(args: &[&str]) -> String {
        match p(args) {
            Err(CliError::Usage(m)) => m,
            other => panic!("expected a usage error for {args:?}, got {other:?}"),
        }
    }

    #[test]
    fn combinations_memtier_refuses_are_refused() {
        let m = usage_message(&["--command", "SET __key__ x", "--ratio", "1:0"]);
        assert!(m.contains("--ratio") && m.contains("--command"), "{m}");
        let m = usage_message(&["--key-pattern=P:P", "--command", "SET __key__ x"]);
        assert!(m.contains("--key-pattern") && m.contains("--command"), "{m}");
        let m = usage_message(&["--command", "SET __key__ x", "--command-key-pattern", "P", "--command", "GET __key__"]);
        assert!(m.contains("--command-key-pattern P") && m.contains("1 of 2"), "{m}");
        let m = usage_message(&["--key-pattern", "P:R"]);
        assert!(m.contains("P:R"), "{m}");
        let m = usage_message(&["--cluster-mode", "--reconnect-interval", "5"]);
        assert!(m.contains("--cluster-mode") && m.contains("--reconnect-interval"), "{m}");
        // the same options without --command (or with one pattern everywhere) are fine
        assert!(p(&["--ratio", "1:0", "--key-pattern", "P:P"]).is_ok());
        assert!(p(&["--command", "SET __key__ x", "--command-key-pattern", "P", "--command", "GET __key__",
            "--command-key-pattern", "P"]).is_ok());
    }

    #[test]
    fn stray_arguments_are_ignored_with_a_warning() {
        let c = p(&["--command=HSET h f1 v1 name User", "__key__ more fields", "-c", "2", "--", "-n", "5"]).unwrap();
        assert_eq!(c.commands[0].text, "HSET h f1 v1 name User");
        assert_eq!(c.clients, 2);
        assert_eq!(c.requests, Requests::PerClient(DEFAULT_REQUESTS));
        assert_eq!(c.warnings.len(), 3, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("'__key__ more fields'"));
    }

    #[test]
    fn ratio_and_percentiles() {
        let c = p(&["--ratio", "1:0", "--print-percentiles", "50,99.9"]).unwrap();
        assert_eq!(c.ratio, (1, 0));
        assert_eq!(c.print_percentiles, vec![50.0, 99.9]);
        assert!(p(&["--ratio", "x"]).is_err());
    }
}
