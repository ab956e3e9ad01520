//! Admin tokens with roles (`[admin] tokens`), against the real binary: a read token may look,
//! not change; an operate token may change; every change is logged with the token's label and
//! the caller's address, never the token, and kept in the room's history (`/rooms/NAME/changes`).

mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

const READ: &str = "grafana-token-0123456789abcdef";
const OPERATE: &str = "oncall-token-0123456789abcdef";

fn config(origin: std::net::SocketAddr) -> String {
    format!(
        r#"{base}
[admin]
tokens = [
  {{ label = "grafana", value = "{READ}", role = "read" }},
  {{ label = "oncall", value = "env:ONCALL_TOKEN", role = "operate" }},
]

[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 100
max-active = 1
tick = "50ms"
"#,
        base = base_config(origin)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_token_looks_an_operate_token_changes_and_the_log_names_the_label() {
    let origin = Origin::start().await;
    let proxy = Proxy::start_with(&config(origin.addr), &[("ONCALL_TOKEN", OPERATE)], &[]);
    use reqwest::Method;

    // Both may read.
    for token in [READ, OPERATE] {
        assert_eq!(
            admin_call(&proxy, Method::GET, "/rooms", Some(token), None)
                .await
                .0,
            200
        );
        assert_eq!(
            admin_call(&proxy, Method::GET, "/rooms/sale", Some(token), None)
                .await
                .0,
            200
        );
        assert_eq!(
            admin_call(&proxy, Method::GET, "/metrics", Some(token), None)
                .await
                .0,
            200
        );
    }
    // HEAD is GET without the body: the probes need no token, a read token may send it
    // (found by review: 401 on the probes, 403 for a read token).
    for (path, token) in [
        ("/healthz", None),
        ("/readyz", None),
        ("/", None),
        ("/rooms/sale", Some(READ)),
        ("/metrics", Some(READ)),
    ] {
        let req = client().head(proxy.admin_url(path));
        let req = match token {
            Some(t) => req.bearer_auth(t),
            None => req,
        };
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200, "HEAD {path}");
        assert!(resp.bytes().await.unwrap().is_empty(), "HEAD {path}");
    }
    assert_eq!(
        client()
            .head(proxy.admin_url("/rooms"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        401,
        "HEAD needs the token where GET does"
    );
    // A wrong token, a prefix of a right one, none: 401.
    for token in [
        Some("not-a-token-0123456789abcdef"),
        Some(&READ[..20]),
        None,
    ] {
        assert_eq!(
            admin_call(&proxy, Method::GET, "/rooms", token, None)
                .await
                .0,
            401
        );
    }

    // The read token may not change anything, and nothing changes.
    let pause = json!({ "queue_all": true });
    let (status, text) = admin_call(
        &proxy,
        Method::PATCH,
        "/rooms/sale",
        Some(READ),
        Some(pause.clone()),
    )
    .await;
    assert_eq!(status, 403, "{text}");
    assert!(
        text.contains("grafana") && text.contains("operate"),
        "{text}"
    );
    let (status, _) = admin_call(
        &proxy,
        Method::DELETE,
        "/rooms/sale/waiting",
        Some(READ),
        None,
    )
    .await;
    assert_eq!(status, 403);
    let view = admin_json(&proxy, "/rooms/sale", READ).await.unwrap();
    assert_eq!(view["queue_all"], json!(false), "{view}");

    // The operate token may.
    let (status, text) = admin_call(
        &proxy,
        Method::PATCH,
        "/rooms/sale",
        Some(OPERATE),
        Some(pause),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let view = admin_json(&proxy, "/rooms/sale", READ).await.unwrap();
    assert_eq!(view["queue_all"], json!(true), "{view}");
    // The same again is no change, and is not recorded: no-ops must not push the real
    // changes out of the kept history.
    let (status, text) = admin_call(
        &proxy,
        Method::PATCH,
        "/rooms/sale",
        Some(OPERATE),
        Some(json!({"queue_all": true})),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    // Somebody waits in the held line, and is cleared out of it.
    let waiting = get_json(&proxy, "/.anteroom/status?room=sale", &mut Jar::default())
        .await
        .unwrap();
    assert_eq!(waiting["state"], "paused", "{waiting}");
    let (status, _) = admin_call(
        &proxy,
        Method::DELETE,
        "/rooms/sale/waiting",
        Some(OPERATE),
        None,
    )
    .await;
    assert_eq!(status, 200);

    // The history, newest first, for any token: who, from where, what from what to what.
    let (status, text) =
        admin_call(&proxy, Method::GET, "/rooms/sale/changes", Some(READ), None).await;
    assert_eq!(status, 200, "{text}");
    let history: Value = serde_json::from_str(&text).unwrap();
    let changes = history["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 2, "{history}");
    assert_eq!(changes[0]["changes"][0]["field"], "waiting");
    assert_eq!(
        changes[1]["changes"][0],
        json!({ "field": "queue_all", "from": false, "to": true })
    );
    for c in changes {
        assert_eq!(c["by"], "oncall");
        assert!(
            c["client"].as_str().unwrap().starts_with("127.0.0.1:"),
            "{c}"
        );
    }
    let (status, text) = admin_call(
        &proxy,
        Method::GET,
        "/rooms/sale/changes?limit=1",
        Some(READ),
        None,
    )
    .await;
    assert_eq!((status, text.matches("\"id\"").count()), (200, 1), "{text}");
    for bad in ["limit=0", "limit=x", "limit=100000", "other=1"] {
        let path = format!("/rooms/sale/changes?{bad}");
        assert_eq!(
            admin_call(&proxy, Method::GET, &path, Some(READ), None)
                .await
                .0,
            400,
            "{bad}"
        );
    }
    assert_eq!(
        admin_call(&proxy, Method::GET, "/rooms/sale/changes", None, None)
            .await
            .0,
        401
    );

    // The same history from the terminal, with a read token.
    let out = std::process::Command::new(binary())
        .args(["room", "sale", "changes", "--admin"])
        .arg(format!("http://{}", proxy.admin))
        .args(["--token", READ])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{table}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "a header and two changes:\n{table}");
    assert!(
        lines[1].contains("oncall") && lines[1].contains("waiting 1 -> 0"),
        "{table}"
    );
    assert!(lines[2].contains("queue_all false -> true"), "{table}");
    assert!(lines[2].contains("127.0.0.1:"), "{table}");

    // Logged with who and from where, never with the token.
    let log = eventually(Duration::from_secs(5), "the change in the log", || async {
        let log = proxy.stderr();
        log.contains("line cleared through the admin API")
            .then_some(log)
    })
    .await;
    let changed = log
        .lines()
        .find(|l| l.contains("room state changed through the admin API"))
        .unwrap_or_default();
    assert!(
        changed.contains("by=\"oncall\"") || changed.contains("by=oncall"),
        "{changed}"
    );
    assert!(changed.contains("client=127.0.0.1:"), "{changed}");
    assert!(changed.contains("queue_all: false -> true"), "{changed}");
    assert!(
        !log.contains(OPERATE) && !log.contains(READ),
        "a token in the log:\n{log}"
    );
}

#[test]
fn check_names_the_tokens_and_their_roles_never_their_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("anteroom.toml");
    std::fs::write(&path, config("127.0.0.1:9".parse().unwrap())).unwrap();
    let out = std::process::Command::new(binary())
        .args(["check", "--config"])
        .arg(&path)
        .env("ONCALL_TOKEN", OPERATE)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("grafana (read), oncall (operate)"),
        "{stdout}"
    );
    assert!(
        !stdout.contains(OPERATE) && !stdout.contains(READ),
        "{stdout}"
    );
}
