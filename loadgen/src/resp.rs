//! Zero-copy, streaming RESP2/RESP3 reply parser.
//!
//! The hot-path parser (`ReplyParser`) never materialises values: it walks the byte stream,
//! tracks nesting with a small stack, skips bulk payloads (even when they span many reads) and
//! reports one `ReplyInfo` per complete top-level reply. Only what the load generator needs is
//! extracted: error/null/push classification, the error line (borrowed from the input) and, on
//! request, the first bulk element of a top-level array (a SCAN cursor).
//!
//! `parse_value` is a simple non-streaming parser for setup-time replies (HELLO, CLUSTER SLOTS).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyKind {
    /// Anything that is not an error, a null or a push.
    Value,
    /// RESP2 null bulk / null array, RESP3 `_`.
    Null,
    /// `-ERR ...` or RESP3 blob error `!`.
    Error,
    /// RESP3 out-of-band push (`>`): not a reply to a request.
    Push,
}

#[derive(Debug)]
pub struct ReplyInfo<'a> {
    pub kind: ReplyKind,
    /// Bytes of this reply on the wire (only exact when the reply was parsed in one call;
    /// replies spanning reads are attributed across the calls).
    pub bytes: u64,
    /// For a simple error reply: the error line without the leading '-' (borrowed).
    pub error_line: &'a [u8],
    /// With `capture_first_bulk`: the first bulk element of a top-level array.
    pub captured: &'a [u8],
}

#[derive(Clone, Copy)]
struct Level {
    remaining: u64,
    attribute: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum ParseError {
    Protocol(String),
}

pub struct ReplyParser {
    stack: Vec<Level>,
    /// Bulk payload bytes (including the trailing CRLF) still to skip.
    bulk_skip: u64,
    /// The bulk being skipped is the first element of the top-level array and is captured.
    bulk_capture: bool,
    in_reply: bool,
    kind: ReplyKind,
    first_elem_seen: bool,
    bytes: u64,
    /// Capture the first bulk element of top-level arrays (SCAN cursor) into `captured`.
    pub capture_first_bulk: bool,
    pub captured: Vec<u8>,
    max_depth: usize,
}

impl Default for ReplyParser {
    fn default() -> Self {
        Self::new()
    }
}

fn parse_int(line: &[u8]) -> Option<i64> {
    let (neg, digits) = match line.first() {
        Some(b'-') => (true, &line[1..]),
        Some(b'+') => (false, &line[1..]),
        _ => (false, line),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as i64)?;
    }
    Some(if neg { -v } else { v })
}

impl ReplyParser {
    pub fn new() -> ReplyParser {
        ReplyParser {
            stack: Vec::with_capacity(16),
            bulk_skip: 0,
            bulk_capture: false,
            in_reply: false,
            kind: ReplyKind::Value,
            first_elem_seen: false,
            bytes: 0,
            capture_first_bulk: false,
            captured: Vec::new(),
            max_depth: 512,
        }
    }

    /// Forget any partial reply (after a reconnect).
    pub fn reset(&mut self) {
        self.stack.clear();
        self.bulk_skip = 0;
        self.bulk_capture = false;
        self.in_reply = false;
    }

    /// Called when one element (scalar or finished aggregate) completed. Returns true when the
    /// top-level reply is complete.
    #[inline]
    fn element_done(&mut self) -> bool {
        loop {
            match self.stack.last_mut() {
                None => return true,
                Some(top) => {
                    top.remaining -= 1;
                    if top.remaining > 0 {
                        return false;
                    }
                    let attr = top.attribute;
                    self.stack.pop();
                    if attr {
                        // An attribute precedes the real value and is not an element.
                        return false;
                    }
                }
            }
        }
    }

    #[inline]
    fn begin_element(&mut self, type_byte: u8) {
        if !self.in_reply {
            self.in_reply = true;
            self.kind = ReplyKind::Value;
            self.first_elem_seen = false;
            if type_byte == b'>' {
                self.kind = ReplyKind::Push;
            }
        }
    }

