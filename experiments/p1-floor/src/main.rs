//! The floor of client CPU per request at pipeline 1: the smallest possible clients, one with
//! epoll (read, parse one bulk reply, write the next GET) and one with io_uring (a send and a
//! recv submitted per request, one io_uring_enter per batch of completions), 50 connections,
//! GET of one 100-byte key. No statistics, no histograms: whatever they spend is the kernel's
//! TCP work plus the system-call mechanism, which bounds what any load generator can save.
//!
//!     p1-floor epoll|uring PORT SECONDS     (see docs/loadgen.md, "The pipeline-1 floor")
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::io::AsRawFd;
use std::time::{Duration, Instant};

const REQ: &[u8] = b"*2\r\n$3\r\nGET\r\n$9\r\nmemtier-1\r\n";

fn cpu_s() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

// A reply is complete when we have a full bulk string: "$<n>\r\n<n bytes>\r\n" or "$-1\r\n".
fn complete(buf: &[u8]) -> Option<usize> {
    let nl = buf.iter().position(|&b| b == b'\n')?;
    if buf[0] != b'$' { return Some(nl + 1); }
    let n: i64 = std::str::from_utf8(&buf[1..nl - 1]).ok()?.parse().ok()?;
    if n < 0 { return Some(nl + 1); }
    let total = nl + 1 + n as usize + 2;
    if buf.len() >= total { Some(total) } else { None }
}

fn connect(port: u16, n: usize) -> Vec<TcpStream> {
    (0..n).map(|_| {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_nodelay(true).unwrap();
        s
    }).collect()
}

fn run_epoll(port: u16, conns: usize, secs: f64) -> (u64, f64) {
    let mut socks = connect(port, conns);
    for s in &socks { s.set_nonblocking(true).unwrap(); }
    let ep = unsafe { libc::epoll_create1(0) };
    for (i, s) in socks.iter().enumerate() {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: i as u64 };
        unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, s.as_raw_fd(), &mut ev) };
    }
    let mut bufs = vec![vec![0u8; 4096]; conns];
    let mut lens = vec![0usize; conns];
    for s in socks.iter_mut() { s.write_all(REQ).unwrap(); }
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    let (c0, t0) = (cpu_s(), Instant::now());
    let mut ops = 0u64;
    while t0.elapsed() < Duration::from_secs_f64(secs) {
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), 256, 100) };
        for e in &events[..n.max(0) as usize] {
            let i = e.u64 as usize;
            let r = socks[i].read(&mut bufs[i][lens[i]..]).unwrap_or(0);
            lens[i] += r;
            if let Some(used) = complete(&bufs[i][..lens[i]]) {
                bufs[i].copy_within(used..lens[i], 0);
                lens[i] -= used;
                ops += 1;
                socks[i].write_all(REQ).unwrap();
            }
        }
    }
    (ops, cpu_s() - c0)
}

fn run_uring(port: u16, conns: usize, secs: f64) -> (u64, f64) {
    use io_uring::{opcode, types, IoUring};
    let socks = connect(port, conns);
    let mut ring = IoUring::new(512).unwrap();
    let mut bufs = vec![vec![0u8; 4096]; conns];
    let mut lens = vec![0usize; conns];
    // user_data: conn index * 2 + (0 send, 1 recv)
    let push_pair = |ring: &mut IoUring, i: usize, bufs: &mut Vec<Vec<u8>>, lens: &Vec<usize>, send: bool| {
        let fd = types::Fd(socks[i].as_raw_fd());
        let mut sq = ring.submission();
        if send {
            let s = opcode::Send::new(fd, REQ.as_ptr(), REQ.len() as u32).build().user_data((i * 2) as u64);
            unsafe { sq.push(&s).unwrap() };
        }
        let b = &mut bufs[i][lens[i]..];
        let r = opcode::Recv::new(fd, b.as_mut_ptr(), b.len() as u32).build().user_data((i * 2 + 1) as u64);
        unsafe { sq.push(&r).unwrap() };
    };
    for i in 0..conns { push_pair(&mut ring, i, &mut bufs, &lens, true); }
    let (c0, t0) = (cpu_s(), Instant::now());
    let mut ops = 0u64;
    while t0.elapsed() < Duration::from_secs_f64(secs) {
        ring.submit_and_wait(1).unwrap();
        let done: Vec<(u64, i32)> = ring.completion().map(|c| (c.user_data(), c.result())).collect();
        for (ud, res) in done {
            let i = (ud / 2) as usize;
            if ud % 2 == 0 { continue; } // send done
            assert!(res > 0, "recv {res}");
            lens[i] += res as usize;
            if let Some(used) = complete(&bufs[i][..lens[i]]) {
                bufs[i].copy_within(used..lens[i], 0);
                lens[i] -= used;
                ops += 1;
                push_pair(&mut ring, i, &mut bufs, &lens, true);
            } else {
                push_pair(&mut ring, i, &mut bufs, &lens, false);
            }
        }
    }
    (ops, cpu_s() - c0)
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let mode = &a[1];
    let port: u16 = a[2].parse().unwrap();
    let secs: f64 = a[3].parse().unwrap();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"*3\r\n$3\r\nSET\r\n$9\r\nmemtier-1\r\n$100\r\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n").unwrap();
    let mut b = [0u8; 16];
    let _ = s.read(&mut b).unwrap();
    let (ops, cpu) = if mode == "epoll" { run_epoll(port, 50, secs) } else { run_uring(port, 50, secs) };
    println!("{mode}: {:.0} ops/s, {:.2} CPU s, {:.0} ops per CPU-s", ops as f64 / secs, cpu, ops as f64 / cpu);
}
