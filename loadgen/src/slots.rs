//! Redis Cluster key slots: CRC16 (XMODEM) of the key or of its `{hash tag}`, modulo 16384,
//! and the slot → shard table shared by the connections of one thread.

use std::cell::Cell;
use std::rc::Rc;

pub const SLOTS: usize = 16384;

const fn crc16_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// CRC16-CCITT (XMODEM), the checksum Redis Cluster uses, one table lookup per byte.
static CRC16_TABLE: [u16; 256] = crc16_table();

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc = (crc << 8) ^ CRC16_TABLE[((crc >> 8) as u8 ^ b) as usize];
    }
    crc
}

/// The hash slot of `key`, honouring hash tags.
pub fn key_slot(key: &[u8]) -> u16 {
    if let Some(open) = key.iter().position(|b| *b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|b| *b == b'}') {
            if len > 0 {
                return crc16(&key[open + 1..open + 1 + len]) % SLOTS as u16;
            }
        }
    }
    crc16(key) % SLOTS as u16
}

/// A shard as CLUSTER SLOTS reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    pub host: String,
    pub port: u16,
}

/// slot → shard index, updated in place when MOVED replies arrive (single thread: Cells).
#[derive(Clone)]
pub struct SlotTable {
    owner: Rc<Vec<Cell<u16>>>,
    /// Slots owned per shard.
    counts: Rc<Vec<Cell<u32>>>,
}

pub const NO_OWNER: u16 = u16::MAX;

impl SlotTable {
    pub fn new(owner: &[u16]) -> SlotTable {
        let nshards = owner.iter().filter(|o| **o != NO_OWNER).map(|o| *o as usize + 1).max().unwrap_or(0);
        let counts: Vec<Cell<u32>> = (0..nshards).map(|_| Cell::new(0)).collect();
        for o in owner.iter().filter(|o| **o != NO_OWNER) {
            counts[*o as usize].set(counts[*o as usize].get() + 1);
        }
        SlotTable { owner: Rc::new(owner.iter().map(|o| Cell::new(*o)).collect()), counts: Rc::new(counts) }
    }
    /// How many slots `shard` owns.
    #[inline]
    pub fn owned(&self, shard: u16) -> u32 {
        self.counts.get(shard as usize).map_or(0, |c| c.get())
    }
    #[inline]
    pub fn owner(&self, slot: u16) -> u16 {
        self.owner[slot as usize].get()
    }
    pub fn set_owner(&self, slot: u16, shard: u16) {
        let old = self.owner[slot as usize].replace(shard);
        if old == shard {
            return;
        }
        if let Some(c) = self.counts.get(old as usize) {
            c.set(c.get().saturating_sub(1));
        }
        if let Some(c) = self.counts.get(shard as usize) {
            c.set(c.get() + 1);
        }
    }
}

/// Parse a CLUSTER SLOTS reply into shards and a slot → shard table.
pub fn parse_cluster_slots(v: &crate::resp::Value, default_host: &str) -> Result<(Vec<Shard>, Vec<u16>), String> {
    use crate::resp::Value;
    let ranges = match v {
        Value::Array(a) => a,
        Value::Error(e) => return Err(format!("CLUSTER SLOTS failed: {}", String::from_utf8_lossy(e))),
        _ => return Err("CLUSTER SLOTS: unexpected reply".into()),
    };
    let mut shards: Vec<Shard> = Vec::new();
    let mut owner = vec![NO_OWNER; SLOTS];
    for r in ranges {
        let items = match r {
            Value::Array(a) if a.len() >= 3 => a,
            _ => return Err("CLUSTER SLOTS: malformed slot range".into()),
        };
        let (start, end) = match (&items[0], &items[1]) {
            (Value::Int(s), Value::Int(e)) if *s >= 0 && *e < SLOTS as i64 && s <= e => (*s as usize, *e as usize),
            _ => return Err("CLUSTER SLOTS: malformed slot numbers".into()),
        };
        let node = match &items[2] {
            Value::Array(n) if n.len() >= 2 => n,
            _ => return Err("CLUSTER SLOTS: malformed node".into()),
        };
        let host = match node[0].as_bytes() {
            Some(h) if !h.is_empty() && h != b"?" => String::from_utf8_lossy(h).into_owned(),
            _ => default_host.to_string(),
        };
        let port = match &node[1] {
            Value::Int(p) if *p > 0 && *p < 65536 => *p as u16,
            _ => return Err("CLUSTER SLOTS: malformed port".into()),
        };
        let shard = Shard { host, port };
        let idx = match shards.iter().position(|s| *s == shard) {
            Some(i) => i,
            None => {
                shards.push(shard);
                shards.len() - 1
            }
        };
        for o in owner.iter_mut().take(end + 1).skip(start) {
            *o = idx as u16;
        }
    }
    if shards.is_empty() {
        return Err("CLUSTER SLOTS: the cluster has no slots assigned".into());
    }
    if owner.contains(&NO_OWNER) {
        return Err("CLUSTER SLOTS: not every slot is served (cluster not ready)".into());
    }
    Ok((shards, owner))
}

/// "MOVED 3999 127.0.0.1:6381" / "ASK ..." → (slot, host, port)
pub fn parse_redirect(line: &[u8]) -> Option<(u16, String, u16)> {
    let s = std::str::from_utf8(line).ok()?;
    let mut parts = s.split_whitespace();
    let _kind = parts.next()?;
    let slot: u16 = parts.next()?.parse().ok()?;
    let addr = parts.next()?;
    let (host, port) = addr.rsplit_once(':')?;
    Some((slot, host.to_string(), port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_slots() {
        // values from the Redis cluster specification / CLUSTER KEYSLOT
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(key_slot(b"{}x"), crc16(b"{}x") % 16384);
    }

    #[test]
    fn redirect_lines() {
        assert_eq!(parse_redirect(b"MOVED 3999 127.0.0.1:6381"), Some((3999, "127.0.0.1".into(), 6381)));
        assert_eq!(parse_redirect(b"ASK 1 ::1:7000"), Some((1, "::1".into(), 7000)));
        assert_eq!(parse_redirect(b"MOVED x"), None);
    }
}
