//! The Redis side of Python RQ (python-rq 2.x and 3.0, https://python-rq.org): what
//! `Queue.enqueue` and a default `rq worker` send for each job, written from RQ's documentation
//! and source (read, not copied) and checked against the commands rq 3.0.0 with redis-py 8.1
//! sends (MONITOR). redis-py's pipelines are transactions: MULTI, the commands, EXEC in one write.
//!
//! - enqueue, 2 round trips: `MULTI SADD rq:queues rq:queue:q EXEC`; then `MULTI HSET rq:job:<id>
//!   status queued, HSET rq:job:<id> <the job's fields> (created_at, data, origin, description,
//!   enqueued_at, timeout 180, status queued, …), RPUSH rq:queue:q <id> EXEC`.
//! - fetch, 7 round trips: the work loop's suspension check (`MULTI` heartbeat, `EXISTS
//!   rq:suspended EXEC`), then `dequeue_job_and_maintain_ttl`: `HSET state idle`, a heartbeat
//!   (`HSET last_heartbeat`, `EXPIRE` the worker and its executions set, one round trip each),
//!   the pop — one queue on Redis >= 6.2: `BLMOVE rq:queue:q rq:queue:q:intermediate LEFT RIGHT
//!   <worker-ttl − 15>`, else `BLPOP` over every queue in order — and `HGETALL rq:job:<id>`
//!   (the job is fetched: its latency ends here).
//! - start, 5 round trips: the heartbeat that ends `dequeue_job_and_maintain_ttl`; the execution
//!   (`MULTI HSET rq:execution:<id>:<exec>`, EXPIRE, `ZADD rq:executions:<id>`, EXPIRE, `ZADD
//!   rq:wip:q` (the started registry), `SADD` the worker's executions, EXPIRE, `HSET state busy
//!   EXEC`); then `MULTI` heartbeat, `HSET` the job's last_heartbeat, status started, started_at
//!   and worker_name, `PERSIST`, (one queue) `LREM` the intermediate queue `EXEC`.
//! - finish, 8 round trips: `HSET last_heartbeat` (execution ended); `WATCH` and `SMEMBERS
//!   rq:job:<id>:dependents`; `MULTI HINCRBY successful_job_count, HINCRBYFLOAT
//!   total_working_time, HSET status finished, HSET <the job's fields>, XADD rq:results:<id>
//!   MAXLEN ~ 10, EXPIRE 500, ZADD rq:finished:q <now + 500> <id>` (the finished registry),
//!   `EXPIRE` the job and its dependents/dependencies keys 500, `DEL` the execution, `ZREM` it
//!   from rq:wip:q and rq:executions:<id>, `SREM` it from the worker's set `EXEC`; `HSET state
//!   idle`; a heartbeat.
//! - per worker, once: `CLIENT SETNAME`, birth (`EXISTS`, `MULTI DEL, HSET rq:worker:<name> …,
//!   SADD rq:workers, SADD rq:workers:q…, EXPIRE EXEC`, `HSET state started`), and after the run
//!   its death (`MULTI SREM…, HSET death, EXPIRE 60, DEL` its executions set `EXEC`).

use super::fetched::Fetched;
use super::wire::{encode, parse, Conn, Value};
use crate::events::unix_now;

const JOB_TIMEOUT: u64 = 180; // Queue.DEFAULT_TIMEOUT
const MONITORING_INTERVAL: u64 = 30; // DEFAULT_JOB_MONITORING_INTERVAL
/// The heartbeat TTL while a job runs (the forking Worker's: min(timeout, monitoring) + 60).
const JOB_HEARTBEAT_TTL: u64 = if JOB_TIMEOUT < MONITORING_INTERVAL { JOB_TIMEOUT } else { MONITORING_INTERVAL } + 60;
const RESULT_TTL: u64 = 500; // DEFAULT_RESULT_TTL: how long finished jobs and results are kept
const DEATH_TTL: u64 = 60;

type Cmd = Vec<String>;

macro_rules! cmd {
    ($($part:expr),* $(,)?) => { vec![$($part.to_string()),*] };
}

/// The keys of one worker.
struct Worker {
    name: String,
    key: String,
    executions: String,
}

/// One run's RQ protocol.
pub struct Rq {
    queues: Vec<String>,
    run: u32, // this run's prefix of job, worker and execution ids (RQ's are random uuids)
    worker_ttl: u64,
    blmove: bool,
}

