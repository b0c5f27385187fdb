//! What a worker's fetch gave, and the tag every job's payload carries
//! (`"redline":"<job id>:<enqueue time ns>"`), in every library's protocol (queues.rs, and rq.rs
//! for RQ): their own module, so that the two protocols share them without naming each other.

pub enum Fetched {
    Job(Vec<u8>),
    Nothing,
}

/// The job id and enqueue time a payload carries.
pub fn job_tag(payload: &[u8]) -> Option<(u64, u64)> {
    let at = memchr::memmem::find(payload, b"\"redline\":\"")? + 11;
    let rest = &payload[at..];
    let end = memchr::memchr(b'"', rest)?;
    let text = std::str::from_utf8(&rest[..end]).ok()?;
    let (id, ns) = text.split_once(':')?;
    Some((id.parse().ok()?, ns.parse().ok()?))
}
