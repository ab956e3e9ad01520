//! The floor under anteroom's admitted path: a Pingora proxy that does nothing but forward, built
//! with the same release profile, allocator and server settings. `bench/throughput` runs it
//! beside nginx and anteroom, so the gap between anteroom and nginx splits into what Pingora
//! costs and what anteroom adds.
//!
//!     bare_proxy LISTEN UPSTREAM THREADS WORK_STEALING [timeouts] [write-buffer=BYTES]
//!
//! With `timeouts` it sets the same per-request client and upstream timeouts anteroom sets;
//! with `write-buffer` its listener writes through a buffer of that size, as anteroom's does
//! (4096; Pingora's default is 1460).

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;
use pingora::listeners::{L4BufferSettings, ListenerConfig};
use pingora::prelude::*;
use pingora::server::configuration::ServerConf;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Bare {
    upstream: SocketAddr,
    timeouts: bool,
}

#[async_trait]
impl ProxyHttp for Bare {
    type CTX = ();
    fn new_ctx(&self) {}

    async fn early_request_filter(&self, session: &mut Session, _ctx: &mut ()) -> Result<()> {
        if self.timeouts {
            session.set_keepalive(Some(60));
            session.set_read_timeout(Some(Duration::from_secs(60)));
            session.set_write_timeout(Some(Duration::from_secs(60)));
        }
        Ok(())
    }

    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> Result<Box<HttpPeer>> {
        let mut peer = HttpPeer::new(self.upstream, false, String::new());
        if self.timeouts {
            peer.options.connection_timeout = Some(Duration::from_secs(5));
            peer.options.total_connection_timeout = Some(Duration::from_secs(5));
            peer.options.read_timeout = Some(Duration::from_secs(30));
            peer.options.write_timeout = Some(Duration::from_secs(30));
        }
        Ok(Box::new(peer))
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let parsed = (
        args.get(1).map(|s| s.as_str()),
        args.get(2).and_then(|s| s.parse::<SocketAddr>().ok()),
        args.get(3).and_then(|s| s.parse::<usize>().ok()),
        args.get(4).and_then(|s| s.parse::<bool>().ok()),
    );
    let (Some(listen), Some(upstream), Some(threads), Some(work_stealing)) = parsed else {
        eprintln!(
            "usage: bare_proxy LISTEN UPSTREAM THREADS WORK_STEALING [timeouts] [write-buffer=BYTES]"
        );
        std::process::exit(2);
    };
    let timeouts = args.iter().skip(5).any(|s| s == "timeouts");
    let write_buffer = args
        .iter()
        .skip(5)
        .find_map(|s| s.strip_prefix("write-buffer=")?.parse::<usize>().ok());
    let conf = ServerConf {
        threads,
        work_stealing,
        // Pingora waits 5 minutes for connections to drain by default; a benchmark stops at once.
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let mut proxy = http_proxy_service(&server.configuration, Bare { upstream, timeouts });
    match write_buffer {
        None => proxy.add_tcp(listen),
        Some(bytes) => {
            proxy.add_listener(ListenerConfig::tcp(listen).l4_buffer(L4BufferSettings {
                read: None,
                write: Some(bytes),
            }))
        }
    }
    server.add_service(proxy);
    server.run_forever();
}
