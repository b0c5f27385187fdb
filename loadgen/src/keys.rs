//! Key index generation: memtier's R (uniform), S (sequential), G (gaussian), P (parallel:
//! sequential over this connection's share of the range) and Z (zipf) patterns.

use crate::cli::KeyPattern;
use crate::rng::Rng;

#[derive(Clone, Debug)]
pub struct ZipfParams {
    exp: f64,
    min: f64,
    max: f64,
    h_min: f64,
    h_max: f64,
    s: f64,
    one_minus_exp: f64,
}

impl ZipfParams {
    /// Rejection-inversion sampling (Hörmann & Derflinger, 1996) over [min, max].
    pub fn new(exp: f64, key_min: u64, key_max: u64) -> ZipfParams {
        let min = if key_min == 0 { 1.0 } else { key_min as f64 };
        let max = if (key_max as f64) <= min { min } else { key_max as f64 };
        let mut p = ZipfParams { exp, min, max, h_min: 0.0, h_max: 0.0, s: 0.0, one_minus_exp: 1.0 - exp };
        if exp < 1e-4 {
            return p;
        }
        if (exp - 1.0).abs() < 1e-4 {
            p.exp = 1.0;
            p.h_min = (min + 0.5).ln() - 1.0 / min;
            p.h_max = (max + 0.5).ln();
            let t = (min + 1.5).ln() - 1.0 / (min + 1.0);
            p.s = min + 1.0 - t.exp();
        } else {
            let q = p.one_minus_exp;
            p.h_min = (min + 0.5).powf(q) - q * min.powf(-exp);
            p.h_max = (max + 0.5).powf(q);
            let t = (min + 1.5).powf(q) - q * (min + 1.0).powf(-exp);
            p.s = min + 1.0 - t.powf(1.0 / q);
        }
        p
    }

    pub fn sample(&self, rng: &mut Rng) -> u64 {
        if self.exp < 1e-4 {
            return rng.range(self.min as u64, self.max as u64);
        }
        for _ in 0..1000 {
            let u = rng.unit() * (self.h_max - self.h_min) + self.h_min;
            let mut x = if self.exp == 1.0 { u.exp() } else { u.powf(1.0 / self.one_minus_exp) };
            if x < self.min - 0.5 {
                x = self.min + 0.5;
            }
            if x >= self.max + 0.5 {
                x = self.max;
            }
            let k = (x + 0.5).floor();
            if k - x <= self.s {
                return k as u64;
            }
            let accept = if self.exp == 1.0 {
                u > (k + 0.5).ln() - 1.0 / k
            } else {
                let t = u - (k + 0.5).powf(self.one_minus_exp);
                t / self.one_minus_exp > -k.powf(-self.exp)
            };
            if accept {
                return k as u64;
            }
        }
        self.min as u64
    }
}

#[derive(Clone, Debug)]
pub struct KeyGen {
    pub min: u64,
    pub max: u64,
    next: Vec<u64>,
    stddev: f64,
    median: f64,
    zipf: Option<ZipfParams>,
    pub rng: Rng,
}

pub struct KeyGenSpec {
    pub min: u64,
    pub max: u64,
    pub iterators: usize,
    pub stddev: Option<f64>,
    pub median: Option<f64>,
    pub zipf_exp: f64,
    pub uses_zipf: bool,
    pub seed: u64,
}

impl KeyGen {
    pub fn new(spec: &KeyGenSpec) -> KeyGen {
        let len = (spec.max - spec.min) as f64;
        KeyGen {
            min: spec.min,
            max: spec.max,
            next: vec![spec.min; spec.iterators.max(1)],
            stddev: spec.stddev.filter(|s| *s > 0.0).unwrap_or(len / 6.0),
            median: spec.median.filter(|m| *m > 0.0).unwrap_or(len / 2.0 + spec.min as f64 + 0.5),
            zipf: if spec.uses_zipf { Some(ZipfParams::new(spec.zipf_exp, spec.min, spec.max)) } else { None },
            rng: Rng::new(spec.seed),
        }
    }

    /// Next key index for `pattern`, using sequential iterator `iter` for S and P.
    #[inline]
    pub fn next(&mut self, pattern: KeyPattern, iter: usize) -> u64 {
        match pattern {
            KeyPattern::Random => self.rng.range(self.min, self.max),
            KeyPattern::Sequential | KeyPattern::Parallel => {
                let slot = &mut self.next[iter];
                if *slot < self.min || *slot > self.max {
                    *slot = self.min;
                }
                let k = *slot;
                *slot = if k >= self.max { self.min } else { k + 1 };
                k
            }
            KeyPattern::Gaussian => {
                if self.min == self.max {
                    return self.min;
                }
                for _ in 0..1000 {
                    let v = self.rng.gaussian() * self.stddev + self.median;
                    if v >= self.min as f64 && v <= (self.max + 1) as f64 {
                        return (v as u64).min(self.max);
                    }
                }
                self.median as u64
            }
            KeyPattern::Zipf => match &self.zipf {
                Some(z) => z.sample(&mut self.rng),
                None => self.rng.range(self.min, self.max),
            },
        }
    }
}

