//! Faults between a store and its Redis, injected on the wire: forwarders that swallow what
//! a connection sends, hold replies back, answer some calls with an error, or hold requests.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A TCP forwarder in front of a Redis on `port`, for faults between a store and its Redis:
/// connections numbered below `swallow_below` lose what they are sent (calls that only time
/// out), and every reply but a connection's first (its hand-shake) is held back by `delay_ms`
/// (calls that run in Redis, their answers late). With a `mark` ([`Front::start_marking`]),
/// the replies to requests that contain it are held back by `marked_delay_ms` from when they
/// come, the others only as long as the order of replies needs (one connection answers in
/// order). On a thread of its own, so that a test that blocks a worker cannot stall it; it
/// stops with the process.
pub struct Front {
    pub addr: std::net::SocketAddr,
    pub connections: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub swallow_below: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub delay_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub marked_delay_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// With [`Front::start_failing`]: while set, requests that contain the mark are answered
    /// with an error by the front (`marked_delay_ms` after they came) and never reach Redis.
    pub fail_marked: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// The length of the one RESP value (a request or a reply) at the start of `b`, once it is
/// all there; an inline command or an unknown type counts to the end of its line.
fn resp_len(b: &[u8]) -> Option<usize> {
    let eol = b.windows(2).position(|w| w == b"\r\n")?;
    let head = || -> Option<i64> { std::str::from_utf8(&b[1..eol]).ok()?.parse().ok() };
    match b.first()? {
        b'$' | b'!' | b'=' => match head()? {
            n if n < 0 => Some(eol + 2),
            n => {
                let total = eol + 2 + n as usize + 2;
                (b.len() >= total).then_some(total)
            }
        },
        t @ (b'*' | b'~' | b'>' | b'%' | b'|') => match head()? {
            n if n < 0 => Some(eol + 2),
            n => {
                let count = if matches!(t, b'%' | b'|') { 2 * n } else { n };
                let mut at = eol + 2;
                for _ in 0..count {
                    at += resp_len(&b[at..])?;
                }
                Some(at)
            }
        },
        _ => Some(eol + 2),
    }
}

impl Front {
    pub fn start(port: u16) -> Self {
        Self::start_marking(port, b"")
    }

    /// [`Front::start`], holding back the replies to requests that contain `mark` by
    /// `marked_delay_ms` (e.g. `}:configs`, a key only the admit call names).
    pub fn start_marking(port: u16, mark: &'static [u8]) -> Self {
        Self::start_with(port, mark, None)
    }

    /// [`Front::start`], answering the requests that contain `mark` with an error, without
    /// sending them on, while `fail_marked` is set (e.g. `}:joins:`, a key only the join call
    /// names: a visitor's polls fail, and never run, while the admission steps go on).
    pub fn start_failing(port: u16, mark: &'static [u8]) -> Self {
        Self::start_with(port, mark, Some(b""))
    }

    /// [`Front::start_failing`], and while `fail_marked` is set the replies to requests that
    /// contain `late` are held back by `marked_delay_ms` too (calls that run, their answers
    /// late: e.g. `}:configs`, the admit call's).
    pub fn start_failing_and_late(port: u16, mark: &'static [u8], late: &'static [u8]) -> Self {
        Self::start_with(port, mark, Some(late))
    }

