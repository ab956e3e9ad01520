//! `anteroom demo` as the README runs it: the demo shop behind a room, and `--listen`,
//! `--shop` and `--admin` moving its three ports, so that two demos run side by side (found
//! by review: the second refused to start over the first's upgrade socket).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

struct Demo(Child);

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn demo(listen: u16, shop: u16, admin: u16) -> Demo {
    let at = |p: u16| format!("127.0.0.1:{p}");
    Demo(
        Command::new(binary())
            .args(["demo", "--crowd", "0", "--listen", &at(listen)])
            .args(["--shop", &at(shop), "--admin", &at(admin)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("anteroom demo"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_demos_run_side_by_side_on_their_own_ports() {
    let ports: Vec<u16> = (0..6).map(|_| free_port()).collect();
    let mut first = demo(ports[0], ports[1], ports[2]);
    let mut second = demo(ports[3], ports[4], ports[5]);
    for (d, port) in [(&mut first, ports[0]), (&mut second, ports[3])] {
        let url = format!("http://127.0.0.1:{port}/");
        eventually(Duration::from_secs(30), "the demo shop answers", || {
            let url = url.clone();
            async move {
                let resp = client().get(&url).send().await.ok()?;
                resp.status().is_success().then_some(())
            }
        })
        .await;
        assert!(d.0.try_wait().unwrap().is_none(), "the demo runs on");
    }
}
