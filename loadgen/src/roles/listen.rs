//! Many connections that only receive (subscribers, tracking listeners): one event loop reads
//! them all and hands every complete value to the role's handler.

use super::wire::{Inbox, Value};
use mio::net::TcpStream;
use mio::{Events as MioEvents, Interest, Poll, Token};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// After the stop signal, keep reading until the connections were quiet this long (messages the
/// server sent before the end still count in the run's totals), at most DRAIN_MAX.
const QUIET: Duration = Duration::from_millis(200);
const DRAIN_MAX: Duration = Duration::from_secs(10);

pub struct Received {
    pub lost: u64,
    pub error: Option<String>,
    /// The connections went quiet after the stop (false: DRAIN_MAX cut the drain short, so the
    /// whole-run counts may miss messages still in the socket buffers).
    pub drained: bool,
}

/// Read `conns` in a thread of their own through warm-up and the measured window (then drain),
/// calling `handle(connection, value)` for every value received.
pub fn listen_through_window<H: FnMut(usize, Value) + Send>(conns: Vec<(std::net::TcpStream, Inbox)>, ctx: &super::Context,
                                                            window_s: f64, mut handle: H) -> Received {
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| listen(conns, stop.clone(), &mut handle));
        super::measure::timed_window(&ctx.clock, &ctx.events, ctx.warmup_s, window_s, || false, |_| {});
        stop.store(true, Ordering::SeqCst);
        reader.join().expect("listener thread")
    })
}

/// Read `conns` until `stop` is set (then drain), calling `handle(connection, value)`.
fn listen<H: FnMut(usize, Value)>(conns: Vec<(std::net::TcpStream, Inbox)>, stop: Arc<AtomicBool>, handle: &mut H) -> Received {
    let mut poll = match Poll::new() {
        Ok(p) => p,
        Err(e) => return Received { lost: 0, error: Some(format!("epoll: {e}")), drained: false },
    };
    let mut streams: Vec<(TcpStream, Inbox, bool)> = Vec::with_capacity(conns.len());
    for (i, (s, inbox)) in conns.into_iter().enumerate() {
        let _ = s.set_nonblocking(true);
        let mut s = TcpStream::from_std(s);
        if let Err(e) = poll.registry().register(&mut s, Token(i), Interest::READABLE) {
            return Received { lost: 0, error: Some(format!("epoll register: {e}")), drained: false };
        }
        streams.push((s, inbox, true));
    }
    // bytes already read during the setup may hold complete values
    for (i, (_, inbox, _)) in streams.iter_mut().enumerate() {
        while let Ok(Some(v)) = inbox.next() {
            handle(i, v);
        }
    }
    let mut events = MioEvents::with_capacity(1024);
    let mut lost = 0;
    let mut stopping_since: Option<Instant> = None;
    let mut last_data = Instant::now();
    let drained = loop {
        if stopping_since.is_none() && stop.load(Ordering::SeqCst) {
            stopping_since = Some(Instant::now());
        }
        if let Some(since) = stopping_since {
            if last_data.elapsed() >= QUIET {
                break true;
            }
            if since.elapsed() >= DRAIN_MAX {
                break false;
            }
        }
        if poll.poll(&mut events, Some(Duration::from_millis(50))).is_err() {
            continue;
        }
        for ev in events.iter() {
            let i = ev.token().0;
            let (stream, inbox, open) = &mut streams[i];
            if !*open {
                continue;
            }
            loop {
                match inbox.fill(stream) {
                    Ok(0) => {
                        *open = false;
                        lost += 1;
                        break;
                    }
                    Ok(_) => {
                        last_data = Instant::now();
                        loop {
                            match inbox.next() {
                                Ok(Some(v)) => handle(i, v),
                                Ok(None) => break,
                                Err(e) => return Received { lost, error: Some(e), drained: false },
                            }
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        *open = false;
                        lost += 1;
                        break;
                    }
                }
            }
        }
    };
    Received { lost, error: None, drained }
}