    /// Parse as many complete replies as possible from `buf`, calling `on_reply` for each.
    /// Returns the number of bytes consumed; unconsumed bytes (an incomplete header line) must
    /// be presented again, followed by more data.
    pub fn feed<F: FnMut(&ReplyInfo)>(&mut self, buf: &[u8], mut on_reply: F) -> Result<usize, ParseError> {
        let mut pos = 0usize;
        let n = buf.len();
        let mut reply_start = 0usize;
        loop {
            if self.bulk_skip > 0 {
                let avail = (n - pos) as u64;
                let take = avail.min(self.bulk_skip);
                if self.bulk_capture {
                    // Capture the payload without its trailing CRLF.
                    let payload_left = self.bulk_skip.saturating_sub(2);
                    let cap = take.min(payload_left) as usize;
                    self.captured.extend_from_slice(&buf[pos..pos + cap]);
                }
                pos += take as usize;
                self.bulk_skip -= take;
                if self.bulk_skip > 0 {
                    break;
                }
                self.bulk_capture = false;
                if self.element_done() {
                    self.finish(&buf[reply_start..pos], &mut on_reply, b"");
                    reply_start = pos;
                }
                continue;
            }
            if pos >= n {
                break;
            }
            let nl = match memchr::memchr(b'\n', &buf[pos..]) {
                Some(i) => pos + i,
                None => break,
            };
            if nl == pos || buf[nl - 1] != b'\r' {
                return Err(ParseError::Protocol(format!(
                    "line without CRLF: {:?}",
                    String::from_utf8_lossy(&buf[pos..nl.min(pos + 64)])
                )));
            }
            let t = buf[pos];
            let line = &buf[pos + 1..nl - 1];
            let line_start = pos;
            pos = nl + 1;
            self.begin_element(t);
            let top_level = self.stack.is_empty();
            let is_first_elem = self.stack.len() == 1 && !self.first_elem_seen && !self.stack[0].attribute;
            if self.stack.len() == 1 && !self.stack[0].attribute {
                self.first_elem_seen = true;
            }
            // Whether this header completed an element (and with it perhaps the reply).
            let element_complete = match t {
                b'+' | b':' | b'#' | b',' | b'(' => true,
                b'-' => {
                    if top_level {
                        self.kind = ReplyKind::Error;
                    }
                    true
                }
                b'_' => {
                    if top_level {
                        self.kind = ReplyKind::Null;
                    }
                    true
                }
                b'$' | b'!' | b'=' => {
                    let len = match parse_int(line) {
                        Some(v) => v,
                        None => return Err(self.bad_header(&buf[line_start..nl])),
                    };
                    if t == b'!' && top_level {
                        self.kind = ReplyKind::Error;
                    }
                    if len < 0 {
                        if top_level {
                            self.kind = ReplyKind::Null;
                        }
                        true
                    } else {
                        self.bulk_skip = len as u64 + 2;
                        if self.capture_first_bulk && is_first_elem && self.kind != ReplyKind::Push {
                            self.bulk_capture = true;
                            self.captured.clear();
                        }
                        false
                    }
                }
                b'*' | b'%' | b'~' | b'>' | b'|' => {
                    let count = match parse_int(line) {
                        Some(v) => v,
                        None => return Err(self.bad_header(&buf[line_start..nl])),
                    };
                    if count < 0 {
                        if top_level {
                            self.kind = ReplyKind::Null;
                        }
                        true
                    } else if count == 0 {
                        // An empty attribute is no element; an empty aggregate is one.
                        t != b'|'
                    } else {
                        if self.stack.len() >= self.max_depth {
                            return Err(ParseError::Protocol("reply nested too deeply".into()));
                        }
                        let elems = if t == b'%' || t == b'|' { count as u64 * 2 } else { count as u64 };
                        self.stack.push(Level { remaining: elems, attribute: t == b'|' });
                        false
                    }
                }
                _ => return Err(self.bad_header(&buf[line_start..nl])),
            };
            if element_complete && self.element_done() {
                let error_line = if t == b'-' { line } else { b"" };
                self.finish(&buf[reply_start..pos], &mut on_reply, error_line);
                reply_start = pos;
            }
        }
        // Bytes of a reply still in progress count towards it when it completes.
        self.bytes += (pos - reply_start) as u64;
        Ok(pos)
    }

