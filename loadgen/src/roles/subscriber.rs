//! `pubsub-sub-bench`: subscriber connections on SUBSCRIBE or SSUBSCRIBE channels `prefix + id`
//! (ids channel-minimum..channel-maximum). Connection i subscribes to channel
//! `minimum + i mod channels` and, when -min/-max-number-channels-per-subscriber ask for more,
//! to the channels after it (distinct, wrapping). Counts every message per connection and
//! channel over the whole run, so the result says whether every message published to a channel
//! reached each of its subscribers; messages in the measured window give messages/s. A payload
//! that starts with `redline-ts:<unix microseconds>` also gives publish→receive latency.

use super::flags::Flags;
use super::listen::listen_through_window;
use super::measure::{Outcome, Recorder};
use super::wire::{Conn, Value};
use super::{ensure_fds, Context, RoleError};
use crate::events::unix_now;
use crate::rng::Rng;
use serde_json::{json, Map};

pub const TIMESTAMP_PREFIX: &[u8] = b"redline-ts:";

struct Plan {
    channels: Vec<String>,
    /// per connection: indexes into `channels`
    subscriptions: Vec<Vec<usize>>,
}

fn plan(f: &Flags) -> Result<Plan, RoleError> {
    let (lo, hi) = (f.int("channel-minimum"), f.int("channel-maximum"));
    if hi < lo {
        return Err(RoleError::Usage(format!("-channel-maximum {hi} is below -channel-minimum {lo}")));
    }
    let prefix = f.text("subscriber-prefix");
    let channels: Vec<String> = (lo..=hi).map(|id| format!("{prefix}{id}")).collect();
    let count = channels.len() as u64;
    let (min_n, max_n) = (f.int("min-number-channels-per-subscriber").max(1), f.int("max-number-channels-per-subscriber").max(1));
    if max_n < min_n || max_n > count {
        return Err(RoleError::Usage(format!(
            "channels per subscriber must satisfy min {min_n} <= max {max_n} <= the {count} channels"
        )));
    }
    let clients = f.opt_int("clients").filter(|_| f.given("clients")).unwrap_or(count * f.int("subscribers-per-channel").max(1));
    let mut rng = Rng::new(clients);
    let subscriptions = (0..clients)
        .map(|i| {
            let n = rng.range(min_n, max_n);
            (0..n).map(|k| ((i + k) % count) as usize).collect()
        })
        .collect();
    Ok(Plan { channels, subscriptions })
}

pub fn run(f: &Flags, ctx: &Context) -> Result<Outcome, RoleError> {
    let window_s = ctx.window_s.or(f.opt_int("test-time").filter(|_| f.given("test-time")).map(|t| t as f64));
    let Some(window_s) = window_s else {
        return Err(RoleError::Usage("needs -test-time (or redline's --window): it runs until then".into()));
    };
    let plan = plan(f)?;
    ensure_fds(plan.subscriptions.len() as u64)?;
    let sharded = f.text("mode") == "ssubscribe";
    let (verb, kind): (&[u8], &[u8]) = if sharded { (b"SSUBSCRIBE", b"smessage") } else { (b"SUBSCRIBE", b"message") };
    // every connection subscribes first, then the confirmations are read: one round trip for all
    let mut pending = Vec::with_capacity(plan.subscriptions.len());
    for subs in &plan.subscriptions {
        let mut c = Conn::open(&ctx.host, ctx.port)?;
        let mut args: Vec<&[u8]> = vec![verb];
        args.extend(subs.iter().map(|&k| plan.channels[k].as_bytes()));
        c.send(&args)?;
        pending.push(c);
    }
    let mut conns = Vec::with_capacity(pending.len());
    for (mut c, subs) in pending.into_iter().zip(&plan.subscriptions) {
        for _ in subs {
            let v = c.read()?;
            if let Some(e) = v.error() {
                return Err(RoleError::Run(format!("{} replied: {e}", String::from_utf8_lossy(verb))));
            }
        }
        conns.push(c.into_parts());
    }
    // counts[connection][slot in its subscriptions]
    let mut counts: Vec<Vec<u64>> = plan.subscriptions.iter().map(|s| vec![0; s.len()]).collect();
    let mut timestamped = 0u64;
    let (channels, subscriptions) = (&plan.channels, &plan.subscriptions);
    let listened = listen_through_window(conns, ctx, window_s, |i: usize, v: Value, recorder: &mut Recorder| {
        let Some(items) = v.items() else { return };
        if items.len() != 3 || items[0].as_bytes() != Some(kind) {
            return;
        }
        let (Some(channel), Some(payload)) = (items[1].as_bytes(), items[2].as_bytes()) else { return };
        if let Some(slot) = subscriptions[i].iter().position(|&k| channels[k].as_bytes() == channel) {
            counts[i][slot] += 1;
        }
        let latency = sent_at_us(payload).map(|sent| {
            timestamped += 1;
            ((unix_now() * 1e6) as u64).saturating_sub(sent) * 1000
        });
        recorder.record(recorder.now_ns(), latency);
    })?;
    let received = listened.received;
    if let Some(e) = received.error {
        return Err(RoleError::Run(e));
    }
    let mut per_channel = Map::new();
    let mut consistent = true;
    for (k, name) in plan.channels.iter().enumerate() {
        let got: Vec<u64> = plan
            .subscriptions
            .iter()
            .zip(&counts)
            .flat_map(|(subs, c)| subs.iter().zip(c).filter(|(&kk, _)| kk == k).map(|(_, n)| *n))
            .collect();
        let (lo, hi) = (got.iter().min().copied().unwrap_or(0), got.iter().max().copied().unwrap_or(0));
        consistent &= lo == hi;
        per_channel.insert(name.clone(), json!({"subscribers": got.len(), "received": got.iter().sum::<u64>(),
                                                "min_per_subscriber": lo, "max_per_subscriber": hi}));
    }
    let total: u64 = counts.iter().flatten().sum();
    let mut warnings = Vec::new();
    if !consistent {
        warnings.push("the subscribers of some channel received different numbers of messages (see role_counts.per_channel)".to_string());
    }
    Ok(Outcome {
        name: "Messages",
        stats: listened.recorded,
        window: listened.window,
        warmup_seconds: listened.warmup_seconds,
        connections: plan.subscriptions.len() as u64,
        lost: received.lost,
        role: json!({
            "mode": if sharded { "ssubscribe" } else { "subscribe" },
            "connections": plan.subscriptions.len(),
            "subscriptions": plan.subscriptions.iter().map(Vec::len).sum::<usize>(),
            "channels": plan.channels.len(),
            "received_total": total,
            "timestamped_messages": timestamped,
            "drained": received.drained,
            "every_subscriber_got_every_message": consistent,
            "per_channel": per_channel,
        }),
        latency_from: "publish (redline-ts: payload prefix)",
        warnings,
    })
}

/// The send time a payload carries (`redline-ts:<unix microseconds>...`), if it carries one.
fn sent_at_us(payload: &[u8]) -> Option<u64> {
    let rest = payload.strip_prefix(TIMESTAMP_PREFIX)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}
