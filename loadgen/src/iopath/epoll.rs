//! The epoll path: every connection's non-blocking socket on one mio poll (edge-triggered);
//! a readable connection is read until a short read (the socket is drained) into one buffer of
//! the thread, a write goes straight to the socket. TLS connections always take this path.

use super::{Event, Io};
use crate::net::{io_text, Stream};
use crate::phase::Waker;
use mio::{Events, Poll, Token};
use std::io::ErrorKind;
use std::time::Duration;

const WAKER_TOKEN: Token = Token(usize::MAX - 1);
const READ_CHUNK: usize = 64 * 1024;

pub struct EpollIo {
    poll: Poll,
    events: Events,
    streams: Vec<Option<Stream>>,
    /// Where every read lands before the worker parses it.
    scratch: Vec<u8>,
}

impl EpollIo {
    pub fn new(connections: usize) -> Result<EpollIo, String> {
        let poll = Poll::new().map_err(|e| format!("cannot create poll: {e}"))?;
        Ok(EpollIo {
            poll,
            events: Events::with_capacity(1024),
            streams: (0..connections).map(|_| None).collect(),
            scratch: vec![0u8; READ_CHUNK],
        })
    }

    /// Read `c` until the socket is drained, handing every chunk to `on`.
    fn read_all<F: FnMut(Event)>(stream: &mut Stream, scratch: &mut [u8], c: usize, on: &mut F) {
        loop {
            match stream.read(scratch) {
                Ok(0) => return on(Event::Lost(c, "connection closed by server".into())),
                Ok(n) => {
                    on(Event::Data(c, &scratch[..n]));
                    if n < scratch.len() && stream.short_read_drains() {
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return on(Event::Lost(c, io_text(&e))),
            }
        }
    }
}

impl Io for EpollIo {
    fn attach(&mut self, c: usize, mut stream: Stream) -> Result<(), String> {
        stream.register(self.poll.registry(), Token(c)).map_err(|e| format!("register: {e}"))?;
        self.streams[c] = Some(stream);
        Ok(())
    }

    fn detach(&mut self, c: usize) {
        if let Some(mut s) = self.streams[c].take() {
            s.deregister(self.poll.registry());
        }
    }

    #[inline]
    fn write(&mut self, c: usize, buf: &mut Vec<u8>, from: usize) -> std::io::Result<usize> {
        match self.streams[c].as_mut() {
            Some(s) => s.write(&buf[from..]),
            None => Err(ErrorKind::NotConnected.into()),
        }
    }

    fn wait<F: FnMut(Event)>(&mut self, timeout: Option<Duration>, mut on: F) -> Result<(), String> {
        if let Err(e) = self.poll.poll(&mut self.events, timeout) {
            if e.kind() != ErrorKind::Interrupted {
                return Err(format!("poll failed: {e}"));
            }
        }
        for ev in self.events.iter() {
            let c = ev.token().0;
            let Some(stream) = self.streams.get_mut(c).and_then(Option::as_mut) else { continue };
            if ev.is_writable() {
                // TLS: records rustls still holds go out first.
                if let Err(e) = stream.flush_pending() {
                    on(Event::Lost(c, io_text(&e)));
                    continue;
                }
                on(Event::Writable(c));
            }
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                Self::read_all(stream, &mut self.scratch, c, &mut on);
            }
        }
        Ok(())
    }

    fn waker(&self) -> Result<Waker, String> {
        let w = mio::Waker::new(self.poll.registry(), WAKER_TOKEN).map_err(|e| format!("cannot create waker: {e}"))?;
        Ok(Box::new(move || {
            let _ = w.wake();
        }))
    }
}
