//! The io_uring path: one ring per worker thread (single issuer, task work deferred to the
//! thread's own `io_uring_enter`), one multishot receive per connection that stays armed and
//! fills buffers the kernel picks from a registered buffer ring, and sends queued during a
//! batch and submitted together. One `io_uring_enter` submits every connection's sends and
//! reaps every receive that completed meanwhile. Buffers are allocated once per thread (the
//! buffer ring) or per connection (two send buffers, reused); nothing is allocated per request.
//!
//! A send's buffer must stay untouched until its completion: a connection has one send in
//! flight and queues what the worker writes meanwhile in its second buffer. Submission entries
//! are only ever built inside `wait`, so a detached connection can have none waiting in the
//! queue; its submitted operations are cancelled synchronously before its socket is closed,
//! and their late completions (an older generation in `user_data`) are ignored.

use super::{Event, Io};
use crate::net::Stream;
use crate::phase::Waker;
use io_uring::types::{BufRingEntry, CancelBuilder, Fd, Fixed, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, IoUring};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::Duration;

const KIND_RECV: u64 = 0;
const KIND_SEND: u64 = 1;
const KIND_WAKE: u64 = 2;
const BUFFER_GROUP: u16 = 0;
/// Received bytes the buffer ring holds in all, per thread.
const POOL_BYTES: usize = 8 << 20;

fn user_data(kind: u64, gen: u32, c: usize) -> u64 {
    (kind << 62) | ((gen as u64 & 0x3FFF_FFFF) << 32) | c as u64
}

fn decode(ud: u64) -> (u64, u32, usize) {
    (ud >> 62, ((ud >> 32) & 0x3FFF_FFFF) as u32, (ud & 0xFFFF_FFFF) as usize)
}

fn errno_text(res: i32) -> String {
    crate::net::io_text(&std::io::Error::from_raw_os_error(-res))
}

/// The ring setup every thread uses (the probe builds the same).
fn new_ring(entries: u32, cq_entries: u32) -> std::io::Result<IoUring> {
    IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(cq_entries)
        .setup_submit_all()
        .build(entries)
}

/// Whether this kernel lets this process use the io_uring path: the ring setup, a buffer ring
/// and a table of registered sockets as the worker threads use them. The reason when not.
pub fn probe() -> Result<(), String> {
    let ring = new_ring(8, 16).map_err(|e| format!("io_uring_setup: {}", crate::net::io_text(&e)))?;
    ring.submitter().register_files_sparse(1).map_err(|e| format!("registered files: {}", crate::net::io_text(&e)))?;
    let pool = BufPool::new(&ring, 1, 4096).map_err(|e| format!("buffer ring: {e}"))?;
    drop(ring);
    drop(pool);
    Ok(())
}

/// The registered buffer ring: `count` buffers of `size` bytes the kernel fills with received
/// data; a buffer goes back to the ring as soon as its bytes were handed to the worker.
struct BufPool {
    entries: *mut BufRingEntry,
    layout: std::alloc::Layout,
    memory: Vec<u8>,
    size: usize,
    mask: u16,
    tail: u16,
}

impl BufPool {
    fn new(ring: &IoUring, count: u16, size: usize) -> Result<BufPool, String> {
        let layout = std::alloc::Layout::from_size_align(count as usize * std::mem::size_of::<BufRingEntry>(), 4096)
            .map_err(|e| e.to_string())?;
        // SAFETY: a non-zero size; zeroed memory is a valid (empty) ring.
        let entries = unsafe { std::alloc::alloc_zeroed(layout) } as *mut BufRingEntry;
        if entries.is_null() {
            return Err("out of memory".into());
        }
        let mut pool = BufPool { entries, layout, memory: vec![0u8; count as usize * size], size, mask: count - 1, tail: 0 };
        // SAFETY: the ring memory lives as long as the pool, which the owner drops after the ring.
        unsafe { ring.submitter().register_buf_ring_with_flags(entries as u64, count, BUFFER_GROUP, 0) }
            .map_err(|e| crate::net::io_text(&e))?;
        for bid in 0..count {
            pool.put(bid);
        }
        pool.publish();
        Ok(pool)
    }

    fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        let start = bid as usize * self.size;
        &self.memory[start..start + len]
    }

    /// Give buffer `bid` back to the kernel (seen once `publish` moves the tail).
    fn put(&mut self, bid: u16) {
        // SAFETY: the index is masked into the ring; the entry is ours until the tail passes it.
        let entry = unsafe { &mut *self.entries.add((self.tail & self.mask) as usize) };
        entry.set_addr(self.memory.as_ptr() as u64 + bid as u64 * self.size as u64);
        entry.set_len(self.size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field of the ring's first entry, shared with the kernel.
        let tail = unsafe { &*(BufRingEntry::tail(self.entries) as *const AtomicU16) };
        tail.store(self.tail, Ordering::Release);
    }
}

impl Drop for BufPool {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.entries as *mut u8, self.layout) };
    }
}

