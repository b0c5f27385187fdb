//! memtier_benchmark-compatible command line parsing.
//!
//! Semantics follow memtier's getopt_long: `--name=value`, `--name value`, `-x value`,
//! `-xvalue`, unique prefixes of long names; a single-valued option given twice keeps the
//! last value; `--command` accumulates and `--command-ratio` / `--command-key-pattern` apply
//! to the most recent `--command`.

use crate::options::{self, OptionSpec};
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
    /// redline's --io: which I/O path the worker threads use.
    pub io: crate::io_choice::Choice,
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
            io: crate::io_choice::Choice::Epoll, // the cheaper path measured here (docs/loadgen.md)
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
redline (not memtier's): --warmup-time SECS, --events,\n\
  --io auto|io_uring|epoll  the I/O path: auto (default) uses io_uring where the kernel allows it\n\
  and epoll where it is missing or refused (one line says so); TLS always runs on epoll\n\
Every option, its value and range: loadgen/memtier_options.tsv. `redline-load --check-arguments`\n\
reads one JSON array of arguments per stdin line and answers whether each would be accepted.\n";

/// One option of the command line, resolved through the option table (loadgen/memtier_options.tsv).
struct Given {
    spec: &'static OptionSpec,
    value: String, // empty for a flag
}

/// memtier's getopt_long reading: `--name=value`, `--name value`, unique prefixes of long names,
/// `-x value`, `-xvalue` and bundled flags (`-DR`); a non-option argument is ignored with a
/// warning, and so is everything after `--`.
fn read_options(args: &[String], warnings: &mut Vec<String>) -> Result<Vec<Given>, CliError> {
    let mut given = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            warnings.extend(rest.map(|a| stray_argument(a)));
            break;
        }
        if let Some(body) = arg.strip_prefix("--") {
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            let spec = options::by_long_name(name).map_err(CliError::Usage)?;
            let value = match (spec.takes_value(), inline) {
                (false, Some(_)) => return usage(format!("option '--{}' doesn't allow an argument", spec.name)),
                (false, None) => String::new(),
                (true, Some(v)) => v,
                (true, None) => match rest.next() {
                    Some(v) => v.clone(),
                    None => return usage(format!("option '--{}' requires an argument", spec.name)),
                },
            };
            given.push(Given { spec, value });
        } else if arg.len() > 1 && arg.starts_with('-') {
            for (at, letter) in arg.char_indices().skip(1) {
                let spec = options::by_short_letter(letter).map_err(CliError::Usage)?;
                if !spec.takes_value() {
                    given.push(Given { spec, value: String::new() });
                    continue;
                }
                let attached = &arg[at + letter.len_utf8()..];
                let value = if !attached.is_empty() {
                    attached.to_string()
                } else {
                    rest.next().cloned().ok_or_else(|| CliError::Usage(format!("option '-{letter}' requires an argument")))?
                };
                given.push(Given { spec, value });
                break;
            }
        } else {
            warnings.push(stray_argument(arg));
        }
    }
    Ok(given)
}

/// Parse argv (without the program name).
pub fn parse_args(args: &[String]) -> Result<Config, CliError> {
    let mut cfg = Config::default();
    let given = read_options(args, &mut cfg.warnings)?;
    let mut sizes = DataSizes::default();
    for option in &given {
        apply(&mut cfg, &mut sizes, option)?;
    }
    // A range wins over the fixed size (as in memtier, where the range is checked after the
    // fixed size when building the object generator).
    if let Some(size) = sizes.range.or(sizes.fixed.map(DataSize::Fixed)) {
        cfg.data_size = size;
    }
    let names: Vec<&str> = given.iter().map(|g| g.spec.name).collect();
    refuse_as_memtier(&cfg, &names)?;
    validate(&mut cfg)?;
    Ok(cfg)
}

#[derive(Default)]
struct DataSizes {
    fixed: Option<u32>,
    range: Option<DataSize>,
}

