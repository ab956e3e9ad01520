//! Asking the sentinels whom they name as the primary, and choosing among their answers.
//!
//! Every sentinel is asked at once (`SENTINEL MASTER name`), each on a connection of its own
//! kept between lookups, and the answers are collected until a majority of the listed
//! sentinels names one node, or every one has answered, or the window is up. Only a node a
//! majority names is used: Sentinel's own rule for a failover, so that a sentinel that lags or
//! is cut off with an old primary, or one frozen, decides nothing. Without such a majority
//! there is no primary, and the store's `on-store-error` policy applies.
//!
//! Found by review, three times: asked through redis-rs's lookup, whose answers are taken in
//! the list's order, a frozen first sentinel held every lookup until the store's timeout;
//! taking the fastest answer, a stale sentinel moved every instance between the old and the
//! new primary every second; and choosing by epoch among the first answers, a stale sentinel
//! at the same epoch won half the lookups, and one naming an old primary alone was taken when
//! the others named none.

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

/// How many of `listed` sentinels make a majority.
pub(super) fn majority(listed: usize) -> usize {
    listed / 2 + 1
}

/// The node a majority of the `listed` sentinels names, if one does (at the highest epoch any
/// of them gave it).
pub(super) fn agreed(answers: &[Named], listed: usize) -> Option<Named> {
    let mut counted: Vec<(Named, usize)> = Vec::new();
    for a in answers {
        match counted
            .iter_mut()
            .find(|(b, _)| b.host == a.host && b.port == a.port)
        {
            Some((b, n)) => {
                b.epoch = b.epoch.max(a.epoch);
                *n += 1;
            }
            None => counted.push((a.clone(), 1)),
        }
    }
    counted
        .into_iter()
        .find(|(_, n)| *n >= majority(listed))
        .map(|(b, _)| b)
}

/// Asks every sentinel at once; what they named once a majority agrees on one node, or every
/// one has answered, or `window` is up (a frozen sentinel then costs the window at most), and
/// the last error met (for a lookup that found no primary).
pub(super) async fn ask_all(
    sentinels: &mut [Sentinel],
    master: &str,
    timeout: Duration,
    window: Duration,
) -> (Vec<Named>, Option<::redis::RedisError>) {
    use futures_util::stream::{FuturesUnordered, StreamExt};
    let listed = sentinels.len();
    let mut asks: FuturesUnordered<_> = sentinels
        .iter_mut()
        .map(|s| s.ask(master, timeout))
        .collect();
    let deadline = tokio::time::Instant::now() + window;
    let (mut named, mut failed) = (Vec::new(), None);
    while agreed(&named, listed).is_none() {
        tokio::select! {
            next = asks.next() => match next {
                None => break,
                Some(Ok(n)) => named.extend(n),
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
    fn only_a_node_a_majority_of_the_listed_sentinels_names_is_used() {
        let at = |port, epoch| Named {
            host: "127.0.0.1".into(),
            port,
            epoch,
        };
        // A stale sentinel beside two current ones, whichever answered first.
        assert_eq!(agreed(&[at(1, 0), at(2, 0), at(2, 0)], 3), Some(at(2, 0)));
        assert_eq!(agreed(&[at(2, 0), at(1, 0), at(2, 0)], 3), Some(at(2, 0)));
        // The first two answers disagree: no choice yet (the third decides).
        assert_eq!(agreed(&[at(1, 0), at(2, 0)], 3), None);
        // The stale one alone (the others name nothing: their primary is down): none, even at
        // a higher epoch.
        assert_eq!(agreed(&[at(1, 5)], 3), None);
        // Four listed: three must agree.
        assert_eq!(agreed(&[at(2, 1), at(2, 1), at(1, 0)], 4), None);
        assert_eq!(
            agreed(&[at(2, 1), at(2, 1), at(2, 1), at(1, 0)], 4),
            Some(at(2, 1))
        );
        // One listed: its answer.
        assert_eq!(agreed(&[at(7, 0)], 1), Some(at(7, 0)));
        assert_eq!(agreed(&[], 3), None);
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
