//! Native roles: redline-load plays the other client tools of the upstream suites, reading each
//! tool's own flags (`loadgen/role_options.tsv`): `redline-load --role TOOL FLAGS...`.
//!
//! - `pubsub-sub-bench`: subscribers (subscriber.rs)
//! - `bcast-listener`: CLIENT TRACKING BCAST listeners, optionally under ACL users (tracking.rs)
//! - `sidekiq-bench`, `celery-bench`, `resque-bench`, `bullmq-bench`, `rq-bench`: job-queue
//!   producers and workers speaking each library's Redis protocol (jobs.rs, the protocols in
//!   queues.rs; RQ's in rq.rs)
//!
//! Each name maps to its entry in one table (`ROLES`); any other name is refused. Every role
//! runs its phases with memtier mode's phase driver (phase.rs), counts its events in the
//! tallies of stats.rs and writes its result with report.rs: memtier's JSON shape (Totals, HDR
//! latency, per-second series) with its own counts under "redline" → "role_counts", and the
//! same `--events` phases as memtier mode.

pub mod fetched;
pub mod flags;
pub mod jobs;
pub mod listen;
pub mod measure;
pub mod queues;
pub mod rq;
pub mod subscriber;
pub mod tracking;
pub mod wire;

use crate::events::Events;
use crate::report::{role_document, About, RunResult};
use flags::Flags;
use serde_json::json;
use measure::Outcome;
use queues::Library;

pub const FLAG: &str = "--role";

/// What a role is: how it runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Subscriber,
    Tracking,
    Jobs(Library),
}

/// The role table: every tool redline-load plays, by the name `--role` takes. A name that is
/// not here is refused (the flag table, role_options.tsv, must list the same names).
pub const ROLES: [(&str, Kind); 7] = [
    ("pubsub-sub-bench", Kind::Subscriber),
    ("bcast-listener", Kind::Tracking),
    ("sidekiq-bench", Kind::Jobs(Library::Sidekiq)),
    ("celery-bench", Kind::Jobs(Library::Celery)),
    ("resque-bench", Kind::Jobs(Library::Resque)),
    ("bullmq-bench", Kind::Jobs(Library::BullMq)),
    ("rq-bench", Kind::Jobs(Library::Rq)),
];

impl Kind {
    /// How the role's connections do their I/O: the listeners on one epoll loop, the job
    /// queues' producer and workers on blocking sockets (io_uring would give them nothing: each
    /// waits for its own one reply).
    fn io_path(self) -> &'static str {
        match self {
            Kind::Subscriber | Kind::Tracking => "epoll",
            Kind::Jobs(_) => "blocking",
        }
    }
}

pub fn names() -> Vec<&'static str> {
    ROLES.iter().map(|(name, _)| *name).collect()
}

/// The role `name` plays, or the line that refuses it.
pub fn lookup(name: &str) -> Result<Kind, String> {
    match ROLES.iter().find(|(n, _)| *n == name) {
        Some((_, kind)) => Ok(*kind),
        None => Err(format!("unknown role '{name}' (roles: {})", names().join(", "))),
    }
}

/// What every role is given besides its tool's flags.
pub struct Context {
    pub host: String,
    pub port: u16,
    pub events: Events,
    pub window_s: Option<f64>,
    pub warmup_s: f64,
}

pub fn main(args: &[String]) -> i32 {
    let Some(role) = args.first() else {
        eprintln!("redline-load: --role needs a tool name ({})", names().join(", "));
        return 2;
    };
    let parsed = lookup(role).and_then(|kind| Ok((kind, Flags::parse(role, &args[1..])?)));
    let (kind, f) = match parsed {
        Ok(p) => p,
        Err(m) => {
            eprintln!("redline-load: {m}");
            return 2;
        }
    };
    let ctx = Context {
        host: f.text("*server"),
        port: f.int("*port") as u16,
        events: Events { enabled: f.flag("*events") },
        window_s: f.seconds("*window"),
        warmup_s: f.seconds("*warmup-time").unwrap_or(0.0),
    };
    let outcome = match kind {
        Kind::Subscriber => subscriber::run(&f, &ctx),
        Kind::Tracking => tracking::run(&f, &ctx),
        Kind::Jobs(library) => jobs::run(library, &f, &ctx),
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
    let Outcome { name, mut stats, window, warmup_seconds, connections, lost, role: counts, latency_from, warnings } = outcome;
    stats.conns.opened = connections;
    stats.conns.lost = lost;
    let run = RunResult::of_window(stats, &window, warmup_seconds, connections);
    let io = json!({"path": kind.io_path(), "requested": null, "note": "roles keep their own I/O (docs/loadgen.md, Roles)"});
    let about = About { latency_from, warnings: &warnings, memtier: None, role: Some((role, &counts)), io };
    let doc = role_document(f.as_json(), name, &run, &about);
    let out = f.text("*json-out-file");
    if out.is_empty() {
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    } else if let Err(e) = std::fs::write(&out, serde_json::to_string_pretty(&doc).expect("json") + "\n") {
        eprintln!("redline-load: cannot write --json-out-file {out}: {e}");
        return 1;
    }
    if run.total().ops == 0 {
        eprintln!("redline-load: no {} counted in the measured {:.1} s", name.to_lowercase(), window.seconds);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_role_of_the_flag_table_has_an_entry_and_no_other() {
        assert_eq!(flags::roles(), names());
    }

    #[test]
    fn an_unknown_role_is_refused() {
        assert_eq!(lookup("rq-bench"), Ok(Kind::Jobs(Library::Rq)));
        assert_eq!(
            lookup("arq-bench"),
            Err("unknown role 'arq-bench' (roles: pubsub-sub-bench, bcast-listener, sidekiq-bench, celery-bench, \
                 resque-bench, bullmq-bench, rq-bench)"
                .to_string())
        );
    }
}