/// One option's value into the configuration. Types and ranges come from the option table;
/// the shapes (`SET:GET`, `MIN-MAX`, …) are checked here.
fn apply(cfg: &mut Config, sizes: &mut DataSizes, option: &Given) -> Result<(), CliError> {
    if let Some(why) = options::refusal(option.spec) {
        return usage(why);
    }
    let (name, v) = (option.spec.name, option.value.clone());
    let int = || options::int_value(option.spec, &v).map_err(CliError::Usage);
    let int32 = || int().and_then(|n| u32::try_from(n).or_else(|_| usage(format!("--{name} must be at most {}, got {v}", u32::MAX))));
    let float = || options::float_value(option.spec, &v).map_err(CliError::Usage);
    match name {
        "server" | "host" => cfg.server = v,
        "port" => cfg.port = u16::try_from(int()?).or_else(|_| usage(format!("--port must be at most 65535, got {v}")))?,
        "unix-socket" => cfg.unix_socket = Some(v),
        "ipv4" => cfg.ip_family = Some(4),
        "ipv6" => cfg.ip_family = Some(6),
        "protocol" => {
            cfg.protocol = match v.as_str() {
                "redis" | "resp2" => Protocol::Resp2,
                "resp3" => Protocol::Resp3,
                _ => return usage(format!("--protocol: '{v}' is not supported (use redis, resp2 or resp3)")),
            }
        }
        "uri" => parse_uri(cfg, &v)?,
        "tls" => cfg.tls.enabled = true,
        "cert" => cfg.tls.cert = Some(v),
        "key" => cfg.tls.key = Some(v),
        "cacert" => cfg.tls.cacert = Some(v),
        "tls-skip-verify" => cfg.tls.skip_verify = true,
        "sni" => cfg.tls.sni = Some(v),
        "tls-protocols" => cfg.tls.protocols = Some(v),
        "out-file" => cfg.out_file = Some(v),
        "hdr-file-prefix" => cfg.hdr_file_prefix = Some(v),
        "run-count" => cfg.run_count = int32()?,
        "debug" => cfg.debug = true,
        "show-config" => cfg.show_config = true,
        "hide-histogram" => cfg.hide_histogram = true,
        "print-percentiles" => cfg.print_percentiles = parse_percentiles(&v)?,
        "distinct-client-seed" => cfg.distinct_client_seed = true,
        "randomize" => cfg.randomize = true,
        "requests" if v == "allkeys" => cfg.requests = Requests::AllKeys,
        "requests" => {
            let n = options::int_value(option.spec, &v).map_err(|_| CliError::Usage(format!(
                "--requests needs a positive integer or allkeys, got '{v}'")))?;
            if n == 0 {
                return usage("--requests must be at least 1, got 0");
            }
            cfg.requests = Requests::PerClient(n);
        }
        "clients" => cfg.clients = int32()?,
        "threads" => cfg.threads = int32()?,
        "test-time" => cfg.test_time = Some(int()?),
        "ratio" => cfg.ratio = parse_ratio(&v)?,
        "pipeline" => cfg.pipeline = int32()?,
        "data-size" => sizes.fixed = Some(int32()?),
        "random-data" => cfg.random_data = true,
        "data-size-range" => sizes.range = Some(parse_data_size_range(&v)?),
        "data-size-pattern" => {
            cfg.data_size_pattern_sequential = match v.as_str() {
                "R" => false,
                "S" => true,
                _ => return usage(format!("--data-size-pattern must be R or S, got '{v}'")),
            }
        }
        "key-prefix" => cfg.key_prefix = v,
        "key-minimum" => cfg.key_minimum = int()?,
        "key-maximum" => cfg.key_maximum = int()?,
        "key-pattern" => cfg.key_pattern = parse_key_pattern(&v)?,
        "key-stddev" => cfg.key_stddev = Some(float()?),
        "key-median" => cfg.key_median = Some(float()?),
        "key-zipf-exp" => cfg.key_zipf_exp = float()?,
        "reconnect-interval" => cfg.reconnect_interval = Some(int()?),
        "reconnect-on-error" => cfg.reconnect_on_error = true,
        "thread-conn-start-min-jitter-micros" => cfg.conn_start_min_jitter_us = int()?,
        "thread-conn-start-max-jitter-micros" => cfg.conn_start_max_jitter_us = int()?,
        "authenticate" => cfg.authenticate = Some(v),
        "select-db" => cfg.select_db = Some(int32()?),
        "json-out-file" => cfg.json_out_file = Some(v),
        "cluster-mode" => cfg.cluster_mode = true,
        "help" => return Err(CliError::Info(HELP.to_string())),
        "version" => return Err(CliError::Info(format!("redline-load {}\n", env!("CARGO_PKG_VERSION")))),
        "command" => cfg.commands.push(CommandSpec { text: v, ratio: 1, key_pattern: KeyPattern::Random }),
        "command-key-pattern" => {
            let pattern = KeyPattern::parse(&v);
            let last = last_command(cfg, name)?;
            last.key_pattern = pattern.ok_or_else(|| CliError::Usage(format!(
                "--command-key-pattern must be one of R, S, G, P, Z, got '{v}' (for command '{}')", last.text)))?;
        }
        "command-ratio" => {
            let ratio = int32();
            last_command(cfg, name)?.ratio = ratio?;
        }
        "rate-limiting" => cfg.rate_limiting = Some(int32()?),
        "scan-incremental-iteration" => cfg.scan_incremental_iteration = true,
        "scan-incremental-max-iterations" => cfg.scan_incremental_max_iterations = int()?,
        "warmup-time" => cfg.warmup_time = float()?,
        "events" => cfg.events = true,
        "io" => {
            cfg.io = crate::io_choice::Choice::parse(&v)
                .ok_or_else(|| CliError::Usage(format!("--io must be auto, io_uring or epoll, got '{v}'")))?
        }
        other => return usage(format!("internal: option '--{other}' is in the option table but not handled")),
    }
    Ok(())
}

