//! Statistics of completed requests. One type, `Tally`, counts them: per command over the
//! measured window, per command and second, and every sum of those (a run's totals, a second
//! over all commands, several runs). `ThreadStats` is one thread's tallies plus the server's
//! error replies by type and the connection events.

use crate::resp::ReplyKind;
use hdrhistogram::{Counter, Histogram};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Latencies are recorded in microseconds (as memtier does) up to one hour.
pub const HIST_MAX_US: u64 = 3_600_000_000;

/// How finely a tally's histogram records latencies: a window's tallies keep 3 significant
/// digits in u64 counts; per-second ones 2 digits in u32 counts, to stay small.
pub trait Resolution: Counter + 'static {
    const SIGNIFICANT_DIGITS: u8;
}

impl Resolution for u64 {
    const SIGNIFICANT_DIGITS: u8 = 3;
}

impl Resolution for u32 {
    const SIGNIFICANT_DIGITS: u8 = 2;
}

pub fn new_histogram<C: Resolution>() -> Histogram<C> {
    Histogram::new_with_bounds(1, HIST_MAX_US, C::SIGNIFICANT_DIGITS).expect("histogram bounds")
}

#[inline]
pub fn ns_to_us(ns: u64) -> u64 {
    ((ns + 500) / 1000).clamp(1, HIST_MAX_US)
}

/// One request answered in the measured window.
pub struct Completion<'a> {
    pub cmd: usize,
    pub latency_ns: u64,
    pub bytes_rx: u64,
    pub bytes_tx: u64,
    pub reply: ReplyKind,
    /// For an error reply: its line (the type is the first word).
    pub error_line: &'a [u8],
    /// A read in memtier's sense (GET): a value is a hit, a null a miss.
    pub counts_hits: bool,
}

/// Completed requests counted: how many, their hits and misses, bytes and latencies.
#[derive(Clone)]
pub struct Tally<C: Resolution> {
    pub ops: u64,
    pub hits: u64,
    pub misses: u64,
    pub bytes_rx: u64,
    pub bytes_tx: u64,
    pub latency_sum_ns: u64,
    pub latency_min_ns: u64,
    pub latency_max_ns: u64,
    /// Latencies in microseconds; made at the first count (most per-second tallies of a
    /// run with many commands stay empty).
    hist: Option<Histogram<C>>,
}

/// A command's (or all commands') tally over a measured window.
pub type WindowTally = Tally<u64>;
/// A command's (or all commands') tally over one second of the window.
pub type SecondTally = Tally<u32>;

impl<C: Resolution> Default for Tally<C> {
    fn default() -> Self {
        Tally {
            ops: 0,
            hits: 0,
            misses: 0,
            bytes_rx: 0,
            bytes_tx: 0,
            latency_sum_ns: 0,
            latency_min_ns: u64::MAX,
            latency_max_ns: 0,
            hist: None,
        }
    }
}

impl<C: Resolution> Tally<C> {
    #[inline]
    pub fn record(&mut self, c: &Completion) {
        self.ops += 1;
        if c.counts_hits {
            self.hits += u64::from(c.reply == ReplyKind::Value);
            self.misses += u64::from(c.reply == ReplyKind::Null);
        }
        self.bytes_rx += c.bytes_rx;
        self.bytes_tx += c.bytes_tx;
        self.latency_sum_ns += c.latency_ns;
        self.latency_min_ns = self.latency_min_ns.min(c.latency_ns);
        self.latency_max_ns = self.latency_max_ns.max(c.latency_ns);
        self.hist.get_or_insert_with(new_histogram).saturating_record(ns_to_us(c.latency_ns));
    }

    /// Count an event that carries no latency (a role's invalidation push): it counts in
    /// `ops`, not in the latency figures.
    #[inline]
    pub fn count_untimed(&mut self) {
        self.ops += 1;
    }

    /// How many of the counted requests carried a latency (all of them in memtier mode).
    pub fn timed(&self) -> u64 {
        self.hist.as_ref().map_or(0, |h| h.len())
    }

    pub fn merge(&mut self, o: &Tally<C>) {
        self.ops += o.ops;
        self.hits += o.hits;
        self.misses += o.misses;
        self.bytes_rx += o.bytes_rx;
        self.bytes_tx += o.bytes_tx;
        self.latency_sum_ns += o.latency_sum_ns;
        self.latency_min_ns = self.latency_min_ns.min(o.latency_min_ns);
        self.latency_max_ns = self.latency_max_ns.max(o.latency_max_ns);
        if let Some(h) = &o.hist {
            match &mut self.hist {
                Some(mine) => mine.add(h).expect("histogram add"),
                None => self.hist = Some(h.clone()),
            }
        }
    }

