//! The role flags: `loadgen/role_options.tsv` compiled in (redline's suite checker reads the same
//! file). Each tool's own spelling is accepted as its tools accept it: `-flag v`, `--flag v`,
//! `-flag=v`, `--flag=v`; a flag the table does not list for the role is refused in one line.

use std::collections::BTreeMap;

const TABLE: &str = include_str!("../../role_options.tsv");

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Int,
    Seconds,
    Text,
    Bool,
    Mode,
}

pub struct Spec {
    pub role: &'static str,
    pub flag: &'static str,
    pub kind: Kind,
    pub default: &'static str,
}

pub fn table() -> Vec<Spec> {
    TABLE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let c: Vec<&'static str> = l.split('\t').collect();
            let kind = match c[2] {
                "int" => Kind::Int,
                "seconds" => Kind::Seconds,
                "text" => Kind::Text,
                "bool" => Kind::Bool,
                "mode" => Kind::Mode,
                other => panic!("role_options.tsv: unknown kind {other}"),
            };
            Spec { role: c[0], flag: c[1], kind, default: c.get(3).copied().unwrap_or("") }
        })
        .collect()
}

pub fn roles() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = table().iter().map(|s| s.role).filter(|r| *r != "*").collect();
    out.dedup();
    out
}

/// The parsed flags of one role: the values given, the table's defaults for the rest.
#[derive(Debug)]
pub struct Flags {
    pub role: String,
    given: BTreeMap<String, String>,
    defaults: BTreeMap<String, String>,
}

impl Flags {
    pub fn parse(role: &str, args: &[String]) -> Result<Flags, String> {
        let specs: Vec<Spec> = table().into_iter().filter(|s| s.role == role || s.role == "*").collect();
        if !specs.iter().any(|s| s.role == role) {
            return Err(format!("unknown role '{role}' (roles: {})", roles().join(", ")));
        }
        let mut given = BTreeMap::new();
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            let body = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')).filter(|b| !b.is_empty());
            let Some(body) = body else {
                return Err(format!("{role}: unexpected argument '{arg}' (flags start with - or --)"));
            };
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            // A role's own flag wins over redline's of the same name (the tool's test-time).
            let spec = specs.iter().find(|s| s.flag == name && s.role == role).or_else(|| specs.iter().find(|s| s.flag == name));
            let Some(spec) = spec else {
                return Err(format!("{role}: unknown flag '{arg}'"));
            };
            let value = if spec.kind == Kind::Bool {
                inline.unwrap_or_else(|| "true".into())
            } else if let Some(v) = inline {
                v
            } else {
                i += 1;
                args.get(i).cloned().ok_or_else(|| format!("{role}: {arg} needs a value"))?
            };
            check_value(role, spec, &value)?;
            let key = if spec.role == "*" { format!("*{}", spec.flag) } else { spec.flag.to_string() };
            given.insert(key, value);
            i += 1;
        }
        let defaults = specs
            .iter()
            .filter(|s| !s.default.is_empty())
            .map(|s| (if s.role == "*" { format!("*{}", s.flag) } else { s.flag.to_string() }, s.default.to_string()))
            .collect();
        Ok(Flags { role: role.to_string(), given, defaults })
    }

    /// The role's own flag (`name`) or redline's (`*name`).
    fn raw(&self, key: &str) -> Option<&str> {
        self.given.get(key).or_else(|| self.defaults.get(key)).map(|s| s.as_str())
    }
    pub fn given(&self, key: &str) -> bool {
        self.given.contains_key(key)
    }
    pub fn text(&self, key: &str) -> String {
        self.raw(key).unwrap_or("").to_string()
    }
    pub fn int(&self, key: &str) -> u64 {
        self.raw(key).and_then(|v| v.parse().ok()).unwrap_or(0)
    }
    pub fn opt_int(&self, key: &str) -> Option<u64> {
        self.raw(key).and_then(|v| v.parse().ok())
    }
    pub fn seconds(&self, key: &str) -> Option<f64> {
        self.raw(key).and_then(|v| v.parse().ok())
    }
    pub fn flag(&self, key: &str) -> bool {
        self.raw(key) == Some("true")
    }
    /// The flags as given, for the result's "configuration".
    pub fn as_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert("role".into(), self.role.clone().into());
        for (k, v) in &self.given {
            m.insert(k.trim_start_matches('*').to_string(), v.clone().into());
        }
        serde_json::Value::Object(m)
    }
}

fn check_value(role: &str, spec: &Spec, value: &str) -> Result<(), String> {
    let ok = match spec.kind {
        Kind::Int => value.parse::<u64>().is_ok(),
        Kind::Seconds => value.parse::<f64>().map(|v| v.is_finite() && v >= 0.0).unwrap_or(false),
        Kind::Bool => value == "true" || value == "false",
        Kind::Mode => value == "subscribe" || value == "ssubscribe",
        Kind::Text => true,
    };
    if ok {
        Ok(())
    } else {
        let want = match spec.kind {
            Kind::Int => "a whole number",
            Kind::Seconds => "a number of seconds",
            Kind::Bool => "true or false",
            Kind::Mode => "subscribe or ssubscribe",
            Kind::Text => "text",
        };
        Err(format!("{role}: -{} must be {want}, got '{value}'", spec.flag))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn a(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn go_and_gnu_spellings() {
        let f = Flags::parse("pubsub-sub-bench", &a(&["-clients", "5", "--channel-maximum=7", "-mode", "ssubscribe"])).unwrap();
        assert_eq!(f.int("clients"), 5);
        assert_eq!(f.int("channel-maximum"), 7);
        assert_eq!(f.int("channel-minimum"), 1);
        assert_eq!(f.text("mode"), "ssubscribe");
    }

    #[test]
    fn unknown_flag_and_bad_value_refused() {
        assert!(Flags::parse("sidekiq-bench", &a(&["--priorities", "4"])).unwrap_err().contains("unknown flag '--priorities'"));
        assert!(Flags::parse("sidekiq-bench", &a(&["--workers", "x"])).unwrap_err().contains("whole number"));
        assert!(Flags::parse("nope", &a(&[])).unwrap_err().contains("unknown role"));
    }

    #[test]
    fn redline_flags_and_own_test_time() {
        let f = Flags::parse("pubsub-sub-bench", &a(&["-test-time", "120", "--server", "h", "--window", "1.5"])).unwrap();
        assert_eq!(f.int("test-time"), 120);
        assert_eq!(f.text("*server"), "h");
        assert_eq!(f.seconds("*window"), Some(1.5));
    }
}
