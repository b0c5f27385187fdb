//! The Redis side of five job-queue libraries, written from their public documentation and
//! source (read, not copied): how a job is enqueued and how a worker fetches and finishes it.
//! Every payload carries `"redline":"<job id>:<enqueue time ns>"` so that the worker can account
//! for the job (exactly once) and its enqueue→fetch latency.
//!
//! - Sidekiq (BasicFetch): enqueue = SADD queues q + LPUSH queue:q payload (one round trip);
//!   fetch = BRPOP queue:q1 … queue:qN 2 (every queue in one call, Sidekiq's 2 s timeout).
//! - Celery / kombu: a logical queue is one list per priority step (0, 3, 6, 9: the step-0 key
//!   is the queue's name, the others name + "\x06\x16" + step); enqueue = LPUSH to the job's
//!   priority key; fetch = BRPOP over every priority key, highest priority first, with
//!   --brpop-timeout-secs; delivery bookkeeping ZADD unacked_index + HSET unacked, the ack
//!   ZREM + HDEL.
//! - Resque: enqueue = SADD resque:queues q + RPUSH resque:queue:q payload; fetch = LPOP of each
//!   queue in order, sleeping --poll-interval-ms when every queue was empty (no blocking).
//! - BullMQ (v5): enqueue = a script adding the job hash, LPUSH bull:q:wait id and ZADD
//!   bull:q:marker 0 "0"; fetch = a script moving the next id from wait to active (RPOPLPUSH)
//!   with its lock and processedOn, and when there is none BZPOPMIN on the marker; finish = a
//!   script removing it from active, adding it to completed and dropping the lock.
//! - RQ (python-rq): its own module, rq.rs (enqueue in two MULTI/EXEC pipelines, BLMOVE or BLPOP
//!   with the worker's heartbeats, the started and finished registries).

use super::fetched::Fetched;
use super::rq::Rq;
use super::wire::{Conn, Value};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Library {
    Sidekiq,
    Celery,
    Resque,
    BullMq,
    Rq,
}

pub const KOMBU_STEPS: [u32; 4] = [0, 3, 6, 9];
const KOMBU_SEP: &str = "\x06\x16";
const SIDEKIQ_TIMEOUT: &[u8] = b"2";
const BULLMQ_MARKER_TIMEOUT: &[u8] = b"1";

const BULLMQ_ADD: &str = "redis.call('HSET', KEYS[1], 'name', 'redline', 'data', ARGV[2], 'timestamp', ARGV[3]) \
redis.call('LPUSH', KEYS[2], ARGV[1]) redis.call('ZADD', KEYS[3], 0, '0') return ARGV[1]";
const BULLMQ_TAKE: &str = "local id = redis.call('RPOPLPUSH', KEYS[1], KEYS[2]) if not id then return false end \
redis.call('SET', ARGV[1] .. id .. ':lock', ARGV[2], 'PX', 30000) \
redis.call('HSET', ARGV[1] .. id, 'processedOn', ARGV[3]) \
return redis.call('HGET', ARGV[1] .. id, 'data')";
const BULLMQ_FINISH: &str = "redis.call('LREM', KEYS[1], -1, ARGV[1]) redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1]) \
redis.call('HSET', ARGV[3] .. ARGV[1], 'finishedOn', ARGV[2]) redis.call('DEL', ARGV[3] .. ARGV[1] .. ':lock') return 1";

/// The keys and scripts of one run.
pub struct Protocol {
    pub library: Library,
    queues: Vec<String>,
    priorities: usize,
    brpop_timeout: String,
    scripts: Vec<String>, // BullMQ: add, take, finish (SHA1s after SCRIPT LOAD)
    rq: Option<Rq>,
}

fn now_ms() -> String {
    format!("{}", (crate::events::unix_now() * 1000.0) as u64)
}

impl Protocol {
    /// `worker_ttl`: RQ's --worker-ttl (the others ignore it).
    pub fn new(library: Library, num_queues: u64, priorities: u64, brpop_timeout: u64, worker_ttl: u64) -> Protocol {
        let name = |i: u64| match library {
            Library::Celery => if num_queues == 1 { "celery".to_string() } else { format!("celery{}", i + 1) },
            _ => if num_queues == 1 { "default".to_string() } else { format!("q{}", i + 1) },
        };
        let queues: Vec<String> = (0..num_queues.max(1)).map(name).collect();
        Protocol {
            library,
            rq: (library == Library::Rq).then(|| Rq::new(&queues, worker_ttl)),
            queues,
            priorities: (priorities.clamp(1, KOMBU_STEPS.len() as u64)) as usize,
            brpop_timeout: brpop_timeout.max(1).to_string(),
            scripts: Vec::new(),
        }
    }

    fn rq(&self) -> &Rq {
        self.rq.as_ref().expect("the RQ protocol of an rq-bench run")
    }

    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    fn kombu_key(&self, queue: usize, step: usize) -> String {
        let pri = KOMBU_STEPS[step];
        if pri == 0 { self.queues[queue].clone() } else { format!("{}{KOMBU_SEP}{pri}", self.queues[queue]) }
    }