/// RQ's timestamps: UTC, `%Y-%m-%dT%H:%M:%S.%fZ`.
pub fn utcformat(unix_s: f64) -> String {
    let micros = (unix_s * 1e6).round() as i64;
    let (secs, us) = (micros.div_euclid(1_000_000), micros.rem_euclid(1_000_000));
    let (days, day_s) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // the proleptic Gregorian date of a day number (March-based years, 400-year eras)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{us:06}Z", day_s / 3600, day_s / 60 % 60, day_s % 60)
}

/// The server's version from INFO server (`redis_version:7.0.15`), as RQ's `get_version` reads it.
fn redis_version(info: &[u8]) -> (u32, u32, u32) {
    let text = String::from_utf8_lossy(info);
    let version = text.lines().find_map(|l| l.strip_prefix("redis_version:")).unwrap_or("0");
    let mut parts = version.trim().split('.').map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

fn args(c: &Cmd) -> Vec<&[u8]> {
    c.iter().map(|s| s.as_bytes()).collect()
}

fn call(conn: &mut Conn, c: &Cmd) -> Result<Value, String> {
    conn.call(&args(c))
}

/// One redis-py transaction pipeline: MULTI, the commands and EXEC in one write. EXEC's replies,
/// or None when a WATCHed key changed; an error reply anywhere is an error.
fn transaction(conn: &mut Conn, commands: &[Cmd]) -> Result<Option<Vec<Value>>, String> {
    let (multi, exec) = (cmd!["MULTI"], cmd!["EXEC"]);
    let all: Vec<Vec<&[u8]>> = std::iter::once(&multi).chain(commands).chain([&exec]).map(args).collect();
    let refs: Vec<&[&[u8]]> = all.iter().map(|a| a.as_slice()).collect();
    conn.send_many(&refs)?;
    let mut queued_error = None;
    for _ in 0..=commands.len() {
        queued_error = queued_error.or(conn.read()?.error());
    }
    let error = match (queued_error, conn.read()?) {
        (Some(e), _) => e,
        (None, Value::Null) => return Ok(None),
        (None, Value::Array(replies)) => match replies.iter().find_map(|r| r.error()) {
            Some(e) => e,
            None => return Ok(Some(replies)),
        },
        (None, other) => format!("{other:?}"),
    };
    Err(format!("MULTI {} … EXEC replied: {error}", commands.first().map_or("", |c| &c[0])))
}

/// A job hash's fields in the order RQ's `Job.to_dict` writes them (no callbacks, no group, no
/// result; `data` carries redline's tag).
struct JobFields<'a> {
    created_at: &'a str,
    data: &'a str,
    started_at: &'a str,
    ended_at: &'a str,
    last_heartbeat: &'a str,
    worker_name: &'a str,
    origin: &'a str,
    description: &'a str,
    enqueued_at: &'a str,
    timeout: &'a str,
    status: &'a str,
}

impl JobFields<'_> {
    fn hset(&self, key: &str) -> Cmd {
        let fields = [
            ("created_at", self.created_at),
            ("data", self.data),
            ("success_callback_name", ""),
            ("failure_callback_name", ""),
            ("stopped_callback_name", ""),
            ("started_at", self.started_at),
            ("ended_at", self.ended_at),
            ("last_heartbeat", self.last_heartbeat),
            ("worker_name", self.worker_name),
            ("group_id", ""),
            ("origin", self.origin),
            ("description", self.description),
            ("enqueued_at", self.enqueued_at),
            ("timeout", self.timeout),
            ("status", self.status),
        ];
        let mut c = cmd!["HSET", key];
        c.extend(fields.iter().flat_map(|(f, v)| [f.to_string(), v.to_string()]));
        c
    }
}

/// A fetched job as the worker keeps it between fetch and finish: its id, its queue and its
/// hash, RESP-encoded into the payload that the job loop passes on.
fn pack(job_id: &[u8], queue_key: &[u8], hash: &[Value]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = vec![job_id, queue_key];
    parts.extend(hash.iter().filter_map(|v| v.as_bytes()));
    let mut out = Vec::new();
    encode(&parts, &mut out);
    out
}

fn unpack(job: &[u8]) -> Option<Vec<String>> {
    let (value, _) = parse(job).ok()??;
    value.items()?.iter().map(|v| v.as_bytes().map(|b| String::from_utf8_lossy(b).into_owned())).collect()
}

impl Rq {
    pub fn new(queues: &[String], worker_ttl: u64) -> Rq {
        let run = ((unix_now() * 1e6) as u64 ^ (u64::from(std::process::id()) << 20)) as u32;
        Rq { queues: queues.to_vec(), run, worker_ttl, blmove: false }
    }

