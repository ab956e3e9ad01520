//! The floor under anteroom's admitted path: a Pingora proxy that does nothing but forward, built
//! with the same release profile, allocator and server settings. `bench/throughput` runs it
//! beside nginx and anteroom, so the gap between anteroom and nginx splits into what Pingora
//! costs and what anteroom adds.
//!
//!     bare_proxy LISTEN UPSTREAM THREADS WORK_STEALING [timeouts]
//!
//! With `timeouts` it sets the same per-request client and upstream timeouts anteroom sets.

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;
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
        eprintln!("usage: bare_proxy LISTEN UPSTREAM THREADS WORK_STEALING [timeouts]");
        std::process::exit(2);
    };
    let timeouts = args.get(5).is_some_and(|s| s == "timeouts");
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
    proxy.add_tcp(listen);
    server.add_service(proxy);
    server.run_forever();
}