#[derive(Default)]
struct Slot {
    stream: Option<Stream>,
    gen: u32,
    recv_armed: bool,
    lost: bool,
    /// The send in flight (`sending[sent..]` still to go), and what was written meanwhile.
    sending: Vec<u8>,
    sent: usize,
    in_flight: bool,
    queued: Vec<u8>,
}

pub struct UringIo {
    // Dropped first: the ring goes before the memory its operations point into.
    ring: IoUring,
    pool: BufPool,
    slots: Vec<Slot>,
    /// Slots with a send or a receive to submit at the next wait.
    pending: Vec<usize>,
    wake: Arc<OwnedFd>,
    wake_buf: Box<u64>,
    wake_armed: bool,
    completions: Vec<(u64, i32, u32)>,
}

impl UringIo {
    pub fn new(connections: usize) -> Result<UringIo, String> {
        let entries = ((connections * 2 + 8).next_power_of_two()).clamp(64, 32768) as u32;
        let ring = new_ring(entries, entries * 4).map_err(|e| format!("io_uring_setup: {}", crate::net::io_text(&e)))?;
        let count = ((connections * 2).next_power_of_two()).clamp(64, 32768);
        let size = (POOL_BYTES / count).clamp(2048, 65536);
        let pool = BufPool::new(&ring, count as u16, size).map_err(|e| format!("io_uring buffer ring: {e}"))?;
        // Connection c's socket is registered file c: no file lookup per operation.
        ring.submitter()
            .register_files_sparse(connections.max(1) as u32)
            .map_err(|e| format!("io_uring registered files: {}", crate::net::io_text(&e)))?;
        // SAFETY: eventfd returns a new descriptor we own, or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(format!("eventfd: {}", std::io::Error::last_os_error()));
        }
        Ok(UringIo {
            ring,
            pool,
            slots: (0..connections).map(|_| Slot::default()).collect(),
            pending: Vec::with_capacity(connections),
            // SAFETY: fd is a fresh descriptor owned by nobody else.
            wake: Arc::new(unsafe { OwnedFd::from_raw_fd(fd) }),
            wake_buf: Box::new(0),
            wake_armed: false,
            completions: Vec::with_capacity(entries as usize * 4),
        })
    }

    fn push(&mut self, entry: &io_uring::squeue::Entry) -> Result<(), String> {
        // SAFETY: every buffer an entry points to (send buffers, the wake counter) stays in
        // place until its completion or its synchronous cancellation.
        while unsafe { self.ring.submission().push(entry) }.is_err() {
            self.ring.submit().map_err(|e| format!("io_uring_enter: {e}"))?;
        }
        Ok(())
    }

    /// Build the entries of every pending slot: its next send, a receive to re-arm.
    fn prepare(&mut self) -> Result<(), String> {
        if !self.wake_armed {
            let e = opcode::Read::new(Fd(self.wake.as_raw_fd()), &mut *self.wake_buf as *mut u64 as *mut u8, 8)
                .build()
                .user_data(user_data(KIND_WAKE, 0, 0));
            self.push(&e)?;
            self.wake_armed = true;
        }
        let pending = std::mem::take(&mut self.pending);
        for &c in &pending {
            let s = &mut self.slots[c];
            if s.stream.is_none() || s.lost {
                continue;
            }
            let (fd, gen) = (Fixed(c as u32), s.gen);
            if !s.recv_armed {
                s.recv_armed = true;
                self.push(&opcode::RecvMulti::new(fd, BUFFER_GROUP).build().user_data(user_data(KIND_RECV, gen, c)))?;
            }
            let s = &mut self.slots[c];
            if !s.in_flight && s.sent == s.sending.len() && !s.queued.is_empty() {
                std::mem::swap(&mut s.sending, &mut s.queued);
                s.queued.clear();
                s.sent = 0;
            }
            if !s.in_flight && s.sent < s.sending.len() {
                s.in_flight = true;
                let rest = &s.sending[s.sent..];
                let e = opcode::Send::new(fd, rest.as_ptr(), rest.len() as u32)
                    .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
                    .build()
                    .user_data(user_data(KIND_SEND, gen, c));
                self.push(&e)?;
            }
        }
        self.pending = pending;
        self.pending.clear();
        Ok(())
    }

    fn mark(&mut self, c: usize) {
        self.pending.push(c);
    }

    /// One completion, handed to the worker as an event where it is one.
    fn complete<F: FnMut(Event)>(&mut self, ud: u64, res: i32, flags: u32, on: &mut F) {
        let (kind, gen, c) = decode(ud);
        if kind == KIND_WAKE {
            self.wake_armed = false;
            return;
        }
        let buffer = if kind == KIND_RECV { cqueue::buffer_select(flags) } else { None };
        let current = self.slots.get(c).is_some_and(|s| s.gen == gen && s.stream.is_some());
        if current {
            match kind {
                KIND_RECV => self.received(c, res, flags, buffer, on),
                _ => self.sent(c, res, on),
            }
        }
        if let Some(bid) = buffer {
            self.pool.put(bid);
        }
    }

    fn received<F: FnMut(Event)>(&mut self, c: usize, res: i32, flags: u32, buffer: Option<u16>, on: &mut F) {
        if !cqueue::more(flags) {
            self.slots[c].recv_armed = false;
            self.mark(c);
        }
        match (res, buffer) {
            (n, Some(bid)) if n > 0 => on(Event::Data(c, self.pool.bytes(bid, n as usize))),
            (0, _) => self.lose(c, "connection closed by server".into(), on),
            (n, _) if n == -libc::ENOBUFS => {} // every buffer was taken: armed again at the next wait
            (n, _) if n < 0 => self.lose(c, errno_text(n), on),
            _ => {}
        }
    }

    fn sent<F: FnMut(Event)>(&mut self, c: usize, res: i32, on: &mut F) {
        let s = &mut self.slots[c];
        s.in_flight = false;
        if res < 0 {
            return self.lose(c, errno_text(res), on);
        }
        s.sent += res as usize;
        if s.sent == s.sending.len() {
            s.sending.clear();
            s.sent = 0;
        }
        if s.sent < s.sending.len() || !s.queued.is_empty() {
            self.mark(c);
        }
    }

    fn lose<F: FnMut(Event)>(&mut self, c: usize, why: String, on: &mut F) {
        if !self.slots[c].lost {
            self.slots[c].lost = true;
            on(Event::Lost(c, why));
        }
    }
}

