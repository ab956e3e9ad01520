//! Asking the sentinels whom they name as the primary, and choosing among their answers.
//!
//! Every sentinel is asked at once (`SENTINEL MASTER name`), each on a connection of its own
//! kept between lookups; the answers are collected until a majority of the listed sentinels
//! has answered, or the window is up. Among the primaries named, the one of the highest
//! `config-epoch` is chosen: the epoch a failover moves forward, so a sentinel that lags or is
//! cut off with an old primary names a lower one.
//!
//! Found by review, twice: asked through redis-rs's lookup, whose answers are taken in the
//! list's order, a frozen first sentinel held every lookup until the store's timeout (a
//! failover was never followed while it stayed frozen); and then, taking the fastest answer,
//! a stale sentinel beside three current ones moved every instance between the old and the new
//! primary every second, writing to both.

use std::collections::HashMap;
use std::time::Duration;

use ::redis::aio::MultiplexedConnection;
use ::redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, RedisResult};

/// One sentinel: its address, and the connection to it while it works.
pub(super) struct Sentinel {
    info: ConnectionInfo,
    conn: Option<MultiplexedConnection>,
}

/// A primary as a sentinel names it: where, and the configuration epoch that made it primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Named {
    pub host: String,
    pub port: u16,
    pub epoch: u64,
}

impl Named {
    /// `host:port`, as the primary in use is compared by.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

impl Sentinel {
    pub fn new(info: ConnectionInfo) -> Self {
        Self { info, conn: None }
    }

    /// What this sentinel says of `master`: `None` when it names no usable primary (down, or
    /// unknown to it). A failed connection is dropped and made again next time.
    async fn ask(&mut self, master: &str, timeout: Duration) -> RedisResult<Option<Named>> {
        let conn = match &mut self.conn {
            Some(c) => c,
            None => {
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout));
                let c = ::redis::Client::open(self.info.clone())?
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                self.conn.insert(c)
            }
        };
        let reply = ::redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(master)
            .query_async::<HashMap<String, String>>(conn)
            .await;
        match reply {
            Ok(r) => Ok(named(&r, master)),
            // An unknown master is an error reply on a working connection.
            Err(e)
                if e.kind()
                    == ::redis::ErrorKind::Server(::redis::ServerErrorKind::ResponseError) =>
            {
                Ok(None)
            }
            Err(e) => {
                self.conn = None;
                Err(e)
            }
        }
    }
}

/// The primary a `SENTINEL MASTER` reply names, if it is one to use: this master, with an
/// address, and not seen down (`s_down`, `o_down`) or cut off (`disconnected`).
pub(super) fn named(reply: &HashMap<String, String>, master: &str) -> Option<Named> {
    if reply.get("name").map(String::as_str) != Some(master) {
        return None;
    }
    let flags = reply.get("flags")?;
    let bad = ["s_down", "o_down", "disconnected"];
    if !flags.split(',').any(|f| f == "master") || flags.split(',').any(|f| bad.contains(&f)) {
        return None;
    }
    Some(Named {
        host: reply.get("ip")?.clone(),
        port: reply.get("port")?.parse().ok()?,
        epoch: reply
            .get("config-epoch")
            .and_then(|e| e.parse().ok())
            .unwrap_or(0),
    })
}

/// The primaries named, best first: the highest epoch first, then the one more sentinels name;
/// each address once, with the highest epoch any sentinel gave it.
pub(super) fn ranked(answers: &[Named]) -> Vec<Named> {
    let mut best: Vec<(Named, usize)> = Vec::new();
    for a in answers {
        match best
            .iter_mut()
            .find(|(b, _)| b.host == a.host && b.port == a.port)
        {
            Some((b, n)) => {
                b.epoch = b.epoch.max(a.epoch);
                *n += 1;
            }
            None => best.push((a.clone(), 1)),
        }
    }
    best.sort_by(|(a, n), (b, m)| b.epoch.cmp(&a.epoch).then(m.cmp(n)));
    best.into_iter().map(|(b, _)| b).collect()
}

