//! Redis behind Sentinel: the primary is whichever node the sentinels name, and it changes
//! when they fail over.
//!
//! The store holds one multiplexed connection to the primary it was last told about. A call
//! that meets a sign that this node is no longer the primary — the connection broke or was
//! refused, the node answers `READONLY` (it was demoted to a replica), or the call was
//! abandoned mid-flight (the caller's store timeout fired, as it does against a frozen or
//! unreachable host) — forgets the connection; the next call asks the sentinels again
//! (`SENTINEL MASTER`, then `ROLE` on the node they name, as the Sentinel client
//! specification asks): all at once, and only a node a majority of the listed sentinels names
//! is used ([`lookup`]), so that neither a frozen sentinel nor a stale one decides. A call that
//! failed that way is sent once more on the new primary:
//! every script is safe to repeat, and a `READONLY` script wrote nothing.
//!
//! A primary can also be replaced while it still answers: `SENTINEL FAILOVER`, or a primary
//! cut off from the sentinels, keeps accepting writes until the sentinels convert it to a
//! replica (some seconds later), and whatever it accepted meanwhile is discarded. So at most
//! every [`VERIFY_EVERY`] a call also asks the sentinels, in the background, whom they name,
//! and moves to the new primary when a majority of them names another node.
//!
//! Lookups are serialised (one at a time, the rest wait for its answer), and a failed lookup
//! is not repeated for [`LOOKUP_BACKOFF`]: between the primary's death and the promotion the
//! sentinels have no primary to name, and every call asking them again would only load them.
//! Every call, lookups included, stays inside the caller's store timeout
//! ([`crate::app::Core::store_call`]).
//!
//! Scripts are loaded on the new primary by `EVALSHA` falling back on `NOSCRIPT`
//! ([`::redis::Script`]), since a promoted replica's script cache is its own.
//!
//! Credentials and TLS come from the sentinel URLs: `rediss://user:password@host:26379/2`
//! authenticates to the sentinels and to the primary with the same user and password, speaks
//! TLS to both, and selects database 2 on the primary (sentinels have no databases).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ::redis::aio::MultiplexedConnection;
use ::redis::{
    AsyncConnectionConfig, ConnectionInfo, ErrorKind, FromRedisValue, IntoConnectionInfo,
    RedisError, RedisResult, ScriptInvocation, ServerErrorKind,
};

mod lookup;
use lookup::{Named, Sentinel};

/// How long a failed lookup answers for the sentinels before they are asked again.
pub const LOOKUP_BACKOFF: Duration = Duration::from_millis(100);
/// How often the sentinels are asked whether the primary in use is still theirs.
pub const VERIFY_EVERY: Duration = Duration::from_secs(1);

/// A connection to the primary the sentinels name, re-found after a failover.
pub struct SentinelConn {
    master: String,
    timeout: Duration,
    lookup: tokio::sync::Mutex<Lookup>,
    /// The primary in use; `None` until the first lookup and after a sign of failover. A std
    /// mutex: it is held only to clone or replace the handle, never across an await.
    primary: Mutex<Option<Primary>>,
}

struct Lookup {
    sentinels: Vec<Sentinel>,
    /// The first sentinel URL's details (credentials, database, TLS): the primary's.
    node: ConnectionInfo,
    /// Counts primaries found, so that a failure forgets only the connection it was seen on.
    generation: u64,
    /// When the last lookup failed and why.
    failed: Option<(Instant, String)>,
}

#[derive(Clone)]
struct Primary {
    generation: u64,
    conn: MultiplexedConnection,
    /// `host:port`, to compare with what the sentinels name.
    addr: String,
    /// When the sentinels were last asked about it.
    verified: Instant,
}

/// Whether a failed call says the node it went to is no longer the primary to use: a broken,
/// refused or timed-out connection, or `READONLY` (which redis-rs reports as its own kind also
/// when a script's write was refused on a replica). Public for the test that shows what real
/// Redis answers.
pub fn no_longer_primary(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
        || e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_unrecoverable_error()
}

/// Forgets the primary when the call it guards is dropped before it finished.
struct InFlight<'a> {
    conn: &'a SentinelConn,
    generation: u64,
    finished: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.finished && self.conn.forget(self.generation) {
            tracing::warn!(
                master = %self.conn.master,
                "a call to the Redis primary was abandoned (the store timeout, or a reload); asking the sentinels again"
            );
        }
    }
}

