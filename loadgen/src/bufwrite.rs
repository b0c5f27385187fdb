//! Unchecked appends into a byte buffer whose capacity was reserved beforehand. Request
//! building is the client's hottest user-space path at deep pipelines; these helpers avoid a
//! capacity check and a libc memmove call per small piece.

const DIGIT_PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

#[inline]
pub fn digits(v: u64) -> usize {
    let mut n = 1;
    let mut x = v;
    while x >= 10_000 {
        x /= 10_000;
        n += 4;
    }
    if x >= 1000 {
        n + 3
    } else if x >= 100 {
        n + 2
    } else if x >= 10 {
        n + 1
    } else {
        n
    }
}

/// A cursor over a Vec's spare capacity. `Writer::new` reserves `max` bytes; every put must
/// stay within that reservation (checked in debug builds). `finish` commits the length.
pub struct Writer<'a> {
    vec: &'a mut Vec<u8>,
    len: usize,
    /// End of the reservation (read by the debug-build check only).
    limit: usize,
}

impl<'a> Writer<'a> {
    #[inline]
    pub fn new(vec: &'a mut Vec<u8>, max: usize) -> Writer<'a> {
        vec.reserve(max);
        let len = vec.len();
        Writer { limit: len + max, vec, len }
    }

    #[inline(always)]
    fn dst(&mut self, n: usize) -> *mut u8 {
        debug_assert!(self.len + n <= self.limit, "Writer overflow");
        // SAFETY: len + n is within the capacity reserved in `new`.
        unsafe { self.vec.as_mut_ptr().add(self.len) }
    }

    #[inline(always)]
    pub fn put(&mut self, src: &[u8]) {
        let n = src.len();
        let d = self.dst(n);
        // SAFETY: d has room for n bytes (see `dst`); src and the Vec's spare capacity do not overlap.
        unsafe {
            let s = src.as_ptr();
            if n <= 16 {
                if n >= 8 {
                    let a = (s as *const u64).read_unaligned();
                    let b = (s.add(n - 8) as *const u64).read_unaligned();
                    (d as *mut u64).write_unaligned(a);
                    (d.add(n - 8) as *mut u64).write_unaligned(b);
                } else if n >= 4 {
                    let a = (s as *const u32).read_unaligned();
                    let b = (s.add(n - 4) as *const u32).read_unaligned();
                    (d as *mut u32).write_unaligned(a);
                    (d.add(n - 4) as *mut u32).write_unaligned(b);
                } else {
                    for i in 0..n {
                        *d.add(i) = *s.add(i);
                    }
                }
            } else if n <= 32 {
                let a = (s as *const u128).read_unaligned();
                let b = (s.add(n - 16) as *const u128).read_unaligned();
                (d as *mut u128).write_unaligned(a);
                (d.add(n - 16) as *mut u128).write_unaligned(b);
            } else {
                std::ptr::copy_nonoverlapping(s, d, n);
            }
        }
        self.len += n;
    }

    #[inline(always)]
    pub fn put_byte(&mut self, b: u8) {
        let d = self.dst(1);
        // SAFETY: room for one byte (see `dst`).
        unsafe { *d = b };
        self.len += 1;
    }

    #[inline(always)]
    pub fn put_crlf(&mut self) {
        let d = self.dst(2);
        // SAFETY: room for two bytes (see `dst`).
        unsafe { (d as *mut u16).write_unaligned(u16::from_le_bytes(*b"\r\n")) };
        self.len += 2;
    }

    /// Decimal digits of `v` (exactly `digits(v)` bytes).
    #[inline(always)]
    pub fn put_u64(&mut self, mut v: u64) {
        let n = digits(v);
        let d = self.dst(n);
        // SAFETY: room for n bytes (see `dst`); every index written is below n.
        unsafe {
            let mut i = n;
            while v >= 100 {
                let r = (v % 100) as usize * 2;
                v /= 100;
                i -= 2;
                *d.add(i) = DIGIT_PAIRS[r];
                *d.add(i + 1) = DIGIT_PAIRS[r + 1];
            }
            if v >= 10 {
                let r = v as usize * 2;
                i -= 2;
                *d.add(i) = DIGIT_PAIRS[r];
                *d.add(i + 1) = DIGIT_PAIRS[r + 1];
            } else {
                i -= 1;
                *d.add(i) = b'0' + v as u8;
            }
            debug_assert_eq!(i, 0);
        }
        self.len += n;
    }

    /// `$<len>\r\n`
    #[inline(always)]
    pub fn put_bulk_header(&mut self, len: usize) {
        self.put_byte(b'$');
        self.put_u64(len as u64);
        self.put_crlf();
    }

    #[inline]
    pub fn finish(self) -> usize {
        // SAFETY: every byte up to self.len was written above, within the reserved capacity.
        unsafe { self.vec.set_len(self.len) };
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_and_numbers() {
        for v in [0u64, 9, 10, 99, 100, 999, 1000, 9999, 10_000, 123_456_789, u64::MAX] {
            let mut out = b"x".to_vec();
            let mut w = Writer::new(&mut out, 64);
            w.put_u64(v);
            w.finish();
            assert_eq!(out, format!("x{v}").into_bytes());
            assert_eq!(digits(v), v.to_string().len());
        }
    }

    #[test]
    fn puts_of_every_small_size() {
        let src: Vec<u8> = (0..100u8).collect();
        for n in 0..100 {
            let mut out = Vec::new();
            let mut w = Writer::new(&mut out, 200);
            w.put(&src[..n]);
            w.put_crlf();
            w.put_bulk_header(n);
            w.finish();
            let mut expect = src[..n].to_vec();
            expect.extend_from_slice(format!("\r\n${n}\r\n").as_bytes());
            assert_eq!(out, expect);
        }
    }
}