/// Asks every sentinel at once; the primaries named by those that answered once a majority of
/// all has, or when `window` is up (a frozen sentinel then only costs the window), and the
/// last error met (for a lookup that found nothing).
pub(super) async fn ask_all(
    sentinels: &mut [Sentinel],
    master: &str,
    timeout: Duration,
    window: Duration,
) -> (Vec<Named>, Option<::redis::RedisError>) {
    use futures_util::stream::{FuturesUnordered, StreamExt};
    let majority = sentinels.len() / 2 + 1;
    let mut asks: FuturesUnordered<_> = sentinels
        .iter_mut()
        .map(|s| s.ask(master, timeout))
        .collect();
    let deadline = tokio::time::Instant::now() + window;
    let (mut named, mut answered, mut failed) = (Vec::new(), 0, None);
    while answered < majority {
        tokio::select! {
            next = asks.next() => match next {
                None => break,
                Some(Ok(n)) => {
                    answered += 1;
                    named.extend(n);
                }
                Some(Err(e)) => failed = Some(e),
            },
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    (named, failed)
}

/// The connection details of the primary at `host:port`: those of the first sentinel URL (its
/// credentials, database and TLS), at that address.
pub(super) fn node_info(template: &ConnectionInfo, host: &str, port: u16) -> ConnectionInfo {
    let addr = match template.addr() {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host: host.to_string(),
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host.to_string(), port),
    };
    template.clone().set_addr(addr)
}

/// Whether a `ROLE` reply says the node is a primary.
pub(super) fn says_primary(role: &::redis::Value) -> bool {
    use ::redis::Value;
    let Value::Array(parts) = role else {
        return false;
    };
    match parts.first() {
        Some(Value::BulkString(b)) => b == b"master",
        Some(Value::SimpleString(s)) => s == "master",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_reply_names_a_primary_only_when_it_is_up_and_this_master() {
        let ok = reply(&[
            ("name", "m"),
            ("ip", "10.0.0.2"),
            ("port", "6380"),
            ("flags", "master"),
            ("config-epoch", "7"),
        ]);
        assert_eq!(
            named(&ok, "m"),
            Some(Named {
                host: "10.0.0.2".into(),
                port: 6380,
                epoch: 7
            })
        );
        assert_eq!(named(&ok, "other"), None);
        for flags in [
            "master,s_down",
            "master,o_down",
            "master,disconnected",
            "slave",
        ] {
            let mut r = ok.clone();
            r.insert("flags".into(), flags.into());
            assert_eq!(named(&r, "m"), None, "{flags}");
        }
        let mut r = ok.clone();
        r.remove("config-epoch");
        assert_eq!(named(&r, "m").map(|n| n.epoch), Some(0));
    }

    #[test]
    fn the_highest_epoch_wins_whoever_answered_first() {
        let at = |port, epoch| Named {
            host: "127.0.0.1".into(),
            port,
            epoch,
        };
        // A stale sentinel first, three current ones after it.
        let answers = [at(1, 0), at(2, 1), at(2, 1), at(2, 1)];
        assert_eq!(ranked(&answers)[0], at(2, 1));
        // In any order.
        let answers = [at(2, 1), at(1, 0)];
        assert_eq!(ranked(&answers)[0], at(2, 1));
        // On equal epochs, the one more sentinels name.
        let answers = [at(1, 3), at(2, 3), at(2, 3)];
        assert_eq!(ranked(&answers)[0], at(2, 3));
        assert_eq!(ranked(&answers).len(), 2);
        assert!(ranked(&[]).is_empty());
    }

    #[test]
    fn the_primary_is_reached_with_the_first_urls_details() {
        let tls = "rediss://user:secret@10.0.0.1:26379/3".into_connection_info();
        let info = node_info(&tls.unwrap(), "10.0.0.9", 6380);
        assert!(matches!(
            info.addr(),
            ConnectionAddr::TcpTls { host, port: 6380, insecure: false, .. } if host == "10.0.0.9"
        ));
        assert_eq!(info.redis_settings().db(), 3);
        assert_eq!(info.redis_settings().password(), Some("secret"));
        let plain = "redis://10.0.0.1:26379".into_connection_info().unwrap();
        assert!(matches!(
            node_info(&plain, "10.0.0.9", 6380).addr(),
            ConnectionAddr::Tcp(h, 6380) if h == "10.0.0.9"
        ));
    }

    #[test]
    fn role_replies_are_read() {
        use ::redis::Value;
        let master = Value::Array(vec![Value::BulkString(b"master".to_vec()), Value::Int(0)]);
        assert!(says_primary(&master));
        let replica = Value::Array(vec![Value::BulkString(b"slave".to_vec())]);
        assert!(!says_primary(&replica));
        assert!(!says_primary(&Value::Nil));
    }

    use ::redis::IntoConnectionInfo;
}