/// The sentinels' addresses (database 0, whatever the URL says) and what the primary is
/// connected with (the first URL's credentials, database and TLS).
fn parse(urls: &[String]) -> RedisResult<(Vec<ConnectionInfo>, ConnectionInfo)> {
    let infos: Vec<ConnectionInfo> = urls
        .iter()
        .map(|u| u.as_str().into_connection_info())
        .collect::<RedisResult<_>>()?;
    let Some(node) = infos.first().cloned() else {
        return Err(RedisError::from((
            ErrorKind::InvalidClientConfig,
            "no sentinel address",
        )));
    };
    let sentinels = infos
        .into_iter()
        .map(|i| {
            let settings = i.redis_settings().clone().set_db(0);
            i.set_redis_settings(settings)
        })
        .collect();
    Ok((sentinels, node))
}

impl SentinelConn {
    /// Checks the URLs; asks the sentinels on first use.
    pub fn new(urls: &[String], master: &str, timeout: Duration) -> RedisResult<Self> {
        let (sentinels, node) = parse(urls)?;
        Ok(Self {
            master: master.to_string(),
            timeout,
            lookup: tokio::sync::Mutex::new(Lookup {
                sentinels: sentinels.into_iter().map(Sentinel::new).collect(),
                node,
                generation: 0,
                failed: None,
            }),
            primary: Mutex::new(None),
        })
    }