    /// RQ's version check (INFO server, once per connection in RQ, once per run here): one queue
    /// on Redis >= 6.2 is fetched with BLMOVE into an intermediate queue, otherwise with BLPOP.
    pub fn setup(&mut self, admin: &mut Conn) -> Result<(), String> {
        let info = admin.call(&[b"INFO", b"server"])?;
        self.blmove = self.queues.len() == 1 && redis_version(info.as_bytes().unwrap_or_default()) >= (6, 2, 0);
        Ok(())
    }

    fn queue_key(name: &str) -> String {
        format!("rq:queue:{name}")
    }

    fn intermediate(queue_key: &str) -> String {
        format!("{queue_key}:intermediate")
    }

    /// The lists of queue `queue` that hold jobs not yet fetched (or fetched and not yet started).
    pub fn pending_keys(&self, queue: usize) -> Vec<String> {
        let key = Rq::queue_key(&self.queues[queue]);
        vec![key.clone(), Rq::intermediate(&key)]
    }

    /// An RQ-shaped job id (a version-4 uuid's layout) that carries redline's job number.
    pub fn job_id(&self, id: u64) -> String {
        format!("{:08x}-0000-4000-8000-{id:012x}", self.run)
    }

    fn worker(&self, index: usize) -> Worker {
        let name = format!("{:08x}{index:024x}", self.run);
        let key = format!("rq:worker:{name}");
        Worker { executions: format!("{key}:executions"), key, name }
    }

    fn dequeue_timeout(&self) -> u64 {
        self.worker_ttl.saturating_sub(15).max(1)
    }

    fn heartbeat(w: &Worker, ttl: u64) -> [Cmd; 3] {
        [
            cmd!["HSET", w.key, "last_heartbeat", utcformat(unix_now())],
            cmd!["EXPIRE", w.key, ttl],
            cmd!["EXPIRE", w.executions, ttl],
        ]
    }

    /// `Worker.heartbeat()` outside a pipeline: three round trips.
    fn beat(&self, conn: &mut Conn, w: &Worker) -> Result<(), String> {
        Rq::heartbeat(w, self.worker_ttl + 60).iter().try_for_each(|c| call(conn, c).map(drop))
    }

    /// `Queue.enqueue` of job `id` (its tagged `data`) on queue `queue`.
    pub fn enqueue(&self, conn: &mut Conn, queue: usize, id: u64, data: &str) -> Result<(), String> {
        let (name, list) = (&self.queues[queue], Rq::queue_key(&self.queues[queue]));
        transaction(conn, &[cmd!["SADD", "rq:queues", list]])?;
        let (job_id, now) = (self.job_id(id), utcformat(unix_now()));
        let key = format!("rq:job:{job_id}");
        let description = format!("redline.job({id})");
        let fields = JobFields {
            created_at: &now,
            data,
            started_at: "",
            ended_at: "",
            last_heartbeat: "",
            worker_name: "",
            origin: name,
            description: &description,
            enqueued_at: &now,
            timeout: &JOB_TIMEOUT.to_string(),
            status: "queued",
        };
        transaction(conn, &[cmd!["HSET", key, "status", "queued"], fields.hset(&key), cmd!["RPUSH", list, job_id]])?;
        Ok(())
    }

    /// A worker's start: its connection's name and its birth (`register_birth`, state started).
    pub fn worker_started(&self, conn: &mut Conn, index: usize) -> Result<(), String> {
        let w = self.worker(index);
        call(conn, &cmd!["CLIENT", "SETNAME", w.name])?;
        call(conn, &cmd!["EXISTS", w.key])?;
        let now = utcformat(unix_now());
        let address = conn.stream.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let mut birth = vec![
            cmd!["DEL", w.key],
            cmd!["HSET", w.key, "birth", now, "last_heartbeat", now, "queues", self.queues.join(","), "pid", std::process::id(),
                 "hostname", "redline-load", "ip_address", address, "version", "redline-load", "python_version", ""],
            cmd!["SADD", "rq:workers", w.key],
        ];
        birth.extend(self.queues.iter().map(|q| cmd!["SADD", format!("rq:workers:{q}"), w.key]));
        birth.push(cmd!["EXPIRE", w.key, self.worker_ttl + 60]);
        transaction(conn, &birth)?;
        call(conn, &cmd!["HSET", w.key, "state", "started"])?;
        Ok(())
    }

