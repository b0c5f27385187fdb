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

/// The share of [min, max] that parallel connection `index` of `total` owns: an exact
/// partition (every key in exactly one share, sizes differ by at most one).
pub fn parallel_share(min: u64, max: u64, index: u64, total: u64) -> Option<(u64, u64)> {
    let count = (max - min) as u128 + 1;
    let lo = min as u128 + count * index as u128 / total as u128;
    let hi = min as u128 + count * (index as u128 + 1) / total as u128;
    if hi <= lo {
        // More connections than keys: this connection has nothing of its own.
        return None;
    }
    Some((lo as u64, (hi - 1) as u64))
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
    fn parallel_shares_partition_exactly() {
        for (min, max, n) in [(1u64, 10u64, 3u64), (0, 10, 4), (1, 4, 3), (1, 1_000_000, 200), (7, 7, 5)] {
            let mut covered = Vec::new();
            for i in 0..n {
                if let Some((lo, hi)) = parallel_share(min, max, i, n) {
                    covered.extend(lo..=hi);
                }
            }
            let expect: Vec<u64> = (min..=max).collect();
            assert_eq!(covered, expect, "min={min} max={max} n={n}");
        }
    }
}
