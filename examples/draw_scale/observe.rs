//! What the bench sees of Redis besides the store's answers: INFO, SLOWLOG and CONFIG on a
//! connection of its own, and, Redis running on this machine, its main thread's CPU time and
//! wait for a core (/proc/PID/schedstat) and the hypervisor's steal (/proc/stat): a command's
//! wall time in SLOWLOG holds all three, and on a shared machine the last two can dominate.

use std::collections::HashMap;
use std::time::Duration;

use ::redis::aio::MultiplexedConnection;
use ::redis::Script;

pub type Res<T> = Result<T, String>;

pub fn err(e: impl ToString) -> String {
    e.to_string()
}

/// A command Redis logged, with the script it ran named.
#[derive(Debug, Clone, Default)]
pub struct Slow {
    pub us: u64,
    pub what: String,
}

/// Names of the scripts' SHAs, as `SLOWLOG` shows them (`evalsha SHA ...`).
fn script_names() -> HashMap<String, &'static str> {
    macro_rules! sha {
        ($name:literal) => {
            (
                Script::new(concat!(
                    include_str!("../../lua/prelude.lua"),
                    include_str!(concat!("../../lua/", $name, ".lua"))
                ))
                .get_hash()
                .to_string(),
                $name,
            )
        };
    }
    HashMap::from([sha!("join"), sha!("admit"), sha!("draw_list")])
}

/// The admin connection: INFO, CONFIG, SLOWLOG, TIME (beside the store's own).
pub struct Admin {
    c: MultiplexedConnection,
    names: HashMap<String, &'static str>,
    /// redis-server's process, to read its CPU time and run-queue wait (it runs here).
    pid: u64,
}

/// What Redis' main thread did in a stretch of the run: its CPU time, and how long it was
/// ready to run but waiting for a core (the machine's other work): a command's wall time in
/// SLOWLOG includes that wait.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub cpu_ms: f64,
    pub runq_ms: f64,
}

impl std::ops::Sub for Usage {
    type Output = Usage;
    fn sub(self, o: Usage) -> Usage {
        Usage {
            cpu_ms: self.cpu_ms - o.cpu_ms,
            runq_ms: self.runq_ms - o.runq_ms,
        }
    }
}

impl Admin {
    pub async fn connect(url: &str) -> Res<Self> {
        let c = ::redis::Client::open(url)
            .map_err(err)?
            .get_multiplexed_async_connection()
            .await
            .map_err(err)?;
        let mut admin = Admin {
            c,
            names: script_names(),
            pid: 0,
        };
        let server: String = admin.cmd(&["INFO", "server"]).await?;
        admin.pid = server
            .lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        Ok(admin)
    }

    pub async fn cmd<T: ::redis::FromRedisValue>(&mut self, args: &[&str]) -> Res<T> {
        let mut c = ::redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query_async(&mut self.c).await.map_err(err)
    }

    pub async fn info_field(&mut self, section: &str, line: &str, name: &str) -> Res<f64> {
        let info: String = self.cmd(&["INFO", section]).await?;
        Ok(info
            .lines()
            .find_map(|l| l.strip_prefix(line))
            .and_then(|rest| {
                rest.split([':', ','])
                    .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            })
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN))
    }

    pub async fn used_memory(&mut self) -> Res<f64> {
        let info: String = self.cmd(&["INFO", "memory"]).await?;
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| "no used_memory in INFO".into())
    }

    /// EVALSHA calls and µs per call since the last `CONFIG RESETSTAT`.
    pub async fn evalsha(&mut self) -> Res<(f64, f64)> {
        let calls = self
            .info_field("commandstats", "cmdstat_evalsha:", "calls")
            .await?;
        let per = self
            .info_field("commandstats", "cmdstat_evalsha:", "usec_per_call")
            .await?;
        Ok((calls, per))
    }

    /// SLOWLOG from now on: every command over 1 ms (a lower threshold would log each command
    /// a script runs, and the logging would be part of what it measures). Statistics reset.
    pub async fn reset(&mut self) -> Res<()> {
        self.cmd::<()>(&["CONFIG", "SET", "slowlog-log-slower-than", "1000"])
            .await?;
        self.cmd::<()>(&["CONFIG", "SET", "slowlog-max-len", "100000"])
            .await?;
        self.cmd::<()>(&["SLOWLOG", "RESET"]).await?;
        self.cmd::<()>(&["CONFIG", "RESETSTAT"]).await
    }

    /// Everything logged since the last reset, oldest first.
    pub async fn slowlog(&mut self) -> Res<Vec<Slow>> {
        type Entry = (i64, i64, u64, Vec<Vec<u8>>, String, String);
        let mut all: Vec<Entry> = self.cmd(&["SLOWLOG", "GET", "100000"]).await?;
        all.reverse();
        Ok(all
            .into_iter()
            .map(|(_, _, us, args, _, _)| {
                let word = |i: usize| args.get(i).map(|a| String::from_utf8_lossy(a).to_string());
                let cmd = word(0).unwrap_or_default().to_lowercase();
                let what = match (cmd.as_str(), word(1)) {
                    ("evalsha", Some(sha)) => match self.names.get(&sha) {
                        Some(n) => format!("EVALSHA {n}.lua"),
                        None => format!("EVALSHA {sha}"),
                    },
                    (_, second) => format!("{} {}", cmd.to_uppercase(), second.unwrap_or_default()),
                };
                Slow { us, what }
            })
            .collect())
    }

    /// Redis' main thread so far, from /proc/PID/schedstat (time on a CPU, time waiting on a
    /// run queue, in ns): read without a Redis command, so a stretch as short as one call can
    /// be measured. NaN where it cannot be read (a Redis on another machine).
    pub fn usage(&self) -> Usage {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/schedstat", self.pid)).unwrap_or_default();
        let mut ns = stat
            .split_whitespace()
            .map(|v| v.parse::<f64>().map_or(f64::NAN, |ns| ns / 1e6));
        Usage {
            cpu_ms: ns.next().unwrap_or(f64::NAN),
            runq_ms: ns.next().unwrap_or(f64::NAN),
        }
    }

    pub async fn now_us(&mut self) -> Res<u64> {
        let (s, us): (u64, u64) = self.cmd(&["TIME"]).await?;
        Ok(s * 1_000_000 + us)
    }
}

/// The machine's CPU time so far, from /proc/stat: (stolen by the hypervisor, all), in ticks.
/// A command's wall time includes time stolen while it ran, which neither its CPU time nor
/// its wait for a core shows.
pub fn machine() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    (cpu.get(7).copied().unwrap_or(0.0), cpu.iter().take(8).sum())
}

/// Percent of the machine's CPU time stolen since `before`.
pub fn stolen(before: (f64, f64)) -> f64 {
    let now = machine();
    100.0 * (now.0 - before.0) / (now.1 - before.1).max(1.0)
}

pub fn longest(log: &[Slow]) -> Slow {
    log.iter().max_by_key(|s| s.us).cloned().unwrap_or_default()
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