    fn bull(&self, queue: usize, what: &str) -> String {
        format!("bull:{}:{what}", self.queues[queue])
    }

    /// Every key the run leaves jobs in, to check that none is left behind.
    pub fn pending_keys(&self) -> Vec<String> {
        (0..self.queues.len())
            .flat_map(|q| match self.library {
                Library::Sidekiq => vec![format!("queue:{}", self.queues[q])],
                Library::Resque => vec![format!("resque:queue:{}", self.queues[q])],
                Library::Celery => (0..self.priorities).map(|s| self.kombu_key(q, s)).collect(),
                Library::BullMq => vec![self.bull(q, "wait"), self.bull(q, "active")],
                Library::Rq => self.rq().pending_keys(q),
            })
            .collect()
    }

    /// Once before the run (BullMQ loads its scripts, RQ asks the server's version).
    pub fn setup(&mut self, admin: &mut Conn) -> Result<(), String> {
        if self.library == Library::BullMq {
            for body in [BULLMQ_ADD, BULLMQ_TAKE, BULLMQ_FINISH] {
                let sha = admin.call(&[b"SCRIPT", b"LOAD", body.as_bytes()])?;
                self.scripts.push(String::from_utf8_lossy(sha.as_bytes().unwrap_or_default()).into_owned());
            }
        }
        if let Some(rq) = &mut self.rq {
            rq.setup(admin)?;
        }
        Ok(())
    }

    /// A worker connection before its first fetch (RQ registers the worker's birth).
    pub fn worker_started(&self, conn: &mut Conn, worker: usize) -> Result<(), String> {
        self.rq.as_ref().map_or(Ok(()), |rq| rq.worker_started(conn, worker))
    }

    /// A worker connection after its last fetch (RQ registers the worker's death).
    pub fn worker_stopped(&self, conn: &mut Conn, worker: usize) -> Result<(), String> {
        self.rq.as_ref().map_or(Ok(()), |rq| rq.worker_stopped(conn, worker))
    }

    pub fn payload(&self, queue: usize, id: u64, enqueued_ns: u64) -> String {
        let tag = format!("{id}:{enqueued_ns}");
        match self.library {
            Library::Sidekiq => format!(
                "{{\"retry\":true,\"queue\":\"{}\",\"class\":\"RedlineJob\",\"args\":[{id}],\"jid\":\"{id:024x}\",\"created_at\":{},\"redline\":\"{tag}\"}}",
                self.queues[queue], crate::events::unix_now()),
            Library::Resque => format!("{{\"class\":\"RedlineJob\",\"args\":[{id}],\"redline\":\"{tag}\"}}"),
            Library::Celery => format!(
                "{{\"body\":\"W10=\",\"content-encoding\":\"utf-8\",\"content-type\":\"application/json\",\"headers\":{{\"lang\":\"py\",\"task\":\"redline.job\",\"id\":\"{id}\"}},\"properties\":{{\"delivery_tag\":\"{id}\",\"priority\":0}},\"redline\":\"{tag}\"}}"),
            Library::BullMq => format!("{{\"redline\":\"{tag}\"}}"),
            Library::Rq => format!("{{\"func\":\"redline.job\",\"args\":[{id}],\"redline\":\"{tag}\"}}"),
        }
    }

    /// Enqueue job `id` on `queue` (one round trip).
    pub fn enqueue(&self, conn: &mut Conn, queue: usize, id: u64, enqueued_ns: u64) -> Result<(), String> {
        let payload = self.payload(queue, id, enqueued_ns);
        let name = self.queues[queue].as_bytes();
        match self.library {
            Library::Sidekiq | Library::Resque => {
                let (set, list, push): (&[u8], String, &[u8]) = if self.library == Library::Sidekiq {
                    (b"queues", format!("queue:{}", self.queues[queue]), b"LPUSH")
                } else {
                    (b"resque:queues", format!("resque:queue:{}", self.queues[queue]), b"RPUSH")
                };
                conn.send_many(&[&[b"SADD", set, name], &[push, list.as_bytes(), payload.as_bytes()]])?;
                for _ in 0..2 {
                    expect_ok(conn.read()?)?;
                }
            }
            Library::Celery => {
                let step = (id as usize / self.queues.len()) % self.priorities;
                let key = self.kombu_key(queue, step);
                expect_ok(conn.call(&[b"LPUSH", key.as_bytes(), payload.as_bytes()])?)?;
            }
            Library::BullMq => {
                let (hash, wait, marker) = (self.bull(queue, &id.to_string()), self.bull(queue, "wait"), self.bull(queue, "marker"));
                let id_text = id.to_string();
                let ts = now_ms();
                conn.call(&[b"EVALSHA", self.scripts[0].as_bytes(), b"3", hash.as_bytes(), wait.as_bytes(), marker.as_bytes(),
                            id_text.as_bytes(), payload.as_bytes(), ts.as_bytes()])?;
            }
            Library::Rq => self.rq().enqueue(conn, queue, id, &payload)?,
        }
        Ok(())
    }