    fn bad_header(&self, line: &[u8]) -> ParseError {
        ParseError::Protocol(format!(
            "unexpected reply header {:?}",
            String::from_utf8_lossy(&line[..line.len().min(64)])
        ))
    }

    #[inline]
    fn finish<F: FnMut(&ReplyInfo)>(&mut self, bytes: &[u8], on_reply: &mut F, error_line: &[u8]) {
        let total = self.bytes + bytes.len() as u64;
        self.bytes = 0;
        self.in_reply = false;
        let info = ReplyInfo {
            kind: self.kind,
            bytes: total,
            error_line,
            captured: &self.captured,
        };
        on_reply(&info);
    }
}

/// A fully materialised reply, for setup-time commands only.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    Array(Vec<Value>),
    /// RESP3 out-of-band data (`>`): pub/sub messages, tracking invalidations.
    Push(Vec<Value>),
}

impl Value {
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Simple(b) | Value::Bulk(b) => Some(b),
            _ => None,
        }
    }
    pub fn items(&self) -> Option<&[Value]> {
        match self {
            Value::Array(v) | Value::Push(v) => Some(v),
            _ => None,
        }
    }
    pub fn error(&self) -> Option<String> {
        match self {
            Value::Error(e) => Some(String::from_utf8_lossy(e).into_owned()),
            _ => None,
        }
    }
}

