//! RESP for the roles: redline-load's value parser (resp.rs) over a buffer that says
//! "incomplete" instead of blocking (so it serves blocking workers and the event loop of
//! thousands of subscribers alike), the request encoder, and a blocking connection.

use std::io::{Read, Write};
use std::net::TcpStream;

pub use crate::resp::Value;

/// One value from the start of `buf` (redline-load's one RESP value parser): Ok(None) when more
/// bytes are needed, else the value and the bytes it used.
pub fn parse(buf: &[u8]) -> Result<Option<(Value, usize)>, String> {
    crate::resp::parse_value(buf).map_err(|e| format!("{e:?}"))
}

pub fn encode(args: &[&[u8]], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Bytes received but not yet parsed, shared by the blocking and the event-loop readers.
#[derive(Default)]
pub struct Inbox {
    buf: Vec<u8>,
    start: usize,
}

impl Inbox {
    pub fn space(&mut self) -> &mut Vec<u8> {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > 1 << 16 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        &mut self.buf
    }
    pub fn next(&mut self) -> Result<Option<Value>, String> {
        match parse(&self.buf[self.start..])? {
            Some((v, used)) => {
                self.start += used;
                Ok(Some(v))
            }
            None => Ok(None),
        }
    }
    /// Read once from `r` into the buffer; Ok(0) at end of stream.
    pub fn fill(&mut self, r: &mut impl Read) -> std::io::Result<usize> {
        let buf = self.space();
        let len = buf.len();
        buf.resize(len + 65536, 0);
        let got = r.read(&mut buf[len..]);
        buf.truncate(len + *got.as_ref().unwrap_or(&0));
        got
    }
}

/// A blocking connection: one request, one reply (or several requests, then their replies).
pub struct Conn {
    pub stream: TcpStream,
    inbox: Inbox,
    out: Vec<u8>,
}

impl Conn {
    pub fn open(host: &str, port: u16) -> Result<Conn, String> {
        let stream = TcpStream::connect((host, port)).map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
        let _ = stream.set_nodelay(true);
        Ok(Conn { stream, inbox: Inbox::default(), out: Vec::new() })
    }
    pub fn send(&mut self, args: &[&[u8]]) -> Result<(), String> {
        self.out.clear();
        encode(args, &mut self.out);
        self.stream.write_all(&self.out).map_err(|e| format!("write: {e}"))
    }
    /// Several commands in one write (a pipeline); read their replies with `read`.
    pub fn send_many(&mut self, commands: &[&[&[u8]]]) -> Result<(), String> {
        self.out.clear();
        for args in commands {
            encode(args, &mut self.out);
        }
        self.stream.write_all(&self.out).map_err(|e| format!("write: {e}"))
    }
    pub fn read(&mut self) -> Result<Value, String> {
        loop {
            if let Some(v) = self.inbox.next()? {
                return Ok(v);
            }
            match self.inbox.fill(&mut self.stream) {
                Ok(0) => return Err("the server closed the connection".into()),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }
    /// One command and its reply; an error reply is an Err naming the command.
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Value, String> {
        self.send(args)?;
        let v = self.read()?;
        match v.error() {
            Some(e) => Err(format!("{} replied: {e}", String::from_utf8_lossy(args[0]))),
            None => Ok(v),
        }
    }
    pub fn into_parts(self) -> (TcpStream, Inbox) {
        (self.stream, self.inbox)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incomplete_then_complete() {
        let full = b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n";
        for cut in 0..full.len() {
            assert_eq!(parse(&full[..cut]).unwrap(), None, "cut at {cut}");
        }
        let (v, used) = parse(full).unwrap().unwrap();
        assert_eq!(used, full.len());
        assert_eq!(v, Value::Push(vec![Value::Bulk(b"message".to_vec()), Value::Bulk(b"ch".to_vec()), Value::Bulk(b"hello".to_vec())]));
    }

    #[test]
    fn resp3_map_null_and_errors() {
        assert_eq!(parse(b"%1\r\n+a\r\n:1\r\n").unwrap().unwrap().0, Value::Array(vec![Value::Simple(b"a".to_vec()), Value::Int(1)]));
        assert_eq!(parse(b"_\r\n").unwrap().unwrap().0, Value::Null);
        assert_eq!(parse(b"*-1\r\n").unwrap().unwrap().0, Value::Null);
        assert!(parse(b"?x\r\n").is_err());
        assert_eq!(parse(b">1\r\n:1\r\n").unwrap().unwrap().0, Value::Push(vec![Value::Int(1)]));
    }
}