    /// One fetch attempt of a worker serving `queue` (BullMQ; the others serve every queue).
    pub fn fetch(&self, conn: &mut Conn, queue: usize, worker: usize) -> Result<Fetched, String> {
        match self.library {
            Library::Sidekiq => {
                let keys: Vec<String> = self.queues.iter().map(|q| format!("queue:{q}")).collect();
                let mut args: Vec<&[u8]> = vec![b"BRPOP"];
                args.extend(keys.iter().map(|k| k.as_bytes()));
                args.push(SIDEKIQ_TIMEOUT);
                Ok(popped(conn.call(&args)?))
            }
            Library::Celery => {
                let keys: Vec<String> = (0..self.priorities)
                    .flat_map(|s| (0..self.queues.len()).map(move |q| (q, s)))
                    .map(|(q, s)| self.kombu_key(q, s))
                    .collect();
                let mut args: Vec<&[u8]> = vec![b"BRPOP"];
                args.extend(keys.iter().map(|k| k.as_bytes()));
                args.push(self.brpop_timeout.as_bytes());
                Ok(popped(conn.call(&args)?))
            }
            Library::Resque => {
                for q in &self.queues {
                    let key = format!("resque:queue:{q}");
                    if let Value::Bulk(job) = conn.call(&[b"LPOP", key.as_bytes()])? {
                        return Ok(Fetched::Job(job));
                    }
                }
                Ok(Fetched::Nothing)
            }
            Library::BullMq => {
                let (wait, active, prefix) = (self.bull(queue, "wait"), self.bull(queue, "active"), self.bull(queue, ""));
                let token = format!("redline-worker-{worker}");
                let ts = now_ms();
                match conn.call(&[b"EVALSHA", self.scripts[1].as_bytes(), b"2", wait.as_bytes(), active.as_bytes(),
                                  prefix.as_bytes(), token.as_bytes(), ts.as_bytes()])? {
                    Value::Bulk(job) => Ok(Fetched::Job(job)),
                    _ => {
                        let marker = self.bull(queue, "marker");
                        conn.call(&[b"BZPOPMIN", marker.as_bytes(), BULLMQ_MARKER_TIMEOUT])?;
                        Ok(Fetched::Nothing)
                    }
                }
            }
            Library::Rq => self.rq().fetch(conn, worker),
        }
    }

    /// After a fetched job ran: the library's acknowledgement (Celery) or completion (BullMQ,
    /// RQ) by worker `worker`.
    pub fn delivered(&self, conn: &mut Conn, queue: usize, worker: usize, id: u64, job: &[u8]) -> Result<(), String> {
        let tag = id.to_string();
        match self.library {
            Library::Celery => {
                let ts = format!("{}", crate::events::unix_now());
                conn.send_many(&[&[b"ZADD", b"unacked_index", ts.as_bytes(), tag.as_bytes()], &[b"HSET", b"unacked", tag.as_bytes(), job]])?;
                conn.read()?;
                conn.read()?;
                conn.send_many(&[&[b"ZREM", b"unacked_index", tag.as_bytes()], &[b"HDEL", b"unacked", tag.as_bytes()]])?;
                conn.read()?;
                conn.read()?;
            }
            Library::BullMq => {
                let (active, completed, prefix) = (self.bull(queue, "active"), self.bull(queue, "completed"), self.bull(queue, ""));
                let ts = now_ms();
                conn.call(&[b"EVALSHA", self.scripts[2].as_bytes(), b"2", active.as_bytes(), completed.as_bytes(),
                            tag.as_bytes(), ts.as_bytes(), prefix.as_bytes()])?;
            }
            Library::Rq => self.rq().finish(conn, worker, job)?,
            Library::Sidekiq | Library::Resque => {}
        }
        Ok(())
    }
}

fn expect_ok(v: Value) -> Result<(), String> {
    match v.error() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// BRPOP's reply: [key, job] or nil on timeout (or CLIENT UNBLOCK).
fn popped(v: Value) -> Fetched {
    match v.items() {
        Some([_, Value::Bulk(job)]) => Fetched::Job(job.clone()),
        _ => Fetched::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::super::fetched::job_tag;
    use super::*;

    #[test]
    fn every_payload_carries_its_tag() {
        for lib in [Library::Sidekiq, Library::Celery, Library::Resque, Library::BullMq, Library::Rq] {
            let p = Protocol::new(lib, 2, 4, 1, 420);
            assert_eq!(job_tag(p.payload(1, 42, 123456).as_bytes()), Some((42, 123456)), "{lib:?}");
        }
    }

    #[test]
    fn kombu_priority_keys() {
        let p = Protocol::new(Library::Celery, 1, 4, 1, 0);
        assert_eq!(p.pending_keys(), vec!["celery", "celery\x06\x163", "celery\x06\x166", "celery\x06\x169"]);
    }
}