fn last_command<'a>(cfg: &'a mut Config, option: &str) -> Result<&'a mut CommandSpec, CliError> {
    cfg.commands.last_mut().ok_or_else(|| CliError::Usage(format!("--{option} must follow the --command it applies to")))
}

/// `A-B` or `A:B` with two integers of at most u32::MAX.
fn pair(v: &str, separator: char) -> Option<(u32, u32)> {
    let (a, b) = v.split_once(separator)?;
    let number = |s: &str| if options::is_int(s) { s.parse::<u32>().ok() } else { None };
    Some((number(a)?, number(b)?))
}

fn parse_ratio(v: &str) -> Result<(u32, u32), CliError> {
    match pair(v, ':') {
        Some((a, b)) if a > 0 || b > 0 => Ok((a, b)),
        _ => usage(format!("--ratio must look like SET:GET (e.g. 1:10, not 0:0), got '{v}'")),
    }
}

fn parse_key_pattern(v: &str) -> Result<(KeyPattern, KeyPattern), CliError> {
    match v.split_once(':').map(|(a, b)| (KeyPattern::parse(a), KeyPattern::parse(b))) {
        Some((Some(a), Some(b))) => Ok((a, b)),
        _ => usage(format!("--key-pattern must look like X:Y with X, Y in R, S, G, P, Z, got '{v}'")),
    }
}

fn parse_percentiles(v: &str) -> Result<Vec<f64>, CliError> {
    let quantile = |part: &str| options::is_float(part).then(|| part.parse::<f64>().ok()).flatten().filter(|q| (0.0..=100.0).contains(q));
    v.split(',').map(quantile).collect::<Option<Vec<f64>>>()
        .ok_or_else(|| CliError::Usage(format!("--print-percentiles needs numbers in 0..100, got '{v}'")))
}

