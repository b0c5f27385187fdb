//! The workload: command templates compiled from `--command` (or the built-in SET/GET mix),
//! and the per-connection request generator that writes requests straight into the
//! connection's output buffer (no per-request allocation).

use crate::cli::{Config, DataSize, KeyPattern};
use crate::keys::{KeyGen, KeyGenSpec};
use crate::bufwrite::{self, Writer};
use crate::rng::Rng;
use crate::slots::{key_slot, SlotTable};

const KEY_PLACEHOLDER: &str = "__key__";
const DATA_PLACEHOLDER: &str = "__data__";

#[derive(Clone, Debug, PartialEq)]
pub enum Segment {
    /// Constant bytes, already RESP-encoded (including the "*N" header for the first one).
    Raw(Vec<u8>),
    /// A generated key, with constant text around it inside the same argument.
    Key { prefix: Vec<u8>, suffix: Vec<u8> },
    /// A generated value.
    Data,
    /// The current SCAN cursor (scan incremental iteration).
    Cursor,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyUse {
    /// Hit if the reply is not null (GET).
    HitIfNotNull,
    /// Not a read in memtier's sense: hits/misses are not counted.
    None,
}

#[derive(Clone, Debug)]
pub struct Template {
    /// Name used for the per-command statistics ("Sets", "Gets", "Hsets", ...).
    pub stats_name: String,
    /// First word of the command, upper case (for display).
    pub command_type: String,
    pub segments: Vec<Segment>,
    pub key_pattern: KeyPattern,
    pub ratio: u32,
    pub reply_use: ReplyUse,
    pub key_count: usize,
    /// Executed directly (false for the stats-only "SCAN <cursor>" entry).
    pub executable: bool,
}

#[derive(Clone, Debug)]
pub struct Workload {
    pub templates: Vec<Template>,
    /// memtier's SET:GET ratio when no --command is given.
    pub builtin_ratio: Option<(u32, u32)>,
    pub scan_continuation: Option<Template>,
    pub warnings: Vec<String>,
}

/// memtier's tokenizer for --command: blanks separate arguments, "double" and 'single' quotes
/// group, \n \r \t \b \a \xHH escapes inside double quotes.
pub fn split_command(cmd: &str) -> Result<Vec<Vec<u8>>, String> {
    let b = cmd.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let err = |why: &str| Err(format!("--command '{cmd}': {why}"));
    let hex_escape = |i: usize| {
        (i + 3 < b.len() && b[i + 1] == b'x' && b[i + 2].is_ascii_hexdigit() && b[i + 3].is_ascii_hexdigit())
            .then(|| u8::from_str_radix(std::str::from_utf8(&b[i + 2..i + 4]).unwrap(), 16).unwrap())
    };
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let mut tok = Vec::new();
        // The quote character of the quoted part being read, if any.
        let mut quote: Option<u8> = None;
        loop {
            let c = b.get(i).copied();
            match (quote, c) {
                (Some(_), None) => return err("unterminated quotes"),
                (Some(b'"'), Some(b'\\')) if hex_escape(i).is_some() => {
                    tok.push(hex_escape(i).unwrap());
                    i += 4;
                }
                (Some(b'"'), Some(b'\\')) if i + 1 < b.len() => {
                    tok.push(match b[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                    i += 2;
                }
                (Some(b'\''), Some(b'\\')) if b.get(i + 1) == Some(&b'\'') => {
                    tok.push(b'\'');
                    i += 2;
                }
                (Some(q), Some(x)) if x == q => {
                    if i + 1 < b.len() && !b[i + 1].is_ascii_whitespace() {
                        return err("closing quote must be followed by a space");
                    }
                    i += 1;
                    break;
                }
                (None, None | Some(b' ' | b'\n' | b'\r' | b'\t')) => break,
                (None, Some(q @ (b'"' | b'\''))) => {
                    quote = Some(q);
                    i += 1;
                }
                (_, Some(other)) => {
                    tok.push(other);
                    i += 1;
                }
            }
        }
        out.push(tok);
    }
    if out.is_empty() {
        return err("empty command");
    }
    Ok(out)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

fn push_bulk_header(out: &mut Vec<u8>, len: usize) {
    out.push(b'$');
    write_u64(out, len as u64);
    out.extend_from_slice(b"\r\n");
}

/// Tokens that look like a placeholder (`__word__`) but are neither __key__ nor __data__.
fn suspicious_placeholders(arg: &[u8]) -> Vec<String> {
    let s = String::from_utf8_lossy(arg);
    let mut found = Vec::new();
    let bytes = s.as_bytes();
    let mut i = 0;
    while i + 4 < bytes.len() {
        if bytes[i] == b'_' && bytes[i + 1] == b'_' {
            let start = i;
            let mut j = i + 2;
            while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || (bytes[j] == b'_' && !(j + 1 < bytes.len() && bytes[j + 1] == b'_'))) {
                j += 1;
            }
            if j + 1 < bytes.len() && bytes[j] == b'_' && bytes[j + 1] == b'_' && j > start + 2 {
                let tok = &s[start..j + 2];
                if tok != KEY_PLACEHOLDER && tok != DATA_PLACEHOLDER {
                    found.push(tok.to_string());
                }
                i = j + 2;
                continue;
            }
        }
        i += 1;
    }
    found
}

pub fn stats_name(command_type: &str) -> String {
    let lower = command_type.to_lowercase();
    let mut c = lower.chars();
    let mut name: String = match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    };
    name.push('s');
    name
}

/// Compile one --command into RESP segments.
pub fn compile_command(text: &str, warnings: &mut Vec<String>) -> Result<(Vec<Segment>, usize, String), String> {
    let args = split_command(text)?;
    let mut segs: Vec<Segment> = Vec::new();
    let mut raw: Vec<u8> = Vec::new();
    raw.push(b'*');
    write_u64(&mut raw, args.len() as u64);
    raw.extend_from_slice(b"\r\n");
    let mut keys = 0;
    for (i, arg) in args.iter().enumerate() {
        for s in suspicious_placeholders(arg) {
            warnings.push(format!(
                "command '{text}': '{s}' is not a placeholder (only __key__ and __data__ are); it is sent literally"
            ));
        }
        if i > 0 {
            if let Some(p) = find(arg, KEY_PLACEHOLDER.as_bytes()) {
                if !raw.is_empty() {
                    segs.push(Segment::Raw(std::mem::take(&mut raw)));
                }
                segs.push(Segment::Key {
                    prefix: arg[..p].to_vec(),
                    suffix: arg[p + KEY_PLACEHOLDER.len()..].to_vec(),
                });
                keys += 1;
                continue;
            }
            if find(arg, DATA_PLACEHOLDER.as_bytes()).is_some() {
                if arg.as_slice() != DATA_PLACEHOLDER.as_bytes() {
                    return Err(format!(
                        "--command '{text}': the data placeholder __data__ can't be combined with other text in one argument"
                    ));
                }
                if !raw.is_empty() {
                    segs.push(Segment::Raw(std::mem::take(&mut raw)));
                }
                segs.push(Segment::Data);
                continue;
            }
        }
        push_bulk_header(&mut raw, arg.len());
        raw.extend_from_slice(arg);
        raw.extend_from_slice(b"\r\n");
    }
    if !raw.is_empty() {
        segs.push(Segment::Raw(raw));
    }
    let command_type = String::from_utf8_lossy(&args[0]).to_uppercase();
    Ok((segs, keys, command_type))
}

fn builtin(command: &str, with_data: bool, pattern: KeyPattern, reply_use: ReplyUse) -> Template {
    let mut raw = Vec::new();
    raw.extend_from_slice(if with_data { b"*3\r\n" } else { b"*2\r\n" });
    push_bulk_header(&mut raw, command.len());
    raw.extend_from_slice(command.as_bytes());
    raw.extend_from_slice(b"\r\n");
    let mut segments = vec![Segment::Raw(raw), Segment::Key { prefix: Vec::new(), suffix: Vec::new() }];
    if with_data {
        segments.push(Segment::Data);
    }
    Template {
        stats_name: stats_name(command),
        command_type: command.to_string(),
        segments,
        key_pattern: pattern,
        ratio: 1,
        reply_use,
        key_count: 1,
        executable: true,
    }
}

pub fn build_workload(cfg: &Config) -> Result<Workload, String> {
    let mut warnings = Vec::new();
    if cfg.commands.is_empty() {
        return Ok(Workload {
            templates: vec![
                builtin("SET", true, cfg.key_pattern.0, ReplyUse::None),
                builtin("GET", false, cfg.key_pattern.1, ReplyUse::HitIfNotNull),
            ],
            builtin_ratio: Some(cfg.ratio),
            scan_continuation: None,
            warnings,
        });
    }
    let mut templates = Vec::new();
    let mut seen_names: Vec<String> = Vec::new();
    for spec in &cfg.commands {
        let (segments, key_count, command_type) = compile_command(&spec.text, &mut warnings)?;
        let mut name = stats_name(&command_type);
        let dup = seen_names.iter().filter(|n| **n == name).count();
        seen_names.push(name.clone());
        if dup > 0 {
            name = format!("{name} #{}", dup + 1);
        }
        templates.push(Template {
            stats_name: name,
            command_type,
            segments,
            key_pattern: spec.key_pattern,
            ratio: spec.ratio,
            reply_use: ReplyUse::None,
            key_count,
            executable: true,
        });
    }
    let mut scan_continuation = None;
    if cfg.scan_incremental_iteration {
        if templates.len() != 1 {
            return Err("--scan-incremental-iteration requires exactly one --command (a SCAN command)".into());
        }
        let args = split_command(&cfg.commands[0].text)?;
        if !args[0].eq_ignore_ascii_case(b"SCAN") || args.len() < 2 {
            return Err("--scan-incremental-iteration requires a SCAN command with a cursor argument (e.g. 'SCAN 0')".into());
        }
        templates[0].stats_name = "Scan 0s".into();
        templates[0].command_type = "SCAN 0".into();
        // Continuation: SCAN <cursor> followed by the rest of the original arguments.
        let rest: Vec<String> = args[2..].iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        let cont_text = format!("SCAN __key__ {}", rest.join(" "));
        let (mut segs, _, _) = compile_command(cont_text.trim(), &mut Vec::new())?;
        for s in segs.iter_mut() {
            if let Segment::Key { .. } = s {
                *s = Segment::Cursor;
            }
        }
        let cont = Template {
            stats_name: "Scan <cursor>s".into(),
            command_type: "SCAN <cursor>".into(),
            segments: segs,
            key_pattern: templates[0].key_pattern,
            ratio: 0,
            reply_use: ReplyUse::None,
            key_count: 0,
            executable: false,
        };
        templates.push(cont.clone());
        scan_continuation = Some(cont);
    }
    Ok(Workload { templates, builtin_ratio: None, scan_continuation, warnings })
}

#[inline]
pub fn write_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = 20;
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Values: a buffer of the largest size, 'x' bytes or random bytes (mutated one byte per
/// value with --random-data, as memtier does).
pub struct ValueGen {
    buf: Vec<u8>,
    size: DataSize,
    sequential: bool,
    random: bool,
    mutation_pos: usize,
    key_min: u64,
    key_max: u64,
}

impl ValueGen {
    /// `key_range`: the keys this generator draws (a P client's slice): memtier scales
    /// `--data-size-pattern S` sizes over the client's own range.
    pub fn new(cfg: &Config, key_range: (u64, u64), rng: &mut Rng) -> ValueGen {
        let max = match cfg.data_size {
            DataSize::Fixed(n) => n,
            DataSize::Range { max, .. } => max,
        } as usize;
        let mut v = ValueGen {
            buf: vec![b'x'; max.max(1)],
            size: cfg.data_size,
            sequential: cfg.data_size_pattern_sequential,
            random: cfg.random_data,
            mutation_pos: 0,
            key_min: key_range.0,
            key_max: key_range.1,
        };
        if v.random {
            v.refill(rng);
        }
        v
    }

    fn refill(&mut self, rng: &mut Rng) {
        for chunk in self.buf.chunks_mut(8) {
            let r = rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }

    #[inline]
    pub fn next_len(&mut self, key_index: u64, rng: &mut Rng) -> usize {
        match self.size {
            DataSize::Fixed(n) => n as usize,
            DataSize::Range { min, max } => {
                if self.sequential {
                    let span = self.key_max.saturating_sub(self.key_min).max(1) as f64;
                    let a = (key_index.saturating_sub(self.key_min) as f64 / span).clamp(0.0, 1.0);
                    ((max - min) as f64 * a) as usize + min as usize
                } else {
                    rng.range(min.max(1) as u64, max as u64) as usize
                }
            }
        }
    }

    #[inline]
    pub fn value(&mut self, len: usize, rng: &mut Rng) -> &[u8] {
        if self.random {
            self.buf[self.mutation_pos] = self.buf[self.mutation_pos].wrapping_add(1);
            self.mutation_pos += 1;
            if self.mutation_pos >= self.buf.len() {
                self.mutation_pos = 0;
                self.refill(rng);
            }
        }
        &self.buf[..len]
    }
}

/// Draw keys until one hashes to a slot that `route.shard` owns (bounded number of tries).
fn routed_key(keys: &mut KeyGen, route: &Route, pattern: KeyPattern, iter: usize, parts: (&[u8], &[u8], &[u8])) -> u64 {
    let mut buf = [0u8; 512];
    let tries = match pattern {
        KeyPattern::Sequential | KeyPattern::Parallel => (keys.max - keys.min).saturating_add(1).min(1 << 24),
        _ => 1000,
    };
    let mut k = keys.next(pattern, iter);
    for _ in 0..tries {
        match format_key(&mut buf, parts, k) {
            Some(n) if route.table.owner(key_slot(&buf[..n])) != route.shard => k = keys.next(pattern, iter),
            _ => return k,
        }
    }
    k
}

/// Per-connection request generator (memtier's per-client state).
pub struct Generator {
    pub keys: KeyGen,
    values: ValueGen,
    key_prefix: Vec<u8>,
    set_count: u32,
    get_count: u32,
    cmd_index: usize,
    cmd_ratio_count: u32,
    pub scan_cursor: Vec<u8>,
    pub scan_iterations: u64,
    scan_max_iterations: u64,
    scan_mode: bool,
    /// Upper bound of the encoded size of each template (without the SCAN cursor).
    bounds: Vec<usize>,
    /// Cluster mode: only draw keys whose slot this connection's shard owns.
    pub route: Option<Route>,
    /// Use this key index for every key of the next request (MOVED/ASK re-sends).
    pub forced_key: Option<u64>,
    /// The first key index of the last request written.
    pub last_first_key: u64,
}

pub struct Route {
    pub table: SlotTable,
    pub shard: u16,
}

impl Route {
    /// False once every slot of this connection's shard moved elsewhere.
    #[inline]
    pub fn has_slots(&self) -> bool {
        self.table.owned(self.shard) > 0
    }
}

/// Format `prefix + key_prefix + k + suffix` into `buf`; returns the length (None if too long).
#[inline]
pub fn format_key(buf: &mut [u8; 512], parts: (&[u8], &[u8], &[u8]), k: u64) -> Option<usize> {
    let (prefix, key_prefix, suffix) = parts;
    let n = prefix.len() + key_prefix.len() + bufwrite::digits(k) + suffix.len();
    if n > buf.len() {
        return None;
    }
    let mut pos = 0;
    for part in [prefix, key_prefix] {
        buf[pos..pos + part.len()].copy_from_slice(part);
        pos += part.len();
    }
    let d = bufwrite::digits(k);
    let mut x = k;
    for i in (0..d).rev() {
        buf[pos + i] = b'0' + (x % 10) as u8;
        x /= 10;
    }
    pos += d;
    buf[pos..pos + suffix.len()].copy_from_slice(suffix);
    Some(n)
}

/// Largest encoded size of a request from template `t`.
fn request_bound(t: &Template, key_prefix_len: usize, max_value: usize) -> usize {
    t.segments
        .iter()
        .map(|s| match s {
            Segment::Raw(b) => b.len(),
            Segment::Key { prefix, suffix } => prefix.len() + suffix.len() + key_prefix_len + 20 + 24,
            Segment::Data => max_value + 24,
            Segment::Cursor => 24,
        })
        .sum()
}

pub struct GeneratorSpec {
    pub seed: u64,
    pub key_min: u64,
    pub key_max: u64,
}

impl Generator {
    pub fn new(cfg: &Config, wl: &Workload, spec: &GeneratorSpec) -> Generator {
        let uses_zipf = wl.templates.iter().any(|t| t.key_pattern == KeyPattern::Zipf);
        let keys = KeyGen::new(&KeyGenSpec {
            min: spec.key_min,
            max: spec.key_max,
            iterators: wl.templates.len().max(2),
            stddev: cfg.key_stddev,
            median: cfg.key_median,
            zipf_exp: cfg.key_zipf_exp,
            uses_zipf,
            seed: spec.seed,
        });
        let mut rng = Rng::new(spec.seed ^ 0x005E_ED0F_DA7A);
        let values = ValueGen::new(cfg, (spec.key_min, spec.key_max), &mut rng);
        let mut g = Generator {
            keys,
            values,
            key_prefix: cfg.key_prefix.as_bytes().to_vec(),
            set_count: 0,
            get_count: 0,
            cmd_index: 0,
            cmd_ratio_count: 0,
            scan_cursor: b"0".to_vec(),
            scan_iterations: 0,
            scan_max_iterations: cfg.scan_incremental_max_iterations,
            scan_mode: wl.scan_continuation.is_some(),
            bounds: Vec::new(),
            route: None,
            forced_key: None,
            last_first_key: 0,
        };
        let max_value = match cfg.data_size {
            DataSize::Fixed(n) => n,
            DataSize::Range { max, .. } => max,
        } as usize;
        g.bounds = wl.templates.iter().map(|t| request_bound(t, g.key_prefix.len(), max_value)).collect();
        if wl.builtin_ratio.is_none() {
            g.advance_command(wl);
        }
        g
    }

    fn advance_command(&mut self, wl: &Workload) {
        // memtier: run command i `ratio` times in a row, then move on.
        let n = wl.templates.len();
        for _ in 0..(n * 2 + 2) {
            let t = &wl.templates[self.cmd_index];
            if t.executable && self.cmd_ratio_count < t.ratio {
                self.cmd_ratio_count += 1;
                return;
            }
            self.cmd_ratio_count = 0;
            self.cmd_index = (self.cmd_index + 1) % n;
        }
    }

    /// Choose the next command; returns its template index.
    #[inline]
    pub fn choose(&mut self, wl: &Workload) -> usize {
        if let Some((a, b)) = wl.builtin_ratio {
            loop {
                if self.set_count < a {
                    self.set_count += 1;
                    return 0;
                }
                if self.get_count < b {
                    self.get_count += 1;
                    return 1;
                }
                self.set_count = 0;
                self.get_count = 0;
            }
        }
        if self.scan_mode {
            return if self.scan_cursor.as_slice() != b"0" { 1 } else { 0 };
        }
        let idx = self.cmd_index;
        self.advance_command(wl);
        idx
    }

    /// Append template `idx` to `out`; returns the bytes written.
    #[inline]
    pub fn write_request(&mut self, wl: &Workload, idx: usize, out: &mut Vec<u8>) -> usize {
        let t = &wl.templates[idx];
        let bound = self.bounds[idx] + self.scan_cursor.len();
        let start = out.len();
        let mut w = Writer::new(out, bound);
        let mut last_key = self.keys.min;
        let mut first = true;
        for seg in &t.segments {
            match seg {
                Segment::Raw(b) => w.put(b),
                Segment::Key { prefix, suffix } => {
                    let k = match (self.forced_key, &self.route) {
                        (Some(k), _) => k,
                        (None, None) => self.keys.next(t.key_pattern, idx),
                        (None, Some(route)) => {
                            routed_key(&mut self.keys, route, t.key_pattern, idx, (prefix, &self.key_prefix, suffix))
                        }
                    };
                    if first {
                        self.last_first_key = k;
                        first = false;
                    }
                    last_key = k;
                    let len = prefix.len() + self.key_prefix.len() + bufwrite::digits(k) + suffix.len();
                    w.put_bulk_header(len);
                    w.put(prefix);
                    w.put(&self.key_prefix);
                    w.put_u64(k);
                    w.put(suffix);
                    w.put_crlf();
                }
                Segment::Data => {
                    let len = self.values.next_len(last_key, &mut self.keys.rng);
                    w.put_bulk_header(len);
                    let v = self.values.value(len, &mut self.keys.rng);
                    w.put(v);
                    w.put_crlf();
                }
                Segment::Cursor => {
                    w.put_bulk_header(self.scan_cursor.len());
                    w.put(&self.scan_cursor);
                    w.put_crlf();
                }
            }
        }
        w.finish() - start
    }

    /// Key parts (argument prefix, --key-prefix, argument suffix) of the first key of template 0.
    pub fn first_key_parts(wl: &Workload) -> (Vec<u8>, Vec<u8>) {
        for seg in &wl.templates[0].segments {
            if let Segment::Key { prefix, suffix } = seg {
                return (prefix.clone(), suffix.clone());
            }
        }
        (Vec::new(), Vec::new())
    }

    /// SCAN incremental iteration: take the cursor from a SCAN reply.
    pub fn scan_reply(&mut self, cursor: &[u8], ok: bool, was_continuation: bool) {
        if !ok || cursor.is_empty() {
            self.scan_cursor.clear();
            self.scan_cursor.push(b'0');
            self.scan_iterations = 0;
            return;
        }
        self.scan_cursor.clear();
        self.scan_cursor.extend_from_slice(cursor);
        if was_continuation {
            self.scan_iterations += 1;
        }
        if cursor == b"0" || (self.scan_max_iterations > 0 && self.scan_iterations >= self.scan_max_iterations) {
            self.scan_cursor.clear();
            self.scan_cursor.push(b'0');
            self.scan_iterations = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args;

    fn cfg(args: &[&str]) -> Config {
        parse_args(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn split_quotes_and_escapes() {
        let a = split_command(r#"HSET k "User __key__" 'it''s' "a\x41\n""#);
        assert!(a.is_err()); // closing quote followed by a quote
        let a = split_command(r#"HSET k "User __key__" 'x y' "a\x41\n""#).unwrap();
        assert_eq!(a, vec![b"HSET".to_vec(), b"k".to_vec(), b"User __key__".to_vec(), b"x y".to_vec(), b"aA\n".to_vec()]);
        let a = split_command(r#"SET a"b c" 'it\'s' "\q\x4" x"#).unwrap();
        assert_eq!(a, vec![b"SET".to_vec(), b"ab c".to_vec(), b"it's".to_vec(), b"qx4".to_vec(), b"x".to_vec()]);
        for bad in [r#"SET "a"#, "SET 'a", "SET 'a'b", "  "] {
            assert!(split_command(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn compile_with_affixes_and_warning() {
        let mut w = Vec::new();
        let (segs, keys, ty) = compile_command("SET user:__key__:x __value__", &mut w).unwrap();
        assert_eq!(ty, "SET");
        assert_eq!(keys, 1);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("__value__"));
        assert_eq!(segs.len(), 3);
        assert!(compile_command("SET k x__data__", &mut w).is_err());
    }

    #[test]
    fn each_placeholder_drawn_independently() {
        let c = cfg(&["--command", "MSET __key__ __data__ __key__ __data__", "--command-key-pattern", "S",
            "--key-minimum", "1", "--key-maximum", "100", "-d", "3"]);
        let wl = build_workload(&c).unwrap();
        let mut g = Generator::new(&c, &wl, &GeneratorSpec { seed: 1, key_min: 1, key_max: 100 });
        let mut out = Vec::new();
        let idx = g.choose(&wl);
        g.write_request(&wl, idx, &mut out);
        assert_eq!(out, b"*5\r\n$4\r\nMSET\r\n$9\r\nmemtier-1\r\n$3\r\nxxx\r\n$9\r\nmemtier-2\r\n$3\r\nxxx\r\n".to_vec());
    }

    #[test]
    fn set_get_ratio_sequence() {
        let c = cfg(&["--ratio", "1:3"]);
        let wl = build_workload(&c).unwrap();
        let mut g = Generator::new(&c, &wl, &GeneratorSpec { seed: 1, key_min: 0, key_max: 10 });
        let seq: Vec<usize> = (0..8).map(|_| g.choose(&wl)).collect();
        assert_eq!(seq, vec![0, 1, 1, 1, 0, 1, 1, 1]);
    }

    #[test]
    fn command_ratio_sequence() {
        let c = cfg(&["--command", "A", "--command-ratio", "2", "--command", "B", "--command-ratio", "1"]);
        let wl = build_workload(&c).unwrap();
        let mut g = Generator::new(&c, &wl, &GeneratorSpec { seed: 1, key_min: 0, key_max: 10 });
        let seq: Vec<usize> = (0..6).map(|_| g.choose(&wl)).collect();
        assert_eq!(seq, vec![0, 0, 1, 0, 0, 1]);
    }
}