    /// Runs one script on the primary, finding it again (once) if the node has stopped being it.
    pub async fn invoke<T: FromRedisValue>(
        self: &Arc<Self>,
        inv: &ScriptInvocation<'_>,
    ) -> RedisResult<T> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut primary = self.primary().await?;
            self.verify_if_due();
            let mut guard = InFlight {
                conn: self,
                generation: primary.generation,
                finished: false,
            };
            let result = inv.invoke_async(&mut primary.conn).await;
            guard.finished = true;
            match result {
                Err(e) if no_longer_primary(&e) => {
                    // Logged once per primary, not once per call that saw it fail.
                    if self.forget(primary.generation) {
                        tracing::warn!(
                            master = %self.master,
                            error = %e,
                            "the Redis primary failed; asking the sentinels again"
                        );
                    }
                    if attempt >= 2 {
                        return Err(e);
                    }
                }
                other => return other,
            }
        }
    }

    /// The primary in use, or the one the sentinels name now.
    async fn primary(&self) -> RedisResult<Primary> {
        if let Some(p) = self.current() {
            return Ok(p);
        }
        let mut lookup = self.lookup.lock().await;
        // Whoever held the lock before may have found it already.
        if let Some(p) = self.current() {
            return Ok(p);
        }
        if let Some((at, why)) = &lookup.failed {
            if at.elapsed() < LOOKUP_BACKOFF {
                return Err(RedisError::from((
                    ErrorKind::MasterNameNotFoundBySentinel,
                    "no primary from the sentinels (asked again shortly)",
                    why.clone(),
                )));
            }
        }
        let (named, failed) = self.ask(&mut lookup).await;
        let listed = lookup.sentinels.len();
        // Only the node a majority names; none other is tried when it fails (re-review: a node
        // a stale sentinel alone named was taken when the majority's failed).
        let found = match lookup::agreed(&named, listed) {
            Some(n) => self.open(&mut lookup, &n).await,
            // Told with the tally (re-review: the last connection error alone hid that a
            // sentinel did name a primary, and why it was not used).
            None => {
                let names: Vec<String> = named.iter().map(Named::addr).collect();
                Err(RedisError::from((
                    ErrorKind::MasterNameNotFoundBySentinel,
                    "no primary that a majority of the listed sentinels names",
                    format!(
                        "{} of {listed} named one they do not see down or cut off{} ({} needed){}",
                        named.len(),
                        if names.is_empty() {
                            String::new()
                        } else {
                            format!(": {}", names.join(", "))
                        },
                        lookup::majority(listed),
                        failed
                            .map(|e| format!("; a sentinel failed: {e}"))
                            .unwrap_or_default()
                    ),
                )))
            }
        };
        if let Err(e) = &found {
            lookup.failed = Some((Instant::now(), e.to_string()));
        }
        found
    }

    /// Every sentinel's answer, within half the store's timeout (the rest is the call's).
    async fn ask(&self, lookup: &mut Lookup) -> (Vec<Named>, Option<RedisError>) {
        lookup::ask_all(
            &mut lookup.sentinels,
            &self.master,
            self.timeout,
            self.timeout / 2,
        )
        .await
    }

    /// Connects to the node `named`, checks that it says it is the primary (`ROLE`) and makes
    /// it the primary in use.
    async fn open(&self, lookup: &mut Lookup, named: &Named) -> RedisResult<Primary> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        let info = lookup::node_info(&lookup.node, &named.host, named.port);
        let mut conn = ::redis::Client::open(info)?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let role: ::redis::Value = ::redis::cmd("ROLE").query_async(&mut conn).await?;
        if !lookup::says_primary(&role) {
            return Err(RedisError::from((
                ErrorKind::MasterNameNotFoundBySentinel,
                "the node the sentinels name does not say it is the primary",
                named.addr(),
            )));
        }
        let addr = named.addr();
        tracing::info!(
            master = %self.master,
            primary = %addr,
            "connected to the Redis primary the sentinels name"
        );
        lookup.generation += 1;
        lookup.failed = None;
        let p = Primary {
            generation: lookup.generation,
            conn,
            addr,
            verified: Instant::now(),
        };
        *self.slot() = Some(p.clone());
        Ok(p)
    }

    /// Starts a background check of the primary in use when the last one is [`VERIFY_EVERY`]
    /// old; the call that starts it does not wait for it.
    fn verify_if_due(self: &Arc<Self>) {
        {
            let mut slot = self.slot();
            let Some(p) = slot.as_mut() else { return };
            if p.verified.elapsed() < VERIFY_EVERY {
                return;
            }
            p.verified = Instant::now();
        }
        let this = self.clone();
        tokio::spawn(async move {
            // Bounded like a call: a sentinel that does not answer is asked again next time.
            let _ = tokio::time::timeout(this.timeout * 4, this.verify()).await;
        });
    }

    /// Moves to the node the sentinels name if it is not the one in use.
    async fn verify(&self) {
        // A lookup under way answers the question already.
        let Ok(mut lookup) = self.lookup.try_lock() else {
            return;
        };
        let Some(current) = self.current() else {
            return;
        };
        let (named, _) = self.ask(&mut lookup).await;
        let Some(best) = lookup::agreed(&named, lookup.sentinels.len()) else {
            return;
        };
        if best.addr() == current.addr {
            return;
        }
        tracing::warn!(
            master = %self.master,
            old = %current.addr,
            new = %best.addr(),
            epoch = best.epoch,
            "the sentinels name another Redis primary; moving to it"
        );
        if self.open(&mut lookup, &best).await.is_err() {
            self.forget(current.generation);
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Primary>> {
        self.primary.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn current(&self) -> Option<Primary> {
        self.slot().clone()
    }

    /// Drops the connection of `generation`, unless a newer one has replaced it already;
    /// `true` if it did.
    fn forget(&self, generation: u64) -> bool {
        let mut slot = self.slot();
        let current = slot.as_ref().is_some_and(|p| p.generation == generation);
        if current {
            *slot = None;
        }
        current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_gives_the_primary_its_credentials_database_and_tls() {
        let urls = vec![
            "rediss://user:secret@127.0.0.1:26379/3".to_string(),
            "rediss://user:secret@127.0.0.1:26380/3".to_string(),
        ];
        let (sentinels, node) = parse(&urls).unwrap();
        assert_eq!(sentinels.len(), 2);
        for s in &sentinels {
            assert_eq!(s.redis_settings().db(), 0, "sentinels have no databases");
            assert_eq!(s.redis_settings().password(), Some("secret"));
        }
        assert!(matches!(
            node.addr(),
            ::redis::ConnectionAddr::TcpTls {
                insecure: false,
                ..
            }
        ));
        assert_eq!(node.redis_settings().db(), 3);
        assert_eq!(node.redis_settings().password(), Some("secret"));
    }

    #[test]
    fn plain_urls_stay_plain() {
        let (_, node) = parse(&["redis://127.0.0.1:26379".to_string()]).unwrap();
        assert!(matches!(node.addr(), ::redis::ConnectionAddr::Tcp(..)));
    }

    #[test]
    fn failover_signs_are_told_from_script_errors() {
        let readonly = RedisError::from((
            ErrorKind::Server(ServerErrorKind::ReadOnly),
            "You can't write against a read only replica.",
        ));
        assert!(no_longer_primary(&readonly));
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(no_longer_primary(&io));
        let script = RedisError::from((
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "ERR user_script:1: bad argument",
        ));
        assert!(!no_longer_primary(&script));
    }
}