fn parse_data_size_range(v: &str) -> Result<DataSize, CliError> {
    match pair(v, '-') {
        Some((min, max)) if min > 0 && min <= max => Ok(DataSize::Range { min, max }),
        _ => usage(format!("--data-size-range must look like MIN-MAX with 1 <= MIN <= MAX, got '{v}'")),
    }
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
    if cfg.test_time.is_some() && cfg.requests != Requests::Unset {
        return usage("--test-time and --requests are mutually exclusive");
    }
    if cfg.conn_start_min_jitter_us > cfg.conn_start_max_jitter_us {
        return usage("--thread-conn-start-min-jitter-micros must not exceed --thread-conn-start-max-jitter-micros");
    }
    if cfg.scan_incremental_iteration {
        if cfg.commands.len() != 1 {
            return usage("--scan-incremental-iteration needs exactly one --command (a SCAN command)");
        }
        if cfg.pipeline != 1 {
            return usage("--scan-incremental-iteration needs --pipeline 1 (memtier_benchmark refuses this too)");
        }
        if cfg.cluster_mode {
            return usage("--scan-incremental-iteration cannot be combined with --cluster-mode (memtier_benchmark refuses this too)");
        }
    }
    if !cfg.commands.is_empty() && cfg.commands.iter().all(|c| c.ratio == 0) {
        return usage("--command-ratio: at least one command needs a ratio above zero");
    }
    if cfg.tls.enabled && cfg.unix_socket.is_some() {
        return usage("--tls cannot be combined with --unix-socket");
    }
    if cfg.tls.enabled && cfg.io == crate::io_choice::Choice::IoUring {
        return usage("--io io_uring cannot be combined with --tls: TLS connections run on epoll");
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

    /// A value each option accepts, by its table entry (text shapes by name).
    fn sample_value(spec: &OptionSpec) -> Option<String> {
        let text = match (spec.value, spec.name) {
            (options::ValueKind::None, _) => return None,
            (options::ValueKind::Int | options::ValueKind::Float, _) => "1",
            (_, "protocol") => "resp3",
            (_, "uri") => "redis://localhost:6380/0",
            (_, "print-percentiles") => "50,99.9",
            (_, "requests") => "allkeys",
            (_, "ratio") => "1:0",
            (_, "data-size-range") => "1-8",
            (_, "data-size-pattern") => "S",
            (_, "key-pattern") => "S:S",
            (_, "command-key-pattern") => "G",
            (_, "command") => "SCAN 0",
            (_, "io") => "epoll",
            _ => "text",
        };
        Some(text.to_string())
    }

    #[test]
    fn every_option_of_the_table_is_handled() {
        for spec in options::table() {
            let mut args = vec!["--command".to_string(), "SCAN 0".to_string()];
            match spec.name {
                "ratio" | "key-pattern" => args.clear(),
                "tls" => args.push("--tls-skip-verify".into()),
                "thread-conn-start-min-jitter-micros" => args.extend(["--thread-conn-start-max-jitter-micros".into(), "9".into()]),
                _ => {}
            }
            args.push(format!("--{}", spec.name));
            args.extend(sample_value(spec));
            match (parse_args(&args), spec.status) {
                (Ok(_), options::Status::Supported | options::Status::Redline) => {}
                (Err(CliError::Info(_)), _) if matches!(spec.name, "help" | "version") => {}
                (Err(CliError::Usage(m)), options::Status::Refused) if m.contains("not supported by redline-load") => {}
                (other, status) => panic!("--{} ({status:?}): {other:?}", spec.name),
            }
        }
    }

    #[test]
    fn former_disagreements_with_the_suite_checker() {
        // refused by the table, as `redline suites validate` refuses them
        assert!(usage_message(&["--expiry-range", "1-10"]).contains("not supported by redline-load"));
        assert!(usage_message(&["--data-size-list", "10:1,20:1"]).contains("not supported by redline-load"));
        // a ratio of 0 leaves a command out, as in memtier; all of them 0 is refused
        let c = p(&["--command", "SET __key__ x", "--command-ratio", "0", "--command", "GET __key__"]).unwrap();
        assert_eq!(c.commands[0].ratio, 0);
        assert!(usage_message(&["--command", "SET __key__ x", "--command-ratio", "0"]).contains("above zero"));
        // --client is a prefix of four names, not of --clients alone
        assert!(usage_message(&["--client", "5"]).contains("ambiguous"));
        // the order of -n allkeys and --test-time does not matter
        assert!(usage_message(&["--test-time", "5", "-n", "allkeys"]).contains("mutually exclusive"));
        assert!(usage_message(&["--key-zipf-exp", "5"]).contains("below 5"));
        assert!(usage_message(&["--command-key-pattern", "R"]).contains("must follow the --command"));
    }

    #[test]
    fn ratio_and_percentiles() {
        let c = p(&["--ratio", "1:0", "--print-percentiles", "50,99.9"]).unwrap();
        assert_eq!(c.ratio, (1, 0));
        assert_eq!(c.print_percentiles, vec![50.0, 99.9]);
        assert!(p(&["--ratio", "x"]).is_err());
    }
}