    fn start_with(port: u16, mark: &'static [u8], failing: Option<&'static [u8]>) -> Self {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::sync::Arc;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let front = Front {
            addr: listener.local_addr().unwrap(),
            connections: Arc::new(AtomicU64::new(0)),
            swallow_below: Arc::new(AtomicU64::new(0)),
            delay_ms: Arc::new(AtomicU64::new(0)),
            marked_delay_ms: Arc::new(AtomicU64::new(0)),
            fail_marked: Arc::new(AtomicBool::new(false)),
        };
        let fail = front.fail_marked.clone();
        let (n, cut, delay, marked) = (
            front.connections.clone(),
            front.swallow_below.clone(),
            front.delay_ms.clone(),
            front.marked_delay_ms.clone(),
        );
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                while let Ok((mut client, _)) = listener.accept().await {
                    let id = n.fetch_add(1, Ordering::SeqCst);
                    let (cut, delay, marked) = (cut.clone(), delay.clone(), marked.clone());
                    if let Some(late) = failing {
                        let on = (fail.clone(), marked.clone());
                        tokio::spawn(Self::forward_failing(client, port, (mark, late), on));
                        continue;
                    }
                    if !mark.is_empty() {
                        tokio::spawn(Self::forward_marking(client, port, mark, marked));
                        continue;
                    }
                    tokio::spawn(async move {
                        let Ok(mut redis) =
                            tokio::net::TcpStream::connect(("127.0.0.1", port)).await
                        else {
                            return;
                        };
                        let (mut cr, mut cw) = client.split();
                        let (mut rr, mut rw) = redis.split();
                        let up = async {
                            let mut buf = [0u8; 4096];
                            while let Ok(k) = cr.read(&mut buf).await {
                                if k == 0 {
                                    break;
                                }
                                if id >= cut.load(Ordering::SeqCst)
                                    && rw.write_all(&buf[..k]).await.is_err()
                                {
                                    break;
                                }
                            }
                        };
                        let down = async {
                            let mut buf = [0u8; 4096];
                            let mut first = true;
                            while let Ok(k) = rr.read(&mut buf).await {
                                if k == 0 {
                                    break;
                                }
                                let ms = delay.load(Ordering::SeqCst);
                                if !first && ms > 0 {
                                    tokio::time::sleep(Duration::from_millis(ms)).await;
                                }
                                first = false;
                                if cw.write_all(&buf[..k]).await.is_err() {
                                    break;
                                }
                            }
                        };
                        tokio::select! { _ = up => {}, _ = down => {} }
                    });
                }
            });
        });
        front
    }

    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// One connection through a failing front: requests are read one by one; a marked one
    /// (while `on.0`) is answered with an error in its turn among the replies, `on.1` ms after
    /// it came (a call lost on the way that times out, when longer than the store's timeout),
    /// the others are sent on and answered by Redis.
    async fn forward_failing(
        mut client: tokio::net::TcpStream,
        port: u16,
        (mark, late): (&'static [u8], &'static [u8]),
        on: (
            std::sync::Arc<std::sync::atomic::AtomicBool>,
            std::sync::Arc<std::sync::atomic::AtomicU64>,
        ),
    ) {
        use std::sync::atomic::Ordering;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let Ok(mut redis) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
            return;
        };
        let (mut cr, mut cw) = client.split();
        let (mut rr, mut rw) = redis.split();
        // Per request, in order: whether the front answers with an error, and not before when.
        let (slots, mut slot_of) =
            tokio::sync::mpsc::unbounded_channel::<(bool, tokio::time::Instant)>();
        let up = async {
            let (mut buf, mut pending) = ([0u8; 4096], Vec::new());
            while let Ok(k @ 1..) = cr.read(&mut buf).await {
                pending.extend_from_slice(&buf[..k]);
                while let Some(len) = resp_len(&pending) {
                    let request: Vec<u8> = pending.drain(..len).collect();
                    let has = |m: &[u8]| !m.is_empty() && request.windows(m.len()).any(|w| w == m);
                    let faulty = on.0.load(Ordering::SeqCst);
                    let fail = faulty && has(mark);
                    if !fail && rw.write_all(&request).await.is_err() {
                        return;
                    }
                    let now = tokio::time::Instant::now();
                    let hold = Duration::from_millis(on.1.load(Ordering::SeqCst));
                    let at = if fail || (faulty && has(late)) {
                        now + hold
                    } else {
                        now
                    };
                    let _ = slots.send((fail, at));
                }
            }
        };
        let down = async {
            let (mut buf, mut pending) = ([0u8; 4096], Vec::new());
            while let Some((fail, at)) = slot_of.recv().await {
                tokio::time::sleep_until(at).await;
                let reply: Vec<u8> = if fail {
                    b"-ERR injected fault\r\n".to_vec()
                } else {
                    loop {
                        if let Some(len) = resp_len(&pending) {
                            break pending.drain(..len).collect();
                        }
                        match rr.read(&mut buf).await {
                            Ok(k @ 1..) => pending.extend_from_slice(&buf[..k]),
                            _ => return,
                        }
                    }
                };
                if cw.write_all(&reply).await.is_err() {
                    return;
                }
            }
        };
        tokio::select! { _ = up => {}, _ = down => {} }
    }

    /// One connection through a marking front: requests are read one by one for the mark,
    /// replies one by one, each released when its hold ends but never before the one before.
    async fn forward_marking(
        mut client: tokio::net::TcpStream,
        port: u16,
        mark: &'static [u8],
        marked_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
    ) {
        use std::sync::atomic::Ordering;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        use tokio::sync::mpsc::unbounded_channel;
        let Ok(mut redis) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
            return;
        };
        let (mut cr, mut cw) = client.split();
        let (mut rr, mut rw) = redis.split();
        let (flags, mut flag_of) = unbounded_channel::<bool>();
        let (out, mut to_write) = unbounded_channel::<(Vec<u8>, tokio::time::Instant)>();
        let up = async {
            let (mut buf, mut pending) = ([0u8; 4096], Vec::new());
            while let Ok(k) = cr.read(&mut buf).await {
                if k == 0 || rw.write_all(&buf[..k]).await.is_err() {
                    break;
                }
                pending.extend_from_slice(&buf[..k]);
                while let Some(len) = resp_len(&pending) {
                    let hit = pending[..len].windows(mark.len()).any(|w| w == mark);
                    let _ = flags.send(hit);
                    pending.drain(..len);
                }
            }
        };
        let down = async {
            let (mut buf, mut pending) = ([0u8; 4096], Vec::new());
            let mut last = tokio::time::Instant::now();
            while let Ok(k) = rr.read(&mut buf).await {
                if k == 0 {
                    break;
                }
                pending.extend_from_slice(&buf[..k]);
                while let Some(len) = resp_len(&pending) {
                    let hold = match flag_of.recv().await {
                        Some(true) => Duration::from_millis(marked_ms.load(Ordering::SeqCst)),
                        _ => Duration::ZERO,
                    };
                    last = last.max(tokio::time::Instant::now() + hold);
                    let _ = out.send((pending.drain(..len).collect(), last));
                }
            }
        };
        let write = async {
            while let Some((reply, at)) = to_write.recv().await {
                tokio::time::sleep_until(at).await;
                if cw.write_all(&reply).await.is_err() {
                    break;
                }
            }
        };
        tokio::select! { _ = up => {}, _ = down => {}, _ = write => {} }
    }
}

