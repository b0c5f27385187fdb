//! The memtier_benchmark option table (`loadgen/memtier_options.tsv`, compiled in): what each
//! option is (long name, short letter, whether it takes a value, the value's type and range)
//! and whether redline-load runs it. redline's suite checker reads the same file, so a suite
//! that `redline suites validate` accepts is one redline-load accepts (tests/test_memtier_conformance.py).
//! What the table cannot say (shapes like `SET:GET`, combinations of options) is in cli.rs.

use std::sync::OnceLock;

const TABLE: &str = include_str!("../memtier_options.tsv");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    None,
    Int,
    Float,
    Text,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Supported,
    Refused,
    /// redline-load's own option, not memtier's.
    Redline,
}

/// One end of an interval: its number as written and whether it is excluded.
#[derive(Clone, Copy, Debug)]
pub struct End {
    pub number: &'static str,
    pub open: bool,
}

#[derive(Clone, Debug)]
pub struct OptionSpec {
    pub name: &'static str,
    pub short: Option<char>,
    pub value: ValueKind,
    /// The accepted interval of an int or float value (`None`: no bound); the shape of a text
    /// value is checked in cli.rs.
    pub low: Option<End>,
    pub high: Option<End>,
    pub status: Status,
    pub note: &'static str,
}

impl OptionSpec {
    pub fn takes_value(&self) -> bool {
        self.value != ValueKind::None
    }
}

pub fn table() -> &'static [OptionSpec] {
    static PARSED: OnceLock<Vec<OptionSpec>> = OnceLock::new();
    PARSED.get_or_init(|| {
        let mut rows = TABLE.lines().enumerate().filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty());
        rows.next(); // the header
        rows.map(|(index, line)| parse_row(line).unwrap_or_else(|m| panic!("memtier_options.tsv:{}: {m}", index + 1)))
            .collect()
    })
}

fn dash(cell: &'static str) -> &'static str {
    if cell == "-" {
        ""
    } else {
        cell
    }
}

fn parse_row(line: &'static str) -> Result<OptionSpec, String> {
    let cells: Vec<&'static str> = line.split('\t').collect();
    let [name, short, value, range, status, note] = cells[..] else {
        return Err(format!("expected 6 tab-separated cells, got {}", cells.len()));
    };
    let value = match value {
        "none" => ValueKind::None,
        "int" => ValueKind::Int,
        "float" => ValueKind::Float,
        "text" => ValueKind::Text,
        other => return Err(format!("unknown value kind '{other}'")),
    };
    let status = match status {
        "supported" => Status::Supported,
        "refused" => Status::Refused,
        "redline" => Status::Redline,
        other => return Err(format!("unknown status '{other}'")),
    };
    let short = match dash(short) {
        "" => None,
        s if s.chars().count() == 1 => s.chars().next(),
        s => return Err(format!("short option '{s}' is not one letter")),
    };
    let numeric = matches!(value, ValueKind::Int | ValueKind::Float);
    let (low, high) = if numeric && !dash(range).is_empty() { parse_interval(range)? } else { (None, None) };
    Ok(OptionSpec { name, short, value, low, high, status, note: dash(note) })
}

/// `[1,4294967295]`, `(0,5)`, `[0,]` (no upper bound).
fn parse_interval(text: &'static str) -> Result<(Option<End>, Option<End>), String> {
    let bad = || format!("range '{text}' is not an interval like [1,] or (0,5)");
    let low_open = match text.chars().next() {
        Some('[') => false,
        Some('(') => true,
        _ => return Err(bad()),
    };
    let high_open = match text.chars().last() {
        Some(']') => false,
        Some(')') => true,
        _ => return Err(bad()),
    };
    let (low, high) = text[1..text.len() - 1].split_once(',').ok_or_else(bad)?;
    let end = |number: &'static str, open| (!number.is_empty()).then_some(End { number, open });
    Ok((end(low, low_open), end(high, high_open)))
}

/// An option by its long name or a unique prefix of one (getopt_long's rule; every name in the
/// table counts, refused ones too).
pub fn by_long_name(name: &str) -> Result<&'static OptionSpec, String> {
    if let Some(exact) = table().iter().find(|o| o.name == name) {
        return Ok(exact);
    }
    let matches: Vec<&OptionSpec> = table().iter().filter(|o| !name.is_empty() && o.name.starts_with(name)).collect();
    match matches[..] {
        [one] => Ok(one),
        [] => Err(format!("unknown option '--{name}'")),
        _ => Err(format!(
            "option '--{name}' is ambiguous (could be {})",
            matches.iter().map(|o| format!("--{}", o.name)).collect::<Vec<_>>().join(", ")
        )),
    }
}

pub fn by_short_letter(letter: char) -> Result<&'static OptionSpec, String> {
    table().iter().find(|o| o.short == Some(letter)).ok_or_else(|| format!("unknown option '-{letter}'"))
}

/// Why redline-load refuses this option, or None when it runs it.
pub fn refusal(spec: &OptionSpec) -> Option<String> {
    (spec.status == Status::Refused)
        .then(|| format!("option '--{}' is not supported by redline-load: {}", spec.name, spec.note))
}