    /// A worker's end (`register_death`).
    pub fn worker_stopped(&self, conn: &mut Conn, index: usize) -> Result<(), String> {
        let w = self.worker(index);
        let mut death = vec![cmd!["SREM", "rq:workers", w.key]];
        death.extend(self.queues.iter().map(|q| cmd!["SREM", format!("rq:workers:{q}"), w.key]));
        death.extend([cmd!["HSET", w.key, "death", utcformat(unix_now())], cmd!["EXPIRE", w.key, DEATH_TTL], cmd!["DEL", w.executions]]);
        transaction(conn, &death).map(drop)
    }

    /// The work loop's suspension check and `dequeue_job_and_maintain_ttl` up to the job's hash
    /// (its closing heartbeat is the first step of `finish`): the job's id, queue and hash, or
    /// nothing when the pop timed out (or was unblocked).
    pub fn fetch(&self, conn: &mut Conn, index: usize) -> Result<Fetched, String> {
        let w = self.worker(index);
        let mut suspension = Rq::heartbeat(&w, self.worker_ttl + 60).to_vec();
        suspension.push(cmd!["EXISTS", "rq:suspended"]); // RQ waits while it exists; redline never sets it
        transaction(conn, &suspension)?;
        call(conn, &cmd!["HSET", w.key, "state", "idle"])?;
        self.beat(conn, &w)?;
        let timeout = self.dequeue_timeout().to_string();
        let popped = if self.blmove {
            let key = Rq::queue_key(&self.queues[0]);
            match call(conn, &cmd!["BLMOVE", key, Rq::intermediate(&key), "LEFT", "RIGHT", timeout])? {
                Value::Bulk(id) => Some((key.into_bytes(), id)),
                _ => None,
            }
        } else {
            let mut pop = cmd!["BLPOP"];
            pop.extend(self.queues.iter().map(|q| Rq::queue_key(q)));
            pop.push(timeout);
            match call(conn, &pop)?.items() {
                Some([Value::Bulk(key), Value::Bulk(id)]) => Some((key.clone(), id.clone())),
                _ => None,
            }
        };
        let Some((queue_key, job_id)) = popped else { return Ok(Fetched::Nothing) };
        let job_key = [b"rq:job:".as_slice(), &job_id].concat();
        let hash = conn.call(&[b"HGETALL", &job_key])?;
        let hash = hash.items().filter(|h| !h.is_empty()).ok_or_else(|| {
            format!("job {} was popped but {} is gone", String::from_utf8_lossy(&job_id), String::from_utf8_lossy(&job_key))
        })?;
        Ok(Fetched::Job(pack(&job_id, &queue_key, hash)))
    }