/// Parse one complete value from the start of `buf`: Ok(Some((value, used))) or Ok(None) when
/// more bytes are needed.
pub fn parse_value(buf: &[u8]) -> Result<Option<(Value, usize)>, ParseError> {
    let nl = match memchr::memchr(b'\n', buf) {
        Some(i) => i,
        None => return Ok(None),
    };
    if nl == 0 || buf[nl - 1] != b'\r' {
        return Err(ParseError::Protocol("line without CRLF".into()));
    }
    let t = buf[0];
    let line = &buf[1..nl - 1];
    let mut pos = nl + 1;
    let bad = || ParseError::Protocol(format!("bad reply line {:?}", String::from_utf8_lossy(line)));
    match t {
        b'+' | b',' | b'(' | b'#' => Ok(Some((Value::Simple(line.to_vec()), pos))),
        b'-' => Ok(Some((Value::Error(line.to_vec()), pos))),
        b':' => Ok(Some((Value::Int(parse_int(line).ok_or_else(bad)?), pos))),
        b'_' => Ok(Some((Value::Null, pos))),
        b'$' | b'!' | b'=' => {
            let len = parse_int(line).ok_or_else(bad)?;
            if len < 0 {
                return Ok(Some((Value::Null, pos)));
            }
            let end = pos + len as usize;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            let data = buf[pos..end].to_vec();
            pos = end + 2;
            Ok(Some((if t == b'!' { Value::Error(data) } else { Value::Bulk(data) }, pos)))
        }
        b'*' | b'%' | b'~' | b'>' | b'|' => {
            let count = parse_int(line).ok_or_else(bad)?;
            if count < 0 {
                return Ok(Some((Value::Null, pos)));
            }
            let elems = if t == b'%' || t == b'|' { count * 2 } else { count };
            let mut out = Vec::with_capacity(elems.min(1024) as usize);
            for _ in 0..elems {
                match parse_value(&buf[pos..])? {
                    Some((v, used)) => {
                        out.push(v);
                        pos += used;
                    }
                    None => return Ok(None),
                }
            }
            if t == b'|' {
                // attribute: skip it, return the value that follows
                return match parse_value(&buf[pos..])? {
                    Some((v, used)) => Ok(Some((v, pos + used))),
                    None => Ok(None),
                };
            }
            Ok(Some((if t == b'>' { Value::Push(out) } else { Value::Array(out) }, pos)))
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(p: &mut ReplyParser, chunks: &[&[u8]]) -> Vec<(ReplyKind, u64, Vec<u8>)> {
        let mut out = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        for c in chunks {
            pending.extend_from_slice(c);
            let used = p
                .feed(&pending, |r| out.push((r.kind, r.bytes, r.error_line.to_vec())))
                .unwrap();
            pending.drain(..used);
        }
        assert!(pending.is_empty(), "left over: {:?}", pending);
        out
    }

    #[test]
    fn simple_types() {
        let mut p = ReplyParser::new();
        let r = collect(&mut p, &[b"+OK\r\n:12\r\n$3\r\nfoo\r\n$-1\r\n-WRONGTYPE Operation\r\n"]);
        assert_eq!(r.len(), 5);
        assert_eq!(r[0].0, ReplyKind::Value);
        assert_eq!(r[3].0, ReplyKind::Null);
        assert_eq!(r[4].0, ReplyKind::Error);
        assert_eq!(r[4].2, b"WRONGTYPE Operation".to_vec());
    }

    #[test]
    fn split_anywhere() {
        let data: &[u8] = b"*3\r\n$3\r\nabc\r\n$-1\r\n*2\r\n:1\r\n$5\r\nhello\r\n+OK\r\n";
        for cut in 0..data.len() {
            for cut2 in cut..data.len() {
                let mut p = ReplyParser::new();
                let r = collect(&mut p, &[&data[..cut], &data[cut..cut2], &data[cut2..]]);
                assert_eq!(r.len(), 2, "cut at {cut},{cut2}");
                assert_eq!((r[0].0, r[0].1), (ReplyKind::Value, 37), "cut at {cut},{cut2}");
                assert_eq!((r[1].0, r[1].1), (ReplyKind::Value, 5), "cut at {cut},{cut2}");
            }
        }
    }

    #[test]
    fn resp3_types_and_push() {
        let mut p = ReplyParser::new();
        let r = collect(
            &mut p,
            &[b"%2\r\n+a\r\n:1\r\n+b\r\n#t\r\n_\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n|1\r\n+ttl\r\n:3\r\n,1.5\r\n~0\r\n"],
        );
        let kinds: Vec<_> = r.iter().map(|x| x.0).collect();
        assert_eq!(
            kinds,
            vec![ReplyKind::Value, ReplyKind::Null, ReplyKind::Push, ReplyKind::Value, ReplyKind::Value]
        );
    }

    #[test]
    fn big_bulk_across_reads_and_capture() {
        let mut p = ReplyParser::new();
        p.capture_first_bulk = true;
        let mut msg = b"*2\r\n$4\r\n1234\r\n*1\r\n$100000\r\n".to_vec();
        msg.extend_from_slice(&[b'x'; 100_000]);
        msg.extend_from_slice(b"\r\n");
        let chunks: Vec<&[u8]> = msg.chunks(777).collect();
        let r = collect(&mut p, &chunks);
        assert_eq!(r.len(), 1);
        assert_eq!(p.captured, b"1234".to_vec());
    }

    #[test]
    fn null_and_empty_aggregates() {
        let mut p = ReplyParser::new();
        let r = collect(&mut p, &[b"%-1\r\n*0\r\n|0\r\n+after-empty-attribute\r\n*1\r\n-ERR inner\r\n"]);
        let kinds: Vec<_> = r.iter().map(|x| x.0).collect();
        // The last: an error inside an array leaves the reply a value.
        assert_eq!(kinds, vec![ReplyKind::Null, ReplyKind::Value, ReplyKind::Value, ReplyKind::Value]);
    }

    #[test]
    fn rejects_garbage() {
        let mut p = ReplyParser::new();
        assert!(p.feed(b"?what\r\n", |_| {}).is_err());
    }

    #[test]
    fn parse_value_nested() {
        let (v, used) = parse_value(b"*2\r\n*3\r\n:0\r\n:5460\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n+x\r\n").unwrap().unwrap();
        assert_eq!(used, 49);
        match v {
            Value::Array(a) => assert_eq!(a.len(), 2),
            _ => panic!(),
        }
        assert!(parse_value(b"$5\r\nab").unwrap().is_none());
    }
}
