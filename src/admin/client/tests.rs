use super::*;

#[test]
fn a_token_is_trimmed_and_refused_with_anything_a_header_cannot_carry() {
    let t = |s: &str| Target::from_url("127.0.0.1:1", Some(s.to_string())).map(|t| t.token);
    assert_eq!(t("abc123\n").unwrap().as_deref(), Some("abc123"));
    assert_eq!(t(" abc123\r\n").unwrap().as_deref(), Some("abc123"));
    for bad in ["a\r\nX-Evil: 1", "ab c", "a\tb", "", "\n", "tök"] {
        assert!(t(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn the_changes_table_says_who_when_from_where_and_what() {
    let v = serde_json::json!({ "changes": [
        { "id": "a", "at_ms": 1_796_000_000_000u64, "by": "oncall", "client": "10.0.0.7:5000",
          "changes": [ { "field": "queue_all", "from": false, "to": true },
                       { "field": "admit_per_second", "from": null, "to": 20 } ] },
    ]});
    let t = changes_table(&v);
    let line = t.lines().nth(1).unwrap();
    assert!(line.starts_with("2026-11-30 "), "{t}");
    assert!(
        line.contains("oncall") && line.contains("10.0.0.7:5000"),
        "{t}"
    );
    assert!(
        line.ends_with("queue_all false -> true, admit_per_second default -> 20"),
        "{t}"
    );
    assert!(changes_table(&serde_json::json!({ "changes": [] })).contains("no change"));
}

#[test]
fn an_admin_url_names_its_address_or_says_what_is_wrong() {
    assert_eq!(
        admin_hostport("http://127.0.0.1:9090/"),
        Ok("127.0.0.1:9090")
    );
    assert_eq!(admin_hostport("HTTP://[::1]:9090"), Ok("[::1]:9090"));
    assert_eq!(admin_hostport("localhost:9090"), Ok("localhost:9090"));
    for (url, why) in [
        ("https://127.0.0.1:9090", "plain HTTP"),
        ("http://127.0.0.1:9090/rooms", "without a path"),
        ("http://u:p@127.0.0.1:9090", "without a path or user"),
        ("http://127.0.0.1", "port is missing"),
        ("[::1]", "port is missing"),
        ("127.0.0.1:http", "port is missing"),
    ] {
        let got = admin_hostport(url).unwrap_err();
        assert!(got.contains(why), "{url}: {got}");
    }
    let t = Target::from_url("https://127.0.0.1:9090", None).unwrap_err();
    assert!(
        t.contains("--admin https://127.0.0.1:9090") && t.contains("listen.admin"),
        "{t}"
    );
}

#[test]
fn set_pairs_become_a_patch() {
    let v = patch_body(&[
        "queue-all=on".into(),
        "admit_per_second=200".into(),
        "max_active=default".into(),
    ])
    .unwrap();
    assert_eq!(
        v,
        json!({"queue_all": true, "admit_per_second": 200.0, "max_active": null})
    );
    assert!(patch_body(&["rate=5".into()]).is_err());
    assert!(patch_body(&["enabled=maybe".into()]).is_err());
    assert!(patch_body(&[]).is_err());
    // Each key once, however spelled (found by review: the last one won silently).
    for twice in [
        ["enabled=true", "enabled=false"],
        ["queue-all=on", "queue_all=off"],
    ] {
        let e = patch_body(&twice.map(String::from)).unwrap_err();
        assert!(e.contains("given twice"), "{e}");
    }
}

#[test]
fn the_table_says_what_holds_each_line() {
    let rooms = json!([
        {"name": "sale", "enabled": true, "queue_all": false, "waiting": 4, "active": 3,
         "admitted_per_second": 0.0, "admit_per_second": 0.5, "held_by": "max-active",
         "new_visitor_wait_seconds": null},
        {"name": "quiet", "enabled": true, "queue_all": false, "waiting": 0, "active": 1,
         "admitted_per_second": 0.0, "admit_per_second": 0.5, "held_by": null,
         "new_visitor_wait_seconds": 0},
        {"name": "gone", "enabled": true, "queue_all": false, "waiting": 0, "active": 2,
         "admitted_per_second": 0.0, "admit_per_second": 0.5, "held_by": null,
         "new_visitor_wait_seconds": null, "queueing": "reject"},
        {"name": "drop", "enabled": true, "queue_all": false, "waiting": 3, "active": 0,
         "admitted_per_second": 0.0, "admit_per_second": 0.5, "held_by": "prequeue",
         "new_visitor_wait_seconds": null, "event_phase": "prequeue"},
    ]);
    let t = rooms_table(&rooms);
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[0].contains("HELD BY"), "{t}");
    assert!(
        lines[1].contains("max-active") && lines[1].contains("unknown"),
        "{t}"
    );
    assert!(lines[1].contains("0.0/0.5"), "{t}");
    assert!(
        lines[2].contains("-/0.5") && lines[2].ends_with("none"),
        "{t}"
    );
    // A room that rejects newcomers is closed to them, with no wait to tell (review).
    assert!(
        lines[3].contains("closed") && !lines[3].ends_with("none"),
        "{t}"
    );
    // A pre-queue holds its line for the opening, with no wait to tell (review 44).
    assert!(
        lines[4].matches("prequeue").count() == 2 && lines[4].ends_with('-'),
        "{t}"
    );
}

#[test]
fn booleans_are_one_set_in_any_case() {
    for (yes, no) in [
        ("true", "false"),
        ("TRUE", "False"),
        ("yes", "NO"),
        ("On", "off"),
        ("1", "0"),
    ] {
        assert_eq!(boolean(yes), Some(true), "{yes}");
        assert_eq!(boolean(no), Some(false), "{no}");
        assert_eq!(
            patch_body(&[format!("enabled={yes}")]).unwrap(),
            json!({"enabled": true})
        );
    }
    for bad in ["", "t", "2", "truee", "nein"] {
        assert_eq!(boolean(bad), None, "{bad}");
    }
}

#[test]
fn the_admin_listeners_mark_is_read_from_the_head_in_any_case() {
    assert!(marked(
        "HTTP/1.1 200 OK\r\nContent-Type: x\r\nAnteroom-Admin: 1"
    ));
    assert!(marked("HTTP/1.1 200 OK\r\nanteroom-admin:1"));
    assert!(!marked("HTTP/1.1 200 OK\r\nX-Anteroom-Admin-Not: 1"));
    assert!(
        !marked("HTTP/1.1 200 anteroom-admin: 1"),
        "not the status line"
    );
    assert!(
        !marked("HTTP/1.1 200 OK\r\nX-Foo: bar\r\n anteroom-admin: 1"),
        "not a folded line"
    );
    let (head, body) = split_head("HTTP/1.1 200 OK\nX-A: 1\n\nanteroom-admin: 1\n");
    assert!(!marked(head), "the body of an answer with bare line feeds");
    assert_eq!(body, "anteroom-admin: 1\n");
    let (head, body) = split_head("HTTP/1.1 200 OK\r\nAnteroom-Admin: 1\r\n\r\n{}\n\n");
    assert!(marked(head));
    assert_eq!(body, "{}\n\n");
    assert!(
        !marked("HTTP/1.1 200 OK\r\nAnteroom-Admin: 0"),
        "only its value"
    );
    assert!(!marked("HTTP/1.1 200 OK\r\nAnteroom-Admin:"));
}

/// What a server sends is told, not obeyed: a time past RFC 3339's years is its number (found
/// by review: the table panicked), and a long error is clipped.
#[test]
fn a_servers_nonsense_is_told_as_it_is() {
    let v = serde_json::json!({ "changes": [
        { "id": "a", "at_ms": 253_402_300_800_000u64, "by": "x", "client": "y",
          "changes": [ { "field": "queue_all", "from": false, "to": true } ] },
    ]});
    assert!(changes_table(&v).contains("253402300800000"));
    let v = serde_json::json!({ "changes": [
        { "id": "a", "at_ms": 253_402_300_799_000u64, "by": "x", "client": "y",
          "changes": [ { "field": "queue_all", "from": false, "to": true } ] },
    ]});
    assert!(changes_table(&v).contains("9999-12-31 23:59:59"));
    let long = "x".repeat(100_000);
    assert!(clipped(&long).len() < 600);
    assert!(clipped(&long).ends_with("(100000 bytes)"));
    assert_eq!(clipped("short"), "short");
}