    /// What a default `rq worker` does with a fetched job that succeeds: the dequeue's last
    /// heartbeat, the execution and the started registry, the job started, the job finished (result, finished registry, expiry),
    /// the execution removed, the worker idle again.
    pub fn finish(&self, conn: &mut Conn, index: usize, job: &[u8]) -> Result<(), String> {
        let w = self.worker(index);
        let parts = unpack(job).ok_or("a fetched RQ job that does not decode")?;
        let [job_id, queue_key, hash @ ..] = parts.as_slice() else { return Err("a fetched RQ job without its id".into()) };
        let field = |name: &str| hash.chunks(2).find(|p| p[0] == name).and_then(|p| p.get(1)).map_or("", |v| v.as_str());
        let queue = queue_key.strip_prefix("rq:queue:").unwrap_or(queue_key);
        let (job_key, wip) = (format!("rq:job:{job_id}"), format!("rq:wip:{queue}"));
        let execution_id = job_id.replace('-', ""); // RQ's is a fresh uuid's hex; a job runs once here
        let (execution_key, composite) = (format!("rq:execution:{job_id}:{execution_id}"), format!("{job_id}:{execution_id}"));
        let executions = format!("rq:executions:{job_id}");
        let ttl = JOB_HEARTBEAT_TTL;

        self.beat(conn, &w)?;
        let created = unix_now();
        let seconds = created as u64;
        transaction(conn, &[
            cmd!["HSET", execution_key, "id", execution_id, "job_id", job_id, "created_at", format!("{created:.6}"),
                 "last_heartbeat", format!("{created:.6}"), "worker_name", w.name],
            cmd!["EXPIRE", execution_key, ttl],
            cmd!["ZADD", executions, seconds + ttl + 60, execution_id],
            cmd!["EXPIRE", executions, ttl + 60],
            cmd!["ZADD", wip, seconds + ttl, composite],
            cmd!["SADD", w.executions, composite],
            cmd!["EXPIRE", w.executions, ttl + 60],
            cmd!["HSET", w.key, "state", "busy"],
        ])?;

        let started = unix_now();
        let started_at = utcformat(started);
        let mut start = Rq::heartbeat(&w, ttl).to_vec();
        start.extend([
            cmd!["HSET", job_key, "last_heartbeat", started_at],
            cmd!["HSET", job_key, "last_heartbeat", started_at, "status", "started", "started_at", started_at, "worker_name", w.name],
            cmd!["PERSIST", job_key],
        ]);
        if self.queues.len() == 1 {
            start.push(cmd!["LREM", Rq::intermediate(queue_key), 1, job_id]);
        }
        transaction(conn, &start)?;

        let ended = unix_now();
        let ended_at = utcformat(ended);
        call(conn, &cmd!["HSET", job_key, "last_heartbeat", ended_at])?;
        let dependents = format!("{job_key}:dependents");
        let finished_at = unix_now() as u64;
        let fields = JobFields {
            created_at: field("created_at"),
            data: field("data"),
            started_at: &started_at,
            ended_at: &ended_at,
            last_heartbeat: &ended_at,
            worker_name: &w.name,
            origin: field("origin"),
            description: field("description"),
            enqueued_at: field("enqueued_at"),
            timeout: field("timeout"),
            status: "finished",
        };
        let success = [
            cmd!["HINCRBY", w.key, "successful_job_count", 1],
            cmd!["HINCRBYFLOAT", w.key, "total_working_time", format!("{:.6}", ended - started)],
            cmd!["HSET", job_key, "status", "finished"],
            fields.hset(&job_key),
            cmd!["XADD", format!("rq:results:{job_id}"), "MAXLEN", "~", 10, "*", "type", 1, "worker_name", w.name,
                 "execution_id", execution_id, "execution_started_at", format!("{created:.6}"), "execution_ended_at", format!("{ended:.6}")],
            cmd!["EXPIRE", format!("rq:results:{job_id}"), RESULT_TTL],
            cmd!["ZADD", format!("rq:finished:{queue}"), finished_at + RESULT_TTL, job_id],
            cmd!["EXPIRE", job_key, RESULT_TTL],
            cmd!["EXPIRE", dependents, RESULT_TTL],
            cmd!["EXPIRE", format!("rq:job::{job_id}:dependencies"), RESULT_TTL], // sic: RQ's key has two colons
            cmd!["DEL", execution_key],
            cmd!["ZREM", wip, composite],
            cmd!["ZREM", executions, execution_id],
            cmd!["SREM", w.executions, composite],
        ];
        // handle_job_success: WATCH the dependents, read them (redline's jobs have none), then the
        // transaction; a WATCH that fired is retried as RQ retries it.
        loop {
            call(conn, &cmd!["WATCH", dependents])?;
            call(conn, &cmd!["SMEMBERS", dependents])?;
            if transaction(conn, &success)?.is_some() {
                break;
            }
        }
        call(conn, &cmd!["HSET", w.key, "state", "idle"])?;
        self.beat(conn, &w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rq_timestamps() {
        assert_eq!(utcformat(0.0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(utcformat(951_782_400.25), "2000-02-29T00:00:00.250000Z");
        assert_eq!(utcformat(1_795_638_195.959_591), "2026-11-25T20:23:15.959591Z");
        assert_eq!(utcformat(4_107_542_399.999_999), "2100-02-28T23:59:59.999999Z");
    }

    #[test]
    fn version_and_keys() {
        assert_eq!(redis_version(b"# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:0\r\n"), (7, 0, 15));
        assert_eq!(redis_version(b"redis_version:6.2\r\n"), (6, 2, 0));
        let rq = Rq::new(&["q1".to_string(), "q2".to_string()], 420);
        assert_eq!(rq.pending_keys(1), vec!["rq:queue:q2", "rq:queue:q2:intermediate"]);
        assert_eq!(rq.job_id(42).len(), 36);
        assert!(rq.job_id(42).ends_with("-4000-8000-00000000002a"));
        assert_eq!(rq.dequeue_timeout(), 405);
    }

    #[test]
    fn a_fetched_job_unpacks() {
        let hash = [Value::Bulk(b"data".to_vec()), Value::Bulk(b"{\"redline\":\"1:2\"}".to_vec())];
        let packed = pack(b"id-1", b"rq:queue:default", &hash);
        assert_eq!(unpack(&packed).unwrap(), vec!["id-1", "rq:queue:default", "data", "{\"redline\":\"1:2\"}"]);
        assert_eq!(super::super::fetched::job_tag(&packed), Some((1, 2)));
    }
}
