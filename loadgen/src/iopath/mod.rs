//! How a worker thread's connections do their I/O: the `Io` interface the event loop of
//! worker.rs is written against, its two implementations (epoll.rs: mio, edge-triggered,
//! a `write`/`read` system call per connection and event; uring.rs: io_uring, every
//! connection's sends and receives submitted and reaped together in one `io_uring_enter`), and
//! the choice between them (`--io auto|io_uring|epoll`, a redline-only flag).

pub mod epoll;
pub mod uring;

use crate::io_choice::Choice;
use crate::net::Stream;
use crate::phase::Waker;
use serde_json::{json, Value};
use std::time::Duration;

/// What a wait hands to the worker.
pub enum Event<'a> {
    /// Bytes received on connection `c`, in order.
    Data(usize, &'a [u8]),
    /// Connection `c` takes bytes again (after a `write` that would have blocked).
    Writable(usize),
    /// Connection `c` closed or failed; nothing more comes from it.
    Lost(usize, String),
}

/// The I/O of one thread's connections, indexed 0.. as the worker numbers them.
pub trait Io {
    /// Watch connection `c` (connected, handshake done) from now on.
    fn attach(&mut self, c: usize, stream: Stream) -> Result<(), String>;
    /// Close connection `c`; nothing more is reported about it.
    fn detach(&mut self, c: usize);
    /// Send `buf[from..]` on `c`: how many bytes were taken (epoll: written to the socket;
    /// io_uring: queued for the next wait, always all), or WouldBlock when none can be taken
    /// now. io_uring may take the bytes by swapping `buf` for an empty buffer of its own (no
    /// copy): the caller must not expect `buf` to keep its length.
    fn write(&mut self, c: usize, buf: &mut Vec<u8>, from: usize) -> std::io::Result<usize>;
    /// Wait at most `timeout` (None: until something happens) for events and hand each to
    /// `on`; io_uring submits the queued sends in the same system call.
    fn wait<F: FnMut(Event)>(&mut self, timeout: Option<Duration>, on: F) -> Result<(), String>;
    /// What the main thread calls to wake this thread's wait.
    fn waker(&self) -> Result<Waker, String>;
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Path {
    IoUring,
    Epoll,
}

/// The I/O path a run uses, what was asked for, and why it is not io_uring when it is not.
#[derive(Clone, Debug)]
pub struct Decision {
    pub path: Path,
    pub requested: Choice,
    pub note: Option<String>,
}

impl Decision {
    /// `redline.io` of the JSON document.
    pub fn to_json(&self) -> Value {
        let path = match self.path {
            Path::IoUring => "io_uring",
            Path::Epoll => "epoll",
        };
        json!({"path": path, "requested": self.requested.name(), "note": self.note})
    }
}

/// Decide the path once per process: `Err` (a run failure) when io_uring is forced and refused.
/// In auto mode a refused io_uring falls back to epoll with one line on stderr.
pub fn decide(choice: Choice, tls: bool) -> Result<Decision, String> {
    let decision = |path, note: Option<&str>| Decision { path, requested: choice, note: note.map(String::from) };
    match choice {
        Choice::Epoll => Ok(decision(Path::Epoll, None)),
        _ if tls => Ok(decision(Path::Epoll, Some("TLS connections run on epoll"))),
        _ => match uring::probe() {
            Ok(()) => Ok(decision(Path::IoUring, None)),
            Err(why) if choice == Choice::IoUring => Err(format!("--io io_uring: io_uring is not available here ({why})")),
            Err(why) => {
                let note = format!("io_uring is not available here ({why}); using epoll");
                eprintln!("redline-load: {note}");
                Ok(decision(Path::Epoll, Some(&note)))
            }
        },
    }
}
