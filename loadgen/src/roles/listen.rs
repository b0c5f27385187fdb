//! Many connections that only receive (subscribers, tracking listeners): one event loop reads
//! them all and hands every complete value to the role's handler.

use super::measure::{run_phases, Recorder};
use super::wire::{Inbox, Value};
use super::RoleError;
use crate::phase::{Driver, Shared, Window, WorkerMsg, PHASE_DONE};
use mio::net::TcpStream;
use mio::{Events as MioEvents, Interest, Poll, Token};
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

/// What listening through a run gave: the connections' fate, the events counted in the
/// window, the window and the warm-up's length.
pub struct Listened {
    pub received: Received,
    pub recorded: crate::stats::ThreadStats,
    pub window: Window,
    pub warmup_seconds: f64,
}

/// Read `conns` in a thread of their own through warm-up and the measured window (then drain),
/// calling `handle(connection, value, recorder)` for every value received; the run's phases are
/// driven meanwhile on this thread.
pub fn listen_through_window<H>(conns: Vec<(std::net::TcpStream, Inbox)>, ctx: &super::Context, window_s: f64,
                                mut handle: H) -> Result<Listened, RoleError>
where
    H: FnMut(usize, Value, &mut Recorder) + Send,
{
    let (mut driver, tx) = Driver::new(1, 1, &ctx.events, None);
    let shared = driver.shared();
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let _ = tx.send(WorkerMsg::Connected);
            let mut recorder = Recorder::new(&shared);
            let received = listen(conns, &shared, &mut |i, v| handle(i, v, &mut recorder));
            (received, recorder.stats)
        });
        let phases = run_phases(&mut driver, ctx.warmup_s, false, Some(window_s));
        let (received, recorded) = reader.join().expect("listener thread");
        let (warmup_seconds, window) = phases?;
        Ok(Listened { received, recorded, window, warmup_seconds })
    })
}

/// Read `conns` until the run is done (then drain), calling `handle(connection, value)`.
fn listen<H: FnMut(usize, Value)>(conns: Vec<(std::net::TcpStream, Inbox)>, shared: &Shared, handle: &mut H) -> Received {
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
        if stopping_since.is_none() && shared.phase() == PHASE_DONE {
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