/// A TCP forwarder in front of a Redis on `port` that holds back by `delay` every request
/// containing one of `marks` (and, in order, what follows it on that connection): a call that
/// reaches Redis late while its caller waits for the answer. On threads of its own; it stops
/// with the process.
pub struct SlowRequests {
    pub addr: std::net::SocketAddr,
    /// The hold, ms: [`SlowRequests::set_delay`] changes it for the requests to come.
    delay_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl SlowRequests {
    pub fn start(port: u16, marks: &'static [&'static [u8]], delay: Duration) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let delay_ms =
            std::sync::Arc::new(std::sync::atomic::AtomicU64::new(delay.as_millis() as u64));
        let hold = delay_ms.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(redis) = TcpStream::connect(("127.0.0.1", port)) else {
                    continue;
                };
                let (mut from_client, mut to_redis) =
                    (client.try_clone().unwrap(), redis.try_clone().unwrap());
                let (mut from_redis, mut to_client) = (redis, client);
                let hold = hold.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = from_client.read(&mut buf) {
                        let marked = marks
                            .iter()
                            .any(|m| buf[..n].windows(m.len()).any(|w| w == *m));
                        let delay = hold.load(std::sync::atomic::Ordering::SeqCst);
                        if marked && delay > 0 {
                            // The fault injected: the request arrives late.
                            std::thread::sleep(Duration::from_millis(delay));
                        }
                        if to_redis.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from_redis, &mut to_client);
                });
            }
        });
        Self { addr, delay_ms }
    }

    /// Holds the marked requests to come by `delay` (zero: none).
    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms.store(
            delay.as_millis() as u64,
            std::sync::atomic::Ordering::SeqCst,
        );
    }
}