impl Io for UringIo {
    fn attach(&mut self, c: usize, stream: Stream) -> Result<(), String> {
        let fd = match &stream {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tls(_) => return Err("TLS connections run on epoll".into()),
        };
        self.ring
            .submitter()
            .register_files_update(c as u32, &[fd])
            .map_err(|e| format!("io_uring: registering a socket: {}", crate::net::io_text(&e)))?;
        let s = &mut self.slots[c];
        *s = Slot { stream: Some(stream), gen: s.gen.wrapping_add(1), ..std::mem::take(s) };
        s.sending.clear();
        s.queued.clear();
        self.mark(c);
        Ok(())
    }

    fn detach(&mut self, c: usize) {
        let s = &mut self.slots[c];
        let Some(stream) = s.stream.take() else { return };
        if s.recv_armed || s.in_flight {
            // Wait until the kernel no longer touches this connection's buffers.
            let _ = self.ring.submitter().register_sync_cancel(None, CancelBuilder::fd(Fixed(c as u32)).all());
        }
        let _ = self.ring.submitter().register_files_update(c as u32, &[-1]);
        let s = &mut self.slots[c];
        (s.recv_armed, s.in_flight, s.lost, s.sent) = (false, false, false, 0);
        s.sending.clear();
        s.queued.clear();
        drop(stream);
    }

    #[inline]
    fn write(&mut self, c: usize, buf: &mut Vec<u8>, from: usize) -> std::io::Result<usize> {
        let s = &mut self.slots[c];
        if s.stream.is_none() {
            return Err(std::io::ErrorKind::NotConnected.into());
        }
        let taken = buf.len() - from;
        let first = s.queued.is_empty();
        if first && from == 0 {
            // The worker's bytes become the queue, the empty queue its next buffer: no copy.
            std::mem::swap(&mut s.queued, buf);
            buf.clear();
        } else {
            s.queued.extend_from_slice(&buf[from..]);
        }
        if first {
            self.pending.push(c);
        }
        Ok(taken)
    }

    fn wait<F: FnMut(Event)>(&mut self, timeout: Option<Duration>, mut on: F) -> Result<(), String> {
        self.prepare()?;
        let entered = match timeout {
            None => self.ring.submit_and_wait(1),
            Some(t) => {
                let ts = Timespec::new().sec(t.as_secs()).nsec(t.subsec_nanos());
                self.ring.submitter().submit_with_args(1, &SubmitArgs::new().timespec(&ts))
            }
        };
        match entered {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)) => {}
            Err(e) => return Err(format!("io_uring_enter: {e}")),
        }
        let mut completions = std::mem::take(&mut self.completions);
        completions.extend(self.ring.completion().map(|e| (e.user_data(), e.result(), e.flags())));
        for &(ud, res, flags) in &completions {
            self.complete(ud, res, flags, &mut on);
        }
        completions.clear();
        self.completions = completions;
        self.pool.publish();
        Ok(())
    }

    fn waker(&self) -> Result<Waker, String> {
        let fd = self.wake.clone();
        Ok(Box::new(move || {
            let one: u64 = 1;
            // SAFETY: an 8-byte write from a local into the eventfd we keep open.
            let _ = unsafe { libc::write(fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
        }))
    }
}

impl Drop for UringIo {
    fn drop(&mut self) {
        // Every operation ends before the buffers it points into are freed.
        let _ = self.ring.submitter().register_sync_cancel(None, CancelBuilder::any().all());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_round_trips() {
        for (kind, gen, c) in [(KIND_RECV, 0, 0), (KIND_SEND, 0x3FFF_FFFF, 0xFFFF_FFFF), (KIND_WAKE, 7, 12345)] {
            assert_eq!(decode(user_data(kind, gen, c)), (kind, gen, c));
        }
        assert_eq!(decode(user_data(KIND_SEND, 0x4000_0001, 3)), (KIND_SEND, 1, 3)); // generations wrap
    }
}
