//! `bcast-listener`: listener connections in RESP3, each `CLIENT TRACKING on BCAST PREFIX p`,
//! counting the invalidation pushes the server sends them while other clients write. With
//! --acl-user-patterns 'a*;b*' one ACL user per pattern is created for the run (key permission
//! that pattern only) and removed after it; listeners are dealt round-robin over the users.
//! Writes are the server's command calls (INFO commandstats) other than the listeners' own, from
//! the listeners' start to the end of the drain after the window, so invalidations per write is
//! the fan-out each write caused even when reading fell behind during the window.

use super::flags::Flags;
use super::listen::listen_through_window;
use super::measure::{Outcome, Recorder};
use super::wire::{Conn, Value};
use super::{ensure_fds, Context, RoleError};
use serde_json::{json, Map};

/// Commands the listeners and this role send themselves: not writes.
const OWN_COMMANDS: [&str; 6] = ["hello", "client", "acl", "auth", "info", "ping"];

/// The ACL users of the run; removed when dropped, whatever happened.
struct Users {
    admin: Conn,
    names: Vec<String>,
}

impl Drop for Users {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = self.admin.call(&[b"ACL", b"DELUSER", name.as_bytes()]);
        }
    }
}

fn other_calls(admin: &mut Conn) -> Result<u64, String> {
    let v = admin.call(&[b"INFO", b"commandstats"])?;
    let text = String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned();
    let mut total = 0;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("cmdstat_") else { continue };
        let Some((name, fields)) = rest.split_once(':') else { continue };
        let base = name.split('|').next().unwrap_or(name);
        if OWN_COMMANDS.contains(&base) {
            continue;
        }
        let calls = fields.split(',').find_map(|f| f.strip_prefix("calls=")).and_then(|n| n.parse::<u64>().ok());
        total += calls.unwrap_or(0);
    }
    Ok(total)
}

pub fn run(f: &Flags, ctx: &Context) -> Result<Outcome, RoleError> {
    let window_s = ctx.window_s.or(f.opt_int("test-time").filter(|_| f.given("test-time")).map(|t| t as f64));
    let Some(window_s) = window_s else {
        return Err(RoleError::Usage("needs --test-time (or redline's --window): it listens until then".into()));
    };
    let listeners = f.int("listener-count");
    if listeners == 0 {
        return Err(RoleError::Usage("--listener-count must be at least 1".into()));
    }
    ensure_fds(listeners + 1)?;
    let prefix = f.text("tracking-prefix");
    let patterns: Vec<String> = f.text("acl-user-patterns").split(';').filter(|p| !p.is_empty()).map(String::from).collect();
    let mut users = Users { admin: Conn::open(&ctx.host, ctx.port)?, names: Vec::new() };
    for (j, pattern) in patterns.iter().enumerate() {
        let name = format!("redline-bcast-{}-{j}", std::process::id());
        let key = format!("~{pattern}");
        users.admin.call(&[b"ACL", b"SETUSER", name.as_bytes(), b"reset", b"on", b"nopass", key.as_bytes(), b"&*", b"+@all"])?;
        users.names.push(name);
    }
    let mut conns = Vec::with_capacity(listeners as usize);
    let mut user_of = Vec::with_capacity(listeners as usize);
    for i in 0..listeners as usize {
        let mut c = Conn::open(&ctx.host, ctx.port)?;
        let user = if users.names.is_empty() { None } else { Some(i % users.names.len()) };
        match user {
            Some(u) => c.call(&[b"HELLO", b"3", b"AUTH", users.names[u].as_bytes(), b"unused"])?,
            None => c.call(&[b"HELLO", b"3"])?,
        };
        let mut args: Vec<&[u8]> = vec![b"CLIENT", b"TRACKING", b"on", b"BCAST"];
        if !prefix.is_empty() {
            args.extend([b"PREFIX".as_slice(), prefix.as_bytes()]);
        }
        c.call(&args)?;
        conns.push(c.into_parts());
        user_of.push(user);
    }
    let mut keys = 0u64;
    let mut flushes = 0u64;
    let mut by_user = vec![0u64; users.names.len().max(1)];
    // writes from the listeners' start to the end of the drain: every invalidation they caused
    // has arrived by then, however far the listeners' reading fell behind during the window
    let calls_before = other_calls(&mut users.admin)?;
    let listened = listen_through_window(conns, ctx, window_s, |i: usize, v: Value, recorder: &mut Recorder| {
        let Value::Push(items) = v else { return };
        if items.first().and_then(Value::as_bytes) != Some(b"invalidate".as_slice()) {
            return;
        }
        match items.get(1) {
            Some(Value::Array(k)) => keys += k.len() as u64,
            _ => flushes += 1,
        }
        by_user[user_of[i].unwrap_or(0)] += 1;
        recorder.record(recorder.now_ns(), None);
    })?;
    let received = listened.received;
    if let Some(e) = received.error {
        return Err(RoleError::Run(e));
    }
    let calls_after = other_calls(&mut users.admin)?;
    let writes = calls_after.saturating_sub(calls_before);
    let per_user: Map<String, serde_json::Value> = users
        .names
        .iter()
        .zip(&patterns)
        .zip(&by_user)
        .map(|((_, p), n)| (p.clone(), json!({"listeners": user_of.iter().filter(|u| u.map(|u| &patterns[u]) == Some(p)).count(), "invalidations": n})))
        .collect();
    let total: u64 = by_user.iter().sum();
    Ok(Outcome {
        name: "Invalidations",
        stats: listened.recorded,
        window: listened.window,
        warmup_seconds: listened.warmup_seconds,
        connections: listeners,
        lost: received.lost,
        role: json!({
            "listeners": listeners,
            "tracking_prefix": prefix,
            "acl_users": patterns.len(),
            "invalidation_messages": total,
            "invalidated_keys": keys,
            "flush_invalidations": flushes,
            "writes": writes,
            "drained": received.drained,
            "invalidations_per_write": if writes > 0 { total as f64 / writes as f64 } else { 0.0 },
            "by_acl_pattern": per_user,
        }),
        latency_from: "none (invalidations carry no send time)",
        warnings: Vec::new(),
    })
}
