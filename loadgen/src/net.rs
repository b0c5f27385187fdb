//! Connections: blocking connect + handshake (AUTH, HELLO 3, SELECT), then a non-blocking
//! stream registered with the thread's mio poll.

use crate::cli::{Config, Protocol};
use crate::resp::{parse_value, Value};
use crate::tls::TlsStream;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

#[derive(Clone, Debug)]
pub enum Endpoint {
    Tcp { host: String, port: u16 },
    Unix(String),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp { host, port } => write!(f, "{host}:{port}"),
            Endpoint::Unix(p) => write!(f, "{p}"),
        }
    }
}

pub enum Stream {
    Tcp(mio::net::TcpStream),
    Unix(mio::net::UnixStream),
    Tls(Box<TlsStream>),
}

impl Stream {
    #[inline]
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
    #[inline]
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    pub fn register(&mut self, reg: &mio::Registry, token: mio::Token) -> io::Result<()> {
        let interest = mio::Interest::READABLE | mio::Interest::WRITABLE;
        match self {
            Stream::Tcp(s) => reg.register(s, token, interest),
            Stream::Unix(s) => reg.register(s, token, interest),
            Stream::Tls(s) => reg.register(&mut s.sock, token, interest),
        }
    }
    pub fn deregister(&mut self, reg: &mio::Registry) {
        let _ = match self {
            Stream::Tcp(s) => reg.deregister(s),
            Stream::Unix(s) => reg.deregister(s),
            Stream::Tls(s) => reg.deregister(&mut s.sock),
        };
    }

    /// TLS: a short plaintext read does not mean the socket was drained.
    #[inline]
    pub fn short_read_drains(&self) -> bool {
        !matches!(self, Stream::Tls(_))
    }

    /// TLS: push records rustls still holds (on a writable event).
    pub fn flush_pending(&mut self) -> io::Result<()> {
        match self {
            Stream::Tls(s) => s.flush_tls(),
            _ => Ok(()),
        }
    }
}

fn resolve(host: &str, port: u16, family: Option<u8>) -> io::Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()?
        .find(|a| match family {
            Some(4) => a.is_ipv4(),
            Some(6) => a.is_ipv6(),
            _ => true,
        })
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("cannot resolve {host}")))
}

/// Append one command to `out` as a RESP array of bulk strings.
fn encode_command(out: &mut Vec<u8>, args: &[&str]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

/// Commands sent right after connecting, and how many replies they produce.
pub fn handshake_bytes(cfg: &Config) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut n = 0;
    let mut cmd = |args: &[&str]| {
        encode_command(&mut out, args);
        n += 1;
    };
    if let Some(a) = &cfg.authenticate {
        // memtier: "user:password" authenticates with ACL user, otherwise password only.
        match a.split_once(':') {
            Some((user, pass)) if !user.is_empty() => cmd(&["AUTH", user, pass]),
            _ => cmd(&["AUTH", a]),
        }
    }
    if cfg.protocol == Protocol::Resp3 {
        cmd(&["HELLO", "3"]);
    }
    if let Some(db) = cfg.select_db {
        cmd(&["SELECT", &db.to_string()]);
    }
    (out, n)
}