/// The keys that parallel (P) connection `index` of `total` walks, as memtier_benchmark
/// computes them (client.cpp): every connection gets a slice of `(max - min) / total + 1`
/// keys starting at `min + index × size`, except that the last connection ends at `max`.
/// The slices therefore do not split the range exactly: with more connections than keys they
/// run past `max` (keys above --key-maximum get written), and the last connection can start
/// above `max`, in which case memtier repeats its first key forever (returned as `(lo, lo)`).
pub fn parallel_slice(min: u64, max: u64, index: u64, total: u64) -> (u64, u64) {
    let size = (max - min) / total.max(1) + 1;
    let lo = min.saturating_add(size.saturating_mul(index));
    let hi = if index + 1 >= total { max.max(lo) } else { lo.saturating_add(size - 1) };
    (lo, hi)
}

/// How many requests of one connection walking `slice_len` keys come before the requests
/// repeat: one command with `keys_per_request` sequential draws (each `__key__` is its own
/// draw) repeats after `slice_len / gcd(slice_len, keys_per_request)` requests; several
/// commands (run `ratio` times in a row each, with an iterator each) after enough rounds for
/// every command to come back to its start. A command without keys counts as one key.
pub fn distinct_requests(slice_len: u64, commands: &[(u64, u64)]) -> u64 {
    let period = |keys: u64| slice_len / gcd(slice_len, keys.max(1));
    if let [(_, keys)] = commands {
        return period(*keys);
    }
    let per_round: u64 = commands.iter().map(|&(ratio, _)| ratio).sum();
    let rounds = commands
        .iter()
        .filter(|&&(ratio, _)| ratio > 0)
        .map(|&(ratio, keys)| period(keys).div_ceil(ratio))
        .max()
        .unwrap_or(0);
    rounds.saturating_mul(per_round)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(min: u64, max: u64) -> KeyGenSpec {
        KeyGenSpec { min, max, iterators: 2, stddev: None, median: None, zipf_exp: 1.0, uses_zipf: true, seed: 1 }
    }

    #[test]
    fn sequential_wraps_per_iterator() {
        let mut g = KeyGen::new(&spec(5, 7));
        let a: Vec<u64> = (0..5).map(|_| g.next(KeyPattern::Sequential, 0)).collect();
        assert_eq!(a, vec![5, 6, 7, 5, 6]);
        assert_eq!(g.next(KeyPattern::Sequential, 1), 5);
    }

    #[test]
    fn random_and_gaussian_stay_in_range() {
        let mut g = KeyGen::new(&spec(100, 200));
        for _ in 0..10_000 {
            let r = g.next(KeyPattern::Random, 0);
            assert!((100..=200).contains(&r));
            let n = g.next(KeyPattern::Gaussian, 0);
            assert!((100..=200).contains(&n));
            let z = g.next(KeyPattern::Zipf, 0);
            assert!((100..=200).contains(&z));
        }
    }

    #[test]
    fn zipf_prefers_small_keys() {
        let mut g = KeyGen::new(&spec(1, 1000));
        let small = (0..10_000).filter(|_| g.next(KeyPattern::Zipf, 0) <= 10).count();
        assert!(small > 3000, "only {small} of 10000 draws in the top 10 keys");
    }

    #[test]
    fn parallel_slices_follow_memtier() {
        // 10 connections over 0..=250: slices of 26 keys, the last one 234..=250.
        assert_eq!(parallel_slice(0, 250, 0, 10), (0, 25));
        assert_eq!(parallel_slice(0, 250, 8, 10), (208, 233));
        assert_eq!(parallel_slice(0, 250, 9, 10), (234, 250));
        // 200 connections over 1..=10: one key each, past the maximum; the last starts at 200.
        assert_eq!(parallel_slice(1, 10, 0, 200), (1, 1));
        assert_eq!(parallel_slice(1, 10, 150, 200), (151, 151));
        assert_eq!(parallel_slice(1, 10, 199, 200), (200, 200));
        // one connection: the whole range
        assert_eq!(parallel_slice(5, 9, 0, 1), (5, 9));
    }

    /// Members a one-key sorted set gets from `ZADD key __key__ __key__` (score, member: two
    /// sequential draws per request) with the P pattern, counted by drawing as the tool does.
    fn zadd_pair_members(min: u64, max: u64, connections: u64, requests: u64) -> usize {
        let mut members = std::collections::HashSet::new();
        for index in 0..connections {
            let (lo, hi) = parallel_slice(min, max, index, connections);
            let mut g = KeyGen::new(&spec(lo, hi));
            for _ in 0..requests {
                let _score = g.next(KeyPattern::Parallel, 0);
                members.insert(g.next(KeyPattern::Parallel, 0));
            }
        }
        members.len()
    }

    #[test]
    fn upstream_zset_preloads_build_memtiers_member_counts() {
        // The preload lines of the upstream 1key-zset suites (issue #23), as memtier builds them.
        assert_eq!(zadd_pair_members(0, 250, 10, 25), 134);
        assert_eq!(zadd_pair_members(0, 1_000_000, 10, 100_000), 949_996);
        assert_eq!(zadd_pair_members(0, 1_000_000, 400, 10_000), 998_950);
    }

    #[test]
    fn distinct_requests_per_slice() {
        assert_eq!(distinct_requests(100_001, &[(1, 1)]), 100_001);
        assert_eq!(distinct_requests(100_001, &[(1, 2)]), 100_001); // odd slice: two passes of draws
        assert_eq!(distinct_requests(26, &[(1, 2)]), 13); // even slice: one pass
        assert_eq!(distinct_requests(10, &[(1, 0)]), 10);
        assert_eq!(distinct_requests(10, &[(1, 1), (0, 1)]), 10); // SET:GET 1:0
        assert_eq!(distinct_requests(10, &[(2, 1), (1, 1)]), 30); // 10 rounds of 3
    }
}
