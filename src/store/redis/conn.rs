//! The store's one connection: made on first use, and made again after calls in a row that
//! only time out; every script runs through [`RedisStore::run`], with the store's timeout.

use std::sync::atomic::Ordering;
use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::cluster::ClusterClient;
use ::redis::cluster_async::ClusterConnection;
use ::redis::{FromRedisValue, ScriptInvocation};
use tokio::sync::OnceCell;

use super::super::sentinel::SentinelConn;
use super::{unavailable, RedisStore, Target};
use crate::store::StoreError;

#[derive(Clone)]
pub(super) enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(std::sync::Arc<SentinelConn>),
}

/// Calls in a row that time out before the connection is made again.
const TIMEOUTS_TO_RECONNECT: u32 = 3;

impl RedisStore {
    /// A connection to `target`, each step bounded by `timeout`.
    async fn connect(target: Target, timeout: Duration) -> Result<Conn, ::redis::RedisError> {
        let timeout = &timeout;
        match &target {
            Target::Single(url) => {
                let client = ::redis::Client::open(url.as_str())?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(*timeout))
                    .set_response_timeout(Some(*timeout))
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_millis(200));
                Ok(Conn::Single(ConnectionManager::new_lazy_with_config(
                    client, config,
                )?))
            }
            Target::Cluster(urls) => {
                let client = ClusterClient::builder(urls.iter().map(String::as_str))
                    .retries(1)
                    .connection_timeout(*timeout)
                    .response_timeout(*timeout)
                    .build()?;
                Ok(Conn::Cluster(client.get_async_connection().await?))
            }
            Target::Sentinel { sentinels, master } => Ok(Conn::Sentinel(std::sync::Arc::new(
                SentinelConn::new(sentinels, master, *timeout)?,
            ))),
        }
    }

    /// Runs one script invocation.
    pub(super) async fn run<T: FromRedisValue>(
        &self,
        op: &'static str,
        room: &str,
        inv: &ScriptInvocation<'_>,
    ) -> Result<T, StoreError> {
        let cell = self.conn.load_full();
        let conn = match cell.get() {
            Some(conn) => conn.clone(),
            // Made in a task of its own, which the call's timeout does not cut short: a Redis
            // Cluster client waits for every seed before it reads the slots, and a frozen one
            // cost the whole timeout, so every connection was given up just before it was made
            // and the room stayed on its store-error policy for as long as the seed stayed
            // frozen, the cluster failed over or not (found by review). The next call finds it.
            None => {
                let (made, target, timeout) = (cell.clone(), self.target.clone(), self.timeout);
                let connect = tokio::spawn(async move {
                    made.get_or_try_init(|| Self::connect(target, timeout))
                        .await
                        .cloned()
                });
                match connect.await {
                    Ok(made) => made.map_err(|e| unavailable(op, room, e))?,
                    Err(e) => {
                        return Err(unavailable(
                            op,
                            room,
                            ::redis::RedisError::from((
                                ::redis::ErrorKind::Io,
                                "the connection task ended",
                                e.to_string(),
                            )),
                        ))
                    }
                }
            }
        };
        let result = match conn.clone() {
            Conn::Single(mut c) => inv.invoke_async(&mut c).await,
            Conn::Cluster(mut c) => inv.invoke_async(&mut c).await,
            Conn::Sentinel(c) => c.invoke(inv).await,
        };
        self.note_timeouts(&cell, &result);
        result.map_err(|e| unavailable(op, room, e))
    }

    /// A connection whose calls only time out is dropped: the client reconnects after an I/O
    /// error, never after a timeout, so a connection a middlebox or a failed-over address
    /// swallowed stayed in use for good, the breaker open, while new connections would have
    /// worked (found by review). So is one Redis refused the password on: the client keeps the
    /// refusal and never asks again, so a password changed and changed back left the instance
    /// cut off until it restarted (found by review). The Sentinel connection asks the sentinels
    /// again by itself. Timeouts make it again only while no call at all has had an answer for
    /// three timeouts: on a Redis Cluster the connection serves every node, and the rooms of a
    /// frozen master time out together while the others' calls are answered — made again, the
    /// new connection waited on the frozen seed, and every room's calls timed out with it
    /// (found by review: the healthy masters' rooms opened their breakers too).
    fn note_timeouts<T>(
        &self,
        cell: &std::sync::Arc<OnceCell<Conn>>,
        result: &Result<T, ::redis::RedisError>,
    ) {
        let sentinel = matches!(self.target, Target::Sentinel { .. });
        let refused = |e: &::redis::RedisError| {
            matches!(e.kind(), ::redis::ErrorKind::AuthenticationFailed)
                || e.code() == Some("NOAUTH")
                || e.code() == Some("WRONGPASS")
        };
        match result {
            Err(e) if refused(e) && !sentinel => self.replace(cell),
            Err(e) if e.is_timeout() => {
                let n = self.timeouts.fetch_add(1, Ordering::Relaxed) + 1;
                let silent = self
                    .elapsed_us()
                    .saturating_sub(self.answered_at.load(Ordering::Relaxed));
                let quiet = crate::clock::micros(self.timeout) * u64::from(TIMEOUTS_TO_RECONNECT);
                if n >= TIMEOUTS_TO_RECONNECT && silent >= quiet && !sentinel {
                    self.replace(cell);
                }
            }
            _ => {
                self.timeouts.store(0, Ordering::Relaxed);
                self.answered_at.store(self.elapsed_us(), Ordering::Relaxed);
            }
        }
    }

    /// Time since this store was made (µs).
    fn elapsed_us(&self) -> u64 {
        u64::try_from(self.born.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// The next call makes a new connection. Only in place of the one that failed: a call that
    /// replaced it already leaves the new one alone.
    fn replace(&self, cell: &std::sync::Arc<OnceCell<Conn>>) {
        self.timeouts.store(0, Ordering::Relaxed);
        self.conn
            .compare_and_swap(cell, std::sync::Arc::new(OnceCell::new()));
    }
}
