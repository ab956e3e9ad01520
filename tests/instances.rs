//! Several instances on one host: each has its own upgrade socket, a second instance
//! configured onto another's socket refuses to start, and a graceful upgrade (`run --upgrade`,
//! then SIGQUIT to the old process) hands one instance's listeners to its new process only.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A process of ours that is killed on drop.
struct Run {
    child: Child,
    log: PathBuf,
}

impl Run {
    fn start(config: &Path, upgrade: bool, log: PathBuf) -> Run {
        let mut cmd = Command::new(binary());
        cmd.args(["run", "--config"]).arg(config);
        if upgrade {
            cmd.arg("--upgrade");
        }
        let child = cmd
            .env("ANTEROOM_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Run { child, log }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The exit code within `limit` (-1 for a signal), or `None` if still running.
    fn exit_within(&mut self, limit: Duration) -> Option<i32> {
        exited_within(&mut self.child, limit).map(|s| s.code().unwrap_or(-1))
    }

    fn signal(&self, name: &str) {
        signal_pid(self.child.id(), name);
    }

    /// Started with `--upgrade`: waits until it listens on the upgrade socket `sock` (and has
    /// not exited meanwhile).
    fn waits_on(&mut self, sock: &Path) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !sock.exists() {
            assert!(Instant::now() < deadline, "no socket: {}", self.stderr());
            assert!(
                self.exit_within(Duration::from_millis(20)).is_none(),
                "{}",
                self.stderr()
            );
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(dir: &Path, name: &str, origin: std::net::SocketAddr, sock: Option<&Path>) -> PathBuf {
    let (http, admin) = (free_port(), free_port());
    let sock = sock
        .map(|s| format!("upgrade-sock = \"{}\"\n", s.display()))
        .unwrap_or_default();
    let text = format!(
        "[listen]\nhttp = \"127.0.0.1:{http}\"\nadmin = \"127.0.0.1:{admin}\"\n\
         [server]\ngrace-period = \"0s\"\nshutdown-timeout = \"1s\"\n{sock}{}",
        base_config(origin)
    );
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The public address a config file names.
fn http_of(config: &Path) -> String {
    let text = std::fs::read_to_string(config).unwrap();
    let line = text.lines().find(|l| l.starts_with("http = ")).unwrap();
    line.trim_start_matches("http = ")
        .trim_matches('"')
        .to_string()
}

async fn answers(addr: &str) -> bool {
    client()
        .get(format!("http://{addr}/hello"))
        .send()
        .await
        .is_ok_and(|r| r.status() == 200)
}

async fn until_answers(addr: &str, run: &Run) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !answers(addr).await {
        assert!(
            Instant::now() < deadline,
            "{addr} never answered: {}",
            run.stderr()
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_on_one_host_keep_to_their_own_upgrade_socket() {
    let origin = Origin::start().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // Two instances with the default socket: both start (one socket per public address).
    let a = config(d, "a.toml", origin.addr, None);
    let b = config(d, "b.toml", origin.addr, None);
    let ra = Run::start(&a, false, d.join("a.log"));
    let rb = Run::start(&b, false, d.join("b.log"));
    until_answers(&http_of(&a), &ra).await;
    until_answers(&http_of(&b), &rb).await;
    drop((ra, rb));

    // Two instances given one socket: the second refuses, naming the key.
    let sock = d.join("shared.sock");
    let first = config(d, "first.toml", origin.addr, Some(&sock));
    let second = config(d, "second.toml", origin.addr, Some(&sock));
    let mut old = Run::start(&first, false, d.join("first.log"));
    until_answers(&http_of(&first), &old).await;
    let mut other = Run::start(&second, false, d.join("second.log"));
    assert_eq!(other.exit_within(Duration::from_secs(20)), Some(1));
    let err = other.stderr();
    assert!(
        err.contains("another running anteroom uses upgrade-sock") && err.contains("fix:"),
        "{err}"
    );

    // The graceful upgrade of the first: its new process waits on the socket; a second
    // waiting process is refused (it would unlink the first's socket).
    let mut new = Run::start(&first, true, d.join("new.log"));
    new.waits_on(&sock);
    let mut again = Run::start(&first, true, d.join("again.log"));
    assert_eq!(again.exit_within(Duration::from_secs(20)), Some(1));
    assert!(
        again.stderr().contains("already waiting on upgrade-sock"),
        "{}",
        again.stderr()
    );
    // SIGQUIT: the old process hands its sockets over and exits; the new one serves on them.
    old.signal("QUIT");
    assert_eq!(
        old.exit_within(Duration::from_secs(20)),
        Some(0),
        "{}",
        old.stderr()
    );
    // At once, before the new process may have taken over the old one's claim: there is no
    // moment at which the socket is free for another instance.
    let mut gap = Run::start(&second, false, d.join("gap.log"));
    assert_eq!(
        gap.exit_within(Duration::from_secs(20)),
        Some(1),
        "{}",
        gap.stderr()
    );
    until_answers(&http_of(&first), &new).await;
    assert!(new.exit_within(Duration::from_millis(50)).is_none());
    // The new process now holds the socket for its instance: another still cannot take it.
    let mut late = Run::start(&second, false, d.join("late.log"));
    assert_eq!(
        late.exit_within(Duration::from_secs(20)),
        Some(1),
        "{}",
        late.stderr()
    );
}

/// An upgrade while an order is at the shop for longer than Pingora's wait for the sockets
/// (five tries a second apart): the old process hands them over at once and finishes the order
/// while it drains (`grace-period`). Before (found by review), it waited for the order to end
/// before the handover, the new process had given up after five seconds, and once the old one
/// had drained nothing listened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_hands_over_at_once_while_an_order_is_at_the_shop() {
    let shop = common::shop::Shop::start().await;
    shop.script(&[common::shop::Answer::Late(Duration::from_secs(7), 200)]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (http, admin) = (free_port(), free_port());
    let text = format!(
        "[listen]\nhttp = \"127.0.0.1:{http}\"\nadmin = \"127.0.0.1:{admin}\"\n\
         [server]\ngrace-period = \"10s\"\nshutdown-timeout = \"15s\"\nupgrade-sock = \"{}\"\n{}\n\
         [[room]]\nname = \"sale\"\npaths = [\"/orders\"]\nconsume = [\"POST /orders\"]\n\
         admit-per-second = 100\nmax-active = 10\n",
        d.join("up.sock").display(),
        base_config(shop.addr)
    );
    let cfg = d.join("c.toml");
    std::fs::write(&cfg, text).unwrap();
    let addr = http_of(&cfg);
    let mut old = Run::start(&cfg, false, d.join("old.log"));
    until_answers(&addr, &old).await;
    let url = format!("http://{addr}/orders");
    let order = tokio::spawn(async move {
        client()
            .post(url)
            .body("item=1")
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    eventually(Duration::from_secs(10), "the order at the shop", || async {
        (shop.orders() == 1).then_some(())
    })
    .await;
    let mut new = Run::start(&cfg, true, d.join("new.log"));
    new.waits_on(&d.join("up.sock"));
    old.signal("QUIT");
    // Every probe is answered, through the old process, then the new one, until a second
    // after the old one exited.
    let (mut refused, mut answered) = (0, 0);
    let mut exited_at: Option<Instant> = None;
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until && exited_at.is_none_or(|t| t.elapsed() < Duration::from_secs(1)) {
        if answers(&addr).await {
            answered += 1;
        } else {
            refused += 1;
        }
        if exited_at.is_none() && old.exit_within(Duration::from_millis(1)).is_some() {
            exited_at = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(order.await.unwrap().ok(), Some(200), "the order's answer");
    assert_eq!(
        old.exit_within(Duration::from_secs(20)),
        Some(0),
        "{}",
        old.stderr()
    );
    until_answers(&addr, &new).await;
    assert!(
        new.exit_within(Duration::from_millis(50)).is_none(),
        "the new process serves: {}",
        new.stderr()
    );
    assert_eq!(refused, 0, "{answered} answered: {}", new.stderr());
}

/// Instances on one Redis that run a room differently (a SIGHUP that reached one of them)
/// are shown as such; once each has the same file, they agree again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_that_run_different_configurations_are_shown() {
    use common::redis::RedisServer;
    const TOKEN: &str = "admin-token-for-tests-0123456789";
    let origin = Origin::start().await;
    let redis = RedisServer::start();
    let config = |rate: u32| {
        format!(
            "{}\n[admin]\ntoken = \"{TOKEN}\"\n[store]\nbackend = \"redis\"\nredis-url = \"{}\"\n\
             [[room]]\nname = \"sale\"\npaths = [\"/products\"]\nadmit-per-second = {rate}\n\
             max-active = 100\ntick = \"100ms\"\n",
            base_config(origin.addr),
            redis.url()
        )
    };
    let one = Proxy::start(&config(10));
    let two = Proxy::start(&config(20));
    let v = eventually(Duration::from_secs(10), "two configurations", || async {
        let v = admin_json(&one, "/rooms/sale", TOKEN).await?;
        (v["instance_configs"].as_object()?.len() == 2).then_some(v)
    })
    .await;
    assert_eq!(v["configs_differ"], true, "{v}");
    let mine = v["config_digest"].as_str().unwrap().to_string();
    assert_eq!(v["instance_configs"][&mine], 1, "{v}");
    let out = Command::new(binary())
        .args(["rooms", "--admin", &one.admin_url(""), "--token", TOKEN])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("instances run 2 configurations") && table.contains(&mine),
        "{table}"
    );
    // The second gets the first's file and a SIGHUP: one configuration again.
    let first = std::fs::read_to_string(one.config_path()).unwrap();
    let second = std::fs::read_to_string(two.config_path()).unwrap();
    let listen = |t: &str| t.lines().take(3).collect::<Vec<_>>().join("\n");
    let same = first.replacen(&listen(&first), &listen(&second), 1);
    std::fs::write(two.config_path(), &same).unwrap();
    two.signal("HUP");
    let v = eventually(Duration::from_secs(10), "one configuration", || async {
        let v = admin_json(&two, "/rooms/sale", TOKEN).await?;
        (v["configs_differ"] == false).then_some(v)
    })
    .await;
    assert_eq!(v["instance_configs"][&mine], 2, "{v}");
    assert_eq!(v["config_digest"], mine.as_str(), "{v}");
    // A `[draw] secret` of its own is another configuration too: its draws would have other
    // seeds and commitments.
    let with_secret = format!(
        "{}\n[draw]\nsecret = \"a-draw-secret-of-this-instance-only-0123456789\"\n",
        std::fs::read_to_string(two.config_path()).unwrap()
    );
    std::fs::write(two.config_path(), with_secret).unwrap();
    two.signal("HUP");
    let v = eventually(Duration::from_secs(10), "a secret of its own", || async {
        let v = admin_json(&one, "/rooms/sale", TOKEN).await?;
        (v["configs_differ"] == true).then_some(v)
    })
    .await;
    assert_eq!(v["instance_configs"][&mine], 1, "{v}");
    // So is a rotation of the cookie keys begun on one instance only: it signs admissions and
    // tickets the other cannot verify (found by review: both showed one digest). Once every
    // instance has the new keys, they agree again.
    async fn differ(p: &Proxy, want: bool) {
        eventually(Duration::from_secs(10), "configs_differ", || async {
            let v = admin_json(p, "/rooms/sale", TOKEN).await?;
            (v["configs_differ"] == want).then_some(v)
        })
        .await;
    }
    std::fs::write(two.config_path(), &same).unwrap();
    two.signal("HUP");
    differ(&one, false).await;
    let rotate = |text: &str| {
        let out = text.replace(
            &format!("keys = [\"{KEY}\"]"),
            &format!("keys = [\"{OTHER_KEY}\", \"{KEY}\"]"),
        );
        assert_ne!(out, text, "the keys line is found");
        out
    };
    std::fs::write(two.config_path(), rotate(&same)).unwrap();
    two.signal("HUP");
    differ(&one, true).await;
    std::fs::write(one.config_path(), rotate(&first)).unwrap();
    one.signal("HUP");
    differ(&two, false).await;
}

/// An upgrade during a Redis outage with an order's confirm owed: the old process hands the
/// sockets over and, while it drains, Redis comes back; the confirm lands and the kept cookie
/// orders on no instance. Before (found by review), only the admission loop probed the
/// breaker, it stopped at the shutdown's broadcast, and the confirm failed fast against the
/// open breaker until the exit: the kept cookie ordered again once the grace period ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_during_an_outage_lands_what_it_owes_while_it_drains() {
    let redis = common::redis::RedisServer::start();
    let shop = common::shop::Shop::start().await;
    shop.script(&[common::shop::Answer::Late(Duration::from_secs(2), 200)]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (http, admin) = (free_port(), free_port());
    let text = format!(
        "[listen]\nhttp = \"127.0.0.1:{http}\"\nadmin = \"127.0.0.1:{admin}\"\n\
         [server]\ngrace-period = \"12s\"\nshutdown-timeout = \"2s\"\nupgrade-sock = \"{}\"\n\
         [store]\nbackend = \"redis\"\nredis-url = \"{}\"\ntimeout = \"300ms\"\nbreaker-cooldown = \"300ms\"\n{}\n\
         [[room]]\nname = \"sale\"\npaths = [\"/orders\", \"/products\"]\nconsume = [\"POST /orders\"]\n\
         admit-per-second = 100\nmax-active = 10\n",
        d.join("up.sock").display(),
        redis.url(),
        base_config(shop.addr)
    );
    let cfg = d.join("c.toml");
    std::fs::write(&cfg, text).unwrap();
    let addr = http_of(&cfg);
    let mut old = Run::start(&cfg, false, d.join("old.log"));
    until_answers(&addr, &old).await;
    let mut jar = Jar::default();
    let resp = client()
        .get(format!("http://{addr}/products"))
        .send()
        .await
        .unwrap();
    jar.absorb(&resp);
    assert!(jar.get("anteroom_sale").is_some(), "admitted");
    let (url, cookie) = (format!("http://{addr}/orders"), jar.header());
    let order = tokio::spawn(async move {
        let resp = client().post(url).header("cookie", cookie).send().await;
        resp.map(|r| r.status().as_u16()).ok()
    });
    eventually(Duration::from_secs(10), "the order at the shop", || async {
        (shop.orders() == 1).then_some(())
    })
    .await;
    redis.signal(true);
    assert_eq!(order.await.unwrap(), Some(200), "the shop's answer");
    let mut new = Run::start(&cfg, true, d.join("new.log"));
    new.waits_on(&d.join("up.sock"));
    old.signal("QUIT");
    // Past the five seconds after the handover, when the admission loop has stopped.
    tokio::time::sleep(Duration::from_secs(7)).await;
    redis.signal(false);
    assert_eq!(
        old.exit_within(Duration::from_secs(30)),
        Some(0),
        "{}",
        old.stderr()
    );
    let err = old.stderr();
    assert!(!err.contains("the store never heard"), "{err}");
    // The kept cookie, through the new process: used.
    let resp = client()
        .post(format!("http://{addr}/orders"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 409, "{}", new.stderr());
    assert_eq!(shop.orders(), 1, "one order");
}