pub fn is_int(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// `[+-]digits[.digits][e[+-]digits]` or `[+-].digits…`: the float shape both parsers accept.
pub fn is_float(text: &str) -> bool {
    let body = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(at) => (&body[..at], Some(&body[at + 1..])),
        None => (body, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits(whole) && digits(fraction) && !(whole.is_empty() && fraction.is_empty());
    let exponent_ok = exponent.map_or(true, |e| is_int(e.strip_prefix(['+', '-']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

/// An int option's value, checked against the table's range (at most u64::MAX).
pub fn int_value(spec: &OptionSpec, text: &str) -> Result<u64, String> {
    let number = match text.parse::<u64>() {
        Ok(n) if is_int(text) => n,
        _ if is_int(text) => return Err(format!("--{} must be at most {}, got {text}", spec.name, u64::MAX)),
        _ => return Err(format!("--{} needs an integer, got '{text}'", spec.name)),
    };
    check_range(spec, text, |end| compare_int(number, end))?;
    Ok(number)
}

/// A float option's value, checked against the table's range.
pub fn float_value(spec: &OptionSpec, text: &str) -> Result<f64, String> {
    let number = match text.parse::<f64>() {
        Ok(x) if is_float(text) && x.is_finite() => x,
        _ => return Err(format!("--{} needs a number, got '{text}'", spec.name)),
    };
    check_range(spec, text, |end| number.partial_cmp(&end.number.parse::<f64>().expect("table bound")).expect("finite"))?;
    Ok(number)
}

fn compare_int(number: u64, end: &End) -> std::cmp::Ordering {
    number.cmp(&end.number.parse::<u64>().expect("table bound"))
}

/// The one wording of a range error, shared with the Python reader of the table.
fn check_range(spec: &OptionSpec, text: &str, compare: impl Fn(&End) -> std::cmp::Ordering) -> Result<(), String> {
    use std::cmp::Ordering::{Greater, Less};
    if let Some(low) = &spec.low {
        let cmp = compare(low);
        if cmp == Less || (low.open && cmp != Greater) {
            let bound = if low.open { "above" } else { "at least" };
            return Err(format!("--{} must be {bound} {}, got {text}", spec.name, low.number));
        }
    }
    if let Some(high) = &spec.high {
        let cmp = compare(high);
        if cmp == Greater || (high.open && cmp != Less) {
            let bound = if high.open { "below" } else { "at most" };
            return Err(format!("--{} must be {bound} {}, got {text}", spec.name, high.number));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> &'static OptionSpec {
        by_long_name(name).unwrap()
    }

    #[test]
    fn the_table_reads_and_names_are_unique() {
        let t = table();
        assert!(t.len() > 80, "{}", t.len());
        for (i, o) in t.iter().enumerate() {
            assert!(t[i + 1..].iter().all(|p| p.name != o.name), "--{} twice", o.name);
            if let Some(c) = o.short {
                assert!(t[i + 1..].iter().all(|p| p.short != Some(c)), "-{c} twice");
            }
            assert!(o.status == Status::Supported || !o.note.is_empty(), "--{} needs a note", o.name);
        }
        assert_eq!(by_short_letter('c').unwrap().name, "clients");
    }

    #[test]
    fn prefixes_resolve_over_every_name() {
        assert_eq!(spec("key-max").name, "key-maximum");
        assert_eq!(spec("clients").name, "clients");
        // --client could be --clients, --client-stats, --clients-start, --clients-step
        assert!(by_long_name("client").unwrap_err().contains("ambiguous"));
        assert!(by_long_name("nope").unwrap_err().contains("unknown option '--nope'"));
        assert!(refusal(spec("expiry-range")).unwrap().contains("expiry"));
        assert!(refusal(spec("clients")).is_none());
    }

    #[test]
    fn values_are_checked_against_the_range() {
        assert_eq!(int_value(spec("clients"), "5"), Ok(5));
        assert_eq!(int_value(spec("clients"), "0").unwrap_err(), "--clients must be at least 1, got 0");
        assert_eq!(int_value(spec("clients"), "4294967296").unwrap_err(), "--clients must be at most 4294967295, got 4294967296");
        assert_eq!(int_value(spec("clients"), "+5").unwrap_err(), "--clients needs an integer, got '+5'");
        assert_eq!(int_value(spec("clients"), " 5").unwrap_err(), "--clients needs an integer, got ' 5'");
        assert!(int_value(spec("key-maximum"), "18446744073709551616").unwrap_err().contains("at most"));
        assert_eq!(float_value(spec("key-zipf-exp"), "0.5"), Ok(0.5));
        assert_eq!(float_value(spec("key-zipf-exp"), "5").unwrap_err(), "--key-zipf-exp must be below 5, got 5");
        assert_eq!(float_value(spec("key-zipf-exp"), "0").unwrap_err(), "--key-zipf-exp must be above 0, got 0");
        assert!(float_value(spec("key-zipf-exp"), "inf").is_err());
        assert!(float_value(spec("key-zipf-exp"), "nan").is_err());
        assert_eq!(float_value(spec("warmup-time"), "1e-1"), Ok(0.1));
        assert_eq!(float_value(spec("warmup-time"), ".5"), Ok(0.5));
        assert!(float_value(spec("warmup-time"), ".").is_err());
        assert!(float_value(spec("warmup-time"), "1e").is_err());
    }
}