    pub fn sum<'a>(parts: impl IntoIterator<Item = &'a Tally<C>>) -> Tally<C> {
        let mut total = Tally::default();
        parts.into_iter().for_each(|p| total.merge(p));
        total
    }

    /// Mean latency in milliseconds (0 without latencies).
    pub fn mean_latency_ms(&self) -> f64 {
        match self.timed() {
            0 => 0.0,
            n => self.latency_sum_ns as f64 / 1e6 / n as f64,
        }
    }

    /// The latency in milliseconds below which `percent` % of the requests completed.
    pub fn percentile_ms(&self, percent: f64) -> Option<f64> {
        let h = self.hist.as_ref().filter(|h| !h.is_empty())?;
        Some(h.value_at_quantile(percent / 100.0) as f64 / 1000.0)
    }

    /// The latency histogram (an empty one without requests).
    pub fn histogram(&self) -> Cow<'_, Histogram<C>> {
        match &self.hist {
            Some(h) => Cow::Borrowed(h),
            None => Cow::Owned(new_histogram()),
        }
    }
}

#[derive(Clone, Default)]
pub struct ConnCounters {
    pub opened: u64,
    pub reconnects: u64,
    pub lost: u64,
}

/// Longest error line kept as an example of its type.
const ERROR_EXAMPLE_MAX: usize = 200;

pub struct ThreadStats {
    pub cmds: Vec<WindowTally>,
    /// seconds[s][cmd]
    pub seconds: Vec<Vec<SecondTally>>,
    pub errors: BTreeMap<Vec<u8>, u64>,
    /// The first full error line seen of each type (what a reader needs to see the cause).
    pub error_examples: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Null / non-null replies of all commands (redline's hit accounting for --command).
    pub null_replies: u64,
    pub value_replies: u64,
    pub conns: ConnCounters,
    pub moved: u64,
    pub ask: u64,
    ncmds: usize,
}

impl ThreadStats {
    pub fn new(ncmds: usize) -> ThreadStats {
        ThreadStats {
            cmds: vec![WindowTally::default(); ncmds],
            seconds: Vec::new(),
            errors: BTreeMap::new(),
            error_examples: BTreeMap::new(),
            null_replies: 0,
            value_replies: 0,
            conns: ConnCounters::default(),
            moved: 0,
            ask: 0,
            ncmds,
        }
    }

    /// Drop everything recorded so far (end of warm-up). Connection counters restart too.
    pub fn reset(&mut self) {
        let opened = self.conns.opened;
        *self = ThreadStats::new(self.ncmds);
        self.conns.opened = opened;
    }

    /// Count a completion in its command's tally and in its second's (`second` of the window).
    #[inline]
    pub fn record(&mut self, c: &Completion, second: usize) {
        match c.reply {
            ReplyKind::Error => self.record_error(c.error_line),
            ReplyKind::Null => self.null_replies += 1,
            _ => self.value_replies += 1,
        }
        self.cmds[c.cmd].record(c);
        self.grow_seconds(second + 1);
        self.seconds[second][c.cmd].record(c);
    }

    /// Count an event without a latency in command `cmd`'s tallies (`second` of the window).
    pub fn record_untimed(&mut self, cmd: usize, second: usize) {
        self.cmds[cmd].count_untimed();
        self.grow_seconds(second + 1);
        self.seconds[second][cmd].count_untimed();
    }

    fn grow_seconds(&mut self, len: usize) {
        while self.seconds.len() < len {
            self.seconds.push(vec![SecondTally::default(); self.ncmds]);
        }
    }

    pub fn record_error(&mut self, line: &[u8]) {
        let word_end = line.iter().position(|b| *b == b' ').unwrap_or(line.len());
        let word = &line[..word_end.min(64)];
        if let Some(n) = self.errors.get_mut(word) {
            *n += 1;
        } else {
            self.errors.insert(word.to_vec(), 1);
            self.error_examples.insert(word.to_vec(), line[..line.len().min(ERROR_EXAMPLE_MAX)].to_vec());
        }
    }

    /// All commands over the window.
    pub fn total(&self) -> WindowTally {
        WindowTally::sum(&self.cmds)
    }

    /// One command's (or with `None` all commands') per-second tallies, `n_seconds` long.
    pub fn second_series(&self, cmd: Option<usize>, n_seconds: usize) -> Vec<SecondTally> {
        (0..n_seconds)
            .map(|s| match (self.seconds.get(s), cmd) {
                (None, _) => SecondTally::default(),
                (Some(row), Some(c)) => row[c].clone(),
                (Some(row), None) => SecondTally::sum(row),
            })
            .collect()
    }

    pub fn merge(&mut self, o: &ThreadStats) {
        for (a, b) in self.cmds.iter_mut().zip(o.cmds.iter()) {
            a.merge(b);
        }
        self.grow_seconds(o.seconds.len());
        for (mine, theirs) in self.seconds.iter_mut().zip(o.seconds.iter()) {
            for (a, b) in mine.iter_mut().zip(theirs.iter()) {
                a.merge(b);
            }
        }
        for (k, v) in &o.errors {
            *self.errors.entry(k.clone()).or_insert(0) += v;
        }
        for (k, line) in &o.error_examples {
            self.error_examples.entry(k.clone()).or_insert_with(|| line.clone());
        }
        self.null_replies += o.null_replies;
        self.value_replies += o.value_replies;
        self.conns.opened += o.conns.opened;
        self.conns.reconnects += o.conns.reconnects;
        self.conns.lost += o.conns.lost;
        self.moved += o.moved;
        self.ask += o.ask;
    }
}
