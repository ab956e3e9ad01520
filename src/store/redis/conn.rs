//! The store's one connection: made on first use, and made again after calls in a row that
//! only time out; every script runs through [`RedisStore::run`], with the store's timeout.

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
                // A fifth of the call's timeout to connect to a node: while the client reads
                // the slots again it sends nothing to any node, and with a master frozen (no
                // replica to take its slots) it does so over and over, each time waiting on
                // that master. Waited for a whole timeout, every room's calls timed out with it
                // (found by re-review: the healthy masters' rooms opened their breakers some
                // seconds into the freeze); a fifth leaves them their answers.
                let connect = (*timeout / 5).max(Duration::from_millis(10));
                let client = ClusterClient::builder(urls.iter().map(String::as_str))
                    .retries(1)
                    .connection_timeout(connect)
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
            Conn::Single(mut c) => match inv.invoke_async(&mut c).await {
                // The client answers the first call after a reconnection that failed with that
                // failure, however long ago it was, and only then connects again: one more try
                // finds Redis if it is back (found by review r95a: after a restart, the
                // breaker's probe failed on the refusal of a connection tried while Redis was
                // down, and the instance stayed away another cooldown). Every script is safe to
                // run again; the store's timeout bounds both tries.
                Err(e) if e.is_connection_refusal() || e.is_connection_dropped() => {
                    inv.invoke_async(&mut c).await
                }
                answered => answered,
            },
            Conn::Cluster(mut c) => inv.invoke_async(&mut c).await,
            Conn::Sentinel(c) => c.invoke(inv).await,
        };
        self.note_timeouts(&cell, room, &result);
        result.map_err(|e| unavailable(op, room, e))
    }

    /// A connection whose calls for a room only time out is made again: the client reconnects
    /// after an I/O error, never after a timeout, so a connection a middlebox or a failed-over
    /// address swallowed stayed in use for good, the breaker open, while new connections would
    /// have worked (found by review). So is one Redis refused the password on: the client keeps
    /// the refusal and never asks again, so a password changed and changed back left the
    /// instance cut off until it restarted (found by review). The Sentinel connection asks the
    /// sentinels again by itself.
    ///
    /// Counted per room, and made beside the one in use, which serves every call until the new
    /// one is ready: on a Redis Cluster one connection serves every node, and the rooms of a
    /// frozen master time out while the others' calls are answered. Dropped at once, its
    /// successor waited on the frozen seed and every room's calls timed out with it (found by
    /// review: the healthy masters' rooms opened their breakers); never made again, a node's
    /// black-holed connection stayed in use for good, and a failover away from a frozen master
    /// was never seen (the client reads the slots again on `MOVED` or an I/O error only: found
    /// by re-review).
    fn note_timeouts<T>(
        &self,
        cell: &std::sync::Arc<OnceCell<Conn>>,
        room: &str,
        result: &Result<T, ::redis::RedisError>,
    ) {
        if matches!(self.target, Target::Sentinel { .. }) {
            return;
        }
        let refused = |e: &::redis::RedisError| {
            matches!(e.kind(), ::redis::ErrorKind::AuthenticationFailed)
                || e.code() == Some("NOAUTH")
                || e.code() == Some("WRONGPASS")
        };
        let mut timeouts = self.timeouts.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Err(e) if refused(e) => {
                timeouts.clear();
                drop(timeouts);
                self.remake(cell);
            }
            Err(e) if e.is_timeout() => {
                let n = timeouts.entry(room.to_string()).or_insert(0);
                *n += 1;
                if *n >= TIMEOUTS_TO_RECONNECT {
                    *n = 0;
                    drop(timeouts);
                    self.remake(cell);
                }
            }
            _ => {
                timeouts.remove(room);
            }
        }
    }

    /// Makes a new connection beside `cell`'s, in a task of its own, and puts it in `cell`'s
    /// place once it is ready (not in place of one made meanwhile); one at a time.
    fn remake(&self, cell: &std::sync::Arc<OnceCell<Conn>>) {
        use std::sync::atomic::Ordering;
        if self.remaking.swap(true, Ordering::AcqRel) {
            return;
        }
        let (conn, remaking, old) = (self.conn.clone(), self.remaking.clone(), cell.clone());
        let (target, timeout) = (self.target.clone(), self.timeout);
        tokio::spawn(async move {
            if let Ok(made) = Self::connect(target, timeout).await {
                let new = std::sync::Arc::new(OnceCell::new_with(Some(made)));
                conn.compare_and_swap(&old, new);
            }
            remaking.store(false, Ordering::Release);
        });
    }
}
