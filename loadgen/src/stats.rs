//! Per-thread statistics: per command totals with an HDR histogram of latencies, a per-second
//! series for the measured window, server error replies by type, connection events.

use hdrhistogram::Histogram;
use std::collections::HashMap;

/// Latencies are recorded in microseconds (as memtier does) up to one hour.
pub const HIST_MAX_US: u64 = 3_600_000_000;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, HIST_MAX_US, 3).expect("histogram bounds")
}

/// Per-second histograms use 2 significant digits to stay small.
pub fn new_second_histogram() -> Histogram<u32> {
    Histogram::<u32>::new_with_bounds(1, HIST_MAX_US, 2).expect("histogram bounds")
}

#[inline]
pub fn ns_to_us(ns: u64) -> u64 {
    ((ns + 500) / 1000).clamp(1, HIST_MAX_US)
}

#[derive(Clone)]
pub struct CmdStats {
    pub ops: u64,
    pub hits: u64,
    pub misses: u64,
    pub bytes_rx: u64,
    pub bytes_tx: u64,
    pub latency_sum_ns: u64,
    pub latency_min_ns: u64,
    pub latency_max_ns: u64,
    pub hist: Histogram<u64>,
}

impl CmdStats {
    pub fn new() -> CmdStats {
        CmdStats {
            ops: 0,
            hits: 0,
            misses: 0,
            bytes_rx: 0,
            bytes_tx: 0,
            latency_sum_ns: 0,
            latency_min_ns: u64::MAX,
            latency_max_ns: 0,
            hist: new_histogram(),
        }
    }

    pub fn merge(&mut self, o: &CmdStats) {
        self.ops += o.ops;
        self.hits += o.hits;
        self.misses += o.misses;
        self.bytes_rx += o.bytes_rx;
        self.bytes_tx += o.bytes_tx;
        self.latency_sum_ns += o.latency_sum_ns;
        self.latency_min_ns = self.latency_min_ns.min(o.latency_min_ns);
        self.latency_max_ns = self.latency_max_ns.max(o.latency_max_ns);
        self.hist.add(&o.hist).expect("histogram add");
    }
}

impl Default for CmdStats {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Clone)]
pub struct SecondStats {
    pub ops: u64,
    pub bytes_rx: u64,
    pub bytes_tx: u64,
    pub latency_sum_ns: u64,
    pub latency_min_ns: u64,
    pub latency_max_ns: u64,
    pub hist: Option<Histogram<u32>>,
}

impl SecondStats {
    pub fn empty() -> SecondStats {
        SecondStats {
            ops: 0,
            bytes_rx: 0,
            bytes_tx: 0,
            latency_sum_ns: 0,
            latency_min_ns: u64::MAX,
            latency_max_ns: 0,
            hist: None,
        }
    }

    pub fn merge(&mut self, o: &SecondStats) {
        self.ops += o.ops;
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
}

pub struct Completion {
    pub cmd: usize,
    pub latency_ns: u64,
    pub bytes_rx: u64,
    pub bytes_tx: u64,
    pub hits: u64,
    pub misses: u64,
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
    pub cmds: Vec<CmdStats>,
    /// seconds[s][cmd]
    pub seconds: Vec<Vec<SecondStats>>,
    pub errors: HashMap<Vec<u8>, u64>,
    /// The first full error line seen of each type (what a reader needs to see the cause).
    pub error_examples: HashMap<Vec<u8>, Vec<u8>>,
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
            cmds: (0..ncmds).map(|_| CmdStats::new()).collect(),
            seconds: Vec::new(),
            errors: HashMap::new(),
            error_examples: HashMap::new(),
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

    #[inline]
    pub fn record(&mut self, c: &Completion, second: usize) {
        let s = &mut self.cmds[c.cmd];
        s.ops += 1;
        s.hits += c.hits;
        s.misses += c.misses;
        s.bytes_rx += c.bytes_rx;
        s.bytes_tx += c.bytes_tx;
        s.latency_sum_ns += c.latency_ns;
        if c.latency_ns < s.latency_min_ns {
            s.latency_min_ns = c.latency_ns;
        }
        if c.latency_ns > s.latency_max_ns {
            s.latency_max_ns = c.latency_ns;
        }
        let us = ns_to_us(c.latency_ns);
        s.hist.saturating_record(us);
        while self.seconds.len() <= second {
            self.seconds.push((0..self.ncmds).map(|_| SecondStats::empty()).collect());
        }
        let ss = &mut self.seconds[second][c.cmd];
        ss.ops += 1;
        ss.bytes_rx += c.bytes_rx;
        ss.bytes_tx += c.bytes_tx;
        ss.latency_sum_ns += c.latency_ns;
        if c.latency_ns < ss.latency_min_ns {
            ss.latency_min_ns = c.latency_ns;
        }
        if c.latency_ns > ss.latency_max_ns {
            ss.latency_max_ns = c.latency_ns;
        }
        ss.hist.get_or_insert_with(new_second_histogram).saturating_record(us);
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

    pub fn merge(&mut self, o: &ThreadStats) {
        for (a, b) in self.cmds.iter_mut().zip(o.cmds.iter()) {
            a.merge(b);
        }
        while self.seconds.len() < o.seconds.len() {
            self.seconds.push((0..self.ncmds).map(|_| SecondStats::empty()).collect());
        }
        for (i, sec) in o.seconds.iter().enumerate() {
            for (a, b) in self.seconds[i].iter_mut().zip(sec.iter()) {
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
