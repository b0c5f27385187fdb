//! Native roles: redline-load plays the other client tools of the upstream suites, reading each
//! tool's own flags (`loadgen/role_options.tsv`): `redline-load --role TOOL FLAGS...`.
//!
//! - `pubsub-sub-bench`: subscribers (subscriber.rs)
//! - `bcast-listener`: CLIENT TRACKING BCAST listeners, optionally under ACL users (tracking.rs)
//! - `sidekiq-bench`, `celery-bench`, `resque-bench`, `bullmq-bench`: job-queue producers and
//!   workers speaking each library's Redis protocol (jobs.rs, the protocols in queues.rs)
//!
//! Every role writes memtier's JSON shape (Totals, HDR latency, per-second series) with its own
//! counts under "redline" → "role_counts", and the same `--events` phases as memtier mode.

pub mod flags;
pub mod jobs;
pub mod listen;
pub mod measure;
pub mod queues;
pub mod subscriber;
pub mod tracking;
pub mod wire;

use crate::events::Events;
use flags::Flags;
use measure::{result_json, Clock};

pub const FLAG: &str = "--role";

/// What every role is given besides its tool's flags.
pub struct Context {
    pub host: String,
    pub port: u16,
    pub events: Events,
    pub clock: Clock,
    pub window_s: Option<f64>,
    pub warmup_s: f64,
}

pub fn main(args: &[String]) -> i32 {
    let Some(role) = args.first() else {
        eprintln!("redline-load: --role needs a tool name ({})", flags::roles().join(", "));
        return 2;
    };
    let f = match Flags::parse(role, &args[1..]) {
        Ok(f) => f,
        Err(m) => {
            eprintln!("redline-load: {m}");
            return 2;
        }
    };
    let ctx = Context {
        host: f.text("*server"),
        port: f.int("*port") as u16,
        events: Events { enabled: f.flag("*events") },
        clock: Clock::new(),
        window_s: f.seconds("*window"),
        warmup_s: f.seconds("*warmup-time").unwrap_or(0.0),
    };
    let outcome = match role.as_str() {
        "pubsub-sub-bench" => subscriber::run(&f, &ctx),
        "bcast-listener" => tracking::run(&f, &ctx),
        _ => jobs::run(&f, &ctx),
    };
    let outcome = match outcome {
        Ok(o) => o,
        Err(RoleError::Usage(m)) => {
            eprintln!("redline-load: {role}: {m}");
            return 2;
        }
        Err(RoleError::Run(m)) => {
            eprintln!("redline-load: {role}: {m}");
            return 1;
        }
    };
    let doc = result_json(f.as_json(), &ctx.clock, &outcome);
    let out = f.text("*json-out-file");
    if out.is_empty() {
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    } else if let Err(e) = std::fs::write(&out, serde_json::to_string_pretty(&doc).expect("json") + "\n") {
        eprintln!("redline-load: cannot write --json-out-file {out}: {e}");
        return 1;
    }
    if outcome.meter.count == 0 {
        eprintln!("redline-load: no {} counted in the measured {:.1} s", outcome.name.to_lowercase(), ctx.clock.window_s());
        return 1;
    }
    0
}

pub enum RoleError {
    Usage(String),
    Run(String),
}

impl From<String> for RoleError {
    fn from(m: String) -> Self {
        RoleError::Run(m)
    }
}

/// Make room for `connections` sockets: raise the soft RLIMIT_NOFILE up to the hard one, or say
/// how many are needed and what the limit is.
pub fn ensure_fds(connections: u64) -> Result<(), RoleError> {
    let needed = connections + 64;
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit/setrlimit read and write the struct we own.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if lim.rlim_cur >= needed {
        return Ok(());
    }
    if lim.rlim_max >= needed {
        let raised = libc::rlimit { rlim_cur: needed, rlim_max: lim.rlim_max };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(());
        }
    }
    Err(RoleError::Usage(format!(
        "{connections} connections need {needed} file descriptors; the limit is {} (hard {}): raise it with `ulimit -n {needed}`",
        lim.rlim_cur, lim.rlim_max
    )))
}

/// Small deterministic generator for the roles' choices (channel counts, payload bytes).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        if n == 0 { 0 } else { self.0 % n }
    }
}
