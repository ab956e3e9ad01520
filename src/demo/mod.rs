//! `anteroom demo`: a waiting room in front of a built-in legacy shop, one command, no Redis.
//!
//! Starts the demo shop on a loopback port, the proxy with the memory store in front of it (the
//! built-in `conf/demo.toml`), and optionally a crowd of simulated visitors who join the line
//! ahead of you, so the queue is visible from the first click.

mod crowd;
pub mod shop;

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;

use pingora::services::background::background_service;
use pingora::services::listening::Service;

use crate::config;
use crate::server;

/// The demo's configuration, compiled in so the demo runs from any directory.
pub const DEMO_TOML: &str = include_str!("../../conf/demo.toml");

/// Options of `anteroom demo`.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub listen: SocketAddr,
    pub shop: SocketAddr,
    pub admin: SocketAddr,
    pub crowd: u32,
    /// A short event: its pre-queue from now, opening after this long, with a draw.
    pub event_in: Option<std::time::Duration>,
}

/// The demo's event (`--event-in`): registrations from now, a draw at the opening, the sale
/// open for ten minutes. Its draw is seeded from a secret made for this run.
fn demo_event(cfg: &mut config::Config, opens_in: std::time::Duration) -> Option<String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_micros() as u64;
    let opens_at = now + opens_in.as_micros() as u64;
    let room = cfg.rooms.first_mut()?;
    room.events = vec![crate::event::Event {
        name: "demo-drop".into(),
        prequeue_from: now,
        opens_at,
        closes_at: Some(opens_at + 600_000_000),
        draw: true,
        after_close: crate::event::AfterClose::Keep,
        admit_per_second: None,
        max_active: None,
        utc_offset: 0,
    }];
    let secret: Vec<u8> = (0..32).map(|_| fastrand::u8(..)).collect();
    cfg.draw_secret = Some(config::DrawSecret(secret));
    Some(crate::event::time::format(opens_at, 0))
}

pub fn run(opts: DemoOptions) -> ExitCode {
    let mut cfg = match config::parse(DEMO_TOML, "conf/demo.toml (built in)", Path::new(".")) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    cfg.listen.http = opts.listen;
    cfg.listen.admin = opts.admin;
    // The upgrade socket moves with the public address, as a file's default does (found by
    // review: two demos on other ports refused to start over the built-in file's socket).
    cfg.server.upgrade_sock = config::default_upgrade_sock(opts.listen);
    // Ctrl-C on a demo should not wait for stragglers.
    cfg.server.grace_period = std::time::Duration::ZERO;
    if let Some(up) = cfg.upstreams.first_mut() {
        up.addr = opts.shop;
        up.resolved = vec![(opts.shop.to_string(), vec![opts.shop])];
    }
    if let Err(e) = server::check_listen(opts.shop, "--shop") {
        eprintln!("{e}");
        return ExitCode::from(1);
    }
    let event = opts.event_in.and_then(|d| demo_event(&mut cfg, d));
    let room = cfg.rooms.first().map(|r| r.params.clone());
    let (mut server, current) = match server::build(cfg, false) {
        Ok(b) => (b.server, b.current),
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let shared = current.load_full();
    let token = shared
        .config
        .admin
        .own_token()
        .map(String::from)
        .unwrap_or_default();
    let mut shop = Service::new("demo shop".to_string(), shop::Shop::new());
    shop.add_tcp(&opts.shop.to_string());
    server.add_service(shop);
    if let (Some(room), true) = (room.clone(), opts.crowd > 0) {
        server.add_service(background_service(
            "crowd",
            crowd::Crowd::new(shared, room, opts.crowd),
        ));
    }
    let base = format!("http://{}", opts.listen);
    println!("anteroom demo: a waiting room in front of a demo shop (memory store, no Redis)");
    println!();
    println!("  open    {base}/products   the sale: protected by the waiting room");
    if let Some(r) = &room {
        println!(
            "                                  (admits {}/s, at most {} shoppers inside)",
            r.admit_per_second, r.max_active
        );
    }
    println!("  home    {base}/           not protected: goes straight to the shop");
    println!("  status  curl -s '{base}/.anteroom/status?room=sale' -H 'Accept: application/json'");
    println!(
        "  shop    http://{}/   the origin itself, bypassing anteroom",
        opts.shop
    );
    println!(
        "  admin   anteroom rooms --admin http://{} --token {token}",
        opts.admin
    );
    println!(
        "  watch   http://{}/   the dashboard (sign in with the token above)",
        opts.admin
    );
    if let Some(opens) = &event {
        println!("  event   demo-drop: registration now, a draw at {opens}, open for ten minutes");
        println!("          curl -s '{base}/.anteroom/event?room=sale'   (the commitment; the seed at the opening)");
    }
    if opts.crowd > 0 {
        println!("  crowd   {} simulated visitors are joining ahead of you (--crowd N to change, 0 for none)", opts.crowd);
    } else {
        println!("  crowd   none (--crowd N simulates N visitors in the line)");
    }
    println!();
    println!("Press Ctrl-C to stop.");
    server::serve(server, current)
}