/// An io::Error as text, without Rust's " (os error N)" suffix.
pub fn io_text(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

pub enum ConnectError {
    /// The server could not be reached (retryable).
    Unreachable(String),
    /// The server answered the handshake with an error (not retryable).
    Rejected(String),
}

/// Send `request` on a blocking stream and read `replies` complete values.
fn blocking_exchange<S: Read + Write>(s: &mut S, request: &[u8], replies: usize) -> io::Result<Vec<Value>> {
    s.write_all(request)?;
    let mut buf = Vec::with_capacity(4096);
    let mut out = Vec::new();
    let mut tmp = [0u8; 16384];
    let mut pos = 0;
    while out.len() < replies {
        match parse_value(&buf[pos..]) {
            Ok(Some((v, used))) => {
                out.push(v);
                pos += used;
                continue;
            }
            Ok(None) => {}
            Err(crate::resp::ParseError::Protocol(m)) => {
                return Err(io::Error::new(io::ErrorKind::InvalidData, m))
            }
        }
        let n = s.read(&mut tmp)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed by server"));
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    Ok(out)
}

fn check_handshake(replies: &[Value]) -> Result<(), ConnectError> {
    for v in replies {
        if let Value::Error(e) = v {
            return Err(ConnectError::Rejected(format!(
                "server rejected the connection handshake: {}",
                String::from_utf8_lossy(e)
            )));
        }
    }
    Ok(())
}

/// Run the handshake on a plain blocking socket (TCP or Unix), bounded by a read timeout that
/// `set_timeout` applies to the socket and lifts afterwards.
fn plain_handshake<S: Read + Write>(
    s: &mut S,
    hs: &[u8],
    nreplies: usize,
    set_timeout: impl Fn(&S, Option<Duration>) -> io::Result<()>,
) -> Result<(), ConnectError> {
    if nreplies == 0 {
        return Ok(());
    }
    let _ = set_timeout(s, Some(HANDSHAKE_TIMEOUT));
    let replies = blocking_exchange(s, hs, nreplies).map_err(|e| ConnectError::Unreachable(io_text(&e)))?;
    check_handshake(&replies)?;
    let _ = set_timeout(s, None);
    Ok(())
}

/// How long a connection handshake (AUTH, HELLO, SELECT) or a setup query may wait for replies.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

static TLS: std::sync::OnceLock<Result<crate::tls::TlsSetup, String>> = std::sync::OnceLock::new();

/// The process-wide TLS client configuration (built once from the TLS flags).
pub fn tls_setup(cfg: &Config) -> Result<&'static crate::tls::TlsSetup, String> {
    TLS.get_or_init(|| crate::tls::build_config(&cfg.tls)).as_ref().map_err(|e| e.clone())
}

/// Connect, run the handshake, and return a non-blocking stream.
pub fn connect(cfg: &Config, ep: &Endpoint, timeout: Duration) -> Result<Stream, ConnectError> {
    let (hs, nreplies) = handshake_bytes(cfg);
    match ep {
        Endpoint::Tcp { host, port } if cfg.tls.enabled => {
            let setup = tls_setup(cfg).map_err(ConnectError::Rejected)?;
            let addr = resolve(host, *port, cfg.ip_family).map_err(|e| ConnectError::Unreachable(io_text(&e)))?;
            let mut s = std::net::TcpStream::connect_timeout(&addr, timeout)
                .map_err(|e| ConnectError::Unreachable(io_text(&e)))?;
            let _ = s.set_nodelay(true);
            let _ = s.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
            let mut conn = crate::tls::handshake(setup, host, &mut s)
                .map_err(|e| ConnectError::Rejected(format!("TLS handshake failed: {}", io_text(&e))))?;
            if nreplies > 0 {
                let mut tls = rustls::Stream::new(&mut conn, &mut s);
                let r = blocking_exchange(&mut tls, &hs, nreplies)
                    .map_err(|e| ConnectError::Unreachable(io_text(&e)))?;
                check_handshake(&r)?;
            }
            let _ = s.set_read_timeout(None);
            s.set_nonblocking(true).map_err(|e| ConnectError::Unreachable(io_text(&e)))?;
            Ok(Stream::Tls(Box::new(TlsStream { sock: mio::net::TcpStream::from_std(s), conn })))
        }
        Endpoint::Tcp { host, port } => {
            let addr = resolve(host, *port, cfg.ip_family).map_err(|e| ConnectError::Unreachable(io_text(&e)))?;
            let mut s = std::net::TcpStream::connect_timeout(&addr, timeout)
                .map_err(|e| ConnectError::Unreachable(io_text(&e)))?;
            let _ = s.set_nodelay(true);
            plain_handshake(&mut s, &hs, nreplies, std::net::TcpStream::set_read_timeout)?;
            s.set_nonblocking(true).map_err(|e| ConnectError::Unreachable(io_text(&e)))?;
            Ok(Stream::Tcp(mio::net::TcpStream::from_std(s)))
        }
        Endpoint::Unix(path) => {
            let mut s = std::os::unix::net::UnixStream::connect(path)
                .map_err(|e| ConnectError::Unreachable(io_text(&e)))?;
            plain_handshake(&mut s, &hs, nreplies, std::os::unix::net::UnixStream::set_read_timeout)?;
            s.set_nonblocking(true).map_err(|e| ConnectError::Unreachable(io_text(&e)))?;
            Ok(Stream::Unix(mio::net::UnixStream::from_std(s)))
        }
    }
}

/// A blocking request/reply exchange on a fresh connection (setup-time commands).
pub fn query(cfg: &Config, ep: &Endpoint, args: &[&str]) -> Result<Value, String> {
    let (hs, n) = handshake_bytes(cfg);
    let mut req = hs;
    encode_command(&mut req, args);
    let run = |replies: io::Result<Vec<Value>>| -> Result<Value, String> {
        let mut r = replies.map_err(|e| format!("{ep}: {e}"))?;
        check_handshake(&r[..n]).map_err(|e| match e {
            ConnectError::Rejected(m) | ConnectError::Unreachable(m) => m,
        })?;
        Ok(r.pop().unwrap_or(Value::Null))
    };
    match ep {
        Endpoint::Tcp { host, port } => {
            let addr = resolve(host, *port, cfg.ip_family).map_err(|e| format!("{ep}: {e}"))?;
            let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))
                .map_err(|e| format!("cannot connect to {ep}: {}", io_text(&e)))?;
            let _ = s.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
            if cfg.tls.enabled {
                let setup = tls_setup(cfg)?;
                let mut conn = crate::tls::handshake(setup, host, &mut s)
                    .map_err(|e| format!("{ep}: TLS handshake failed: {}", io_text(&e)))?;
                let mut tls = rustls::Stream::new(&mut conn, &mut s);
                return run(blocking_exchange(&mut tls, &req, n + 1));
            }
            run(blocking_exchange(&mut s, &req, n + 1))
        }
        Endpoint::Unix(p) => {
            let mut s = std::os::unix::net::UnixStream::connect(p).map_err(|e| format!("cannot connect to {ep}: {e}"))?;
            let _ = s.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
            run(blocking_exchange(&mut s, &req, n + 1))
        }
    }
}
