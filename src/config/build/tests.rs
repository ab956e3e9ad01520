use super::*;

#[test]
fn an_upstream_at_an_own_listener_is_refused_at_its_key() {
    let text = |up: &str| {
        format!(
            "[listen]\nhttp = \"0.0.0.0:8080\"\nadmin = \"127.0.0.1:9180\"\n[cookie]\n\
                 keys = [\"test-key-0123456789-0123456789-0123456789\"]\n[[upstream]]\n\
                 name = \"shop\"\naddr = \"{up}\"\n"
        )
    };
    let parse = |up: &str| crate::config::parse(&text(up), "unit.toml", std::path::Path::new("."));
    for up in ["127.0.0.1:8080", "127.0.0.1:9180"] {
        let e = parse(up).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            e.contains("upstream[0].addr") && e.contains("own listeners"),
            "{up}: {e}"
        );
    }
    assert!(parse("127.0.0.1:9000").is_ok());
}

#[test]
fn an_upstream_at_an_own_listener_loops_back() {
    let a = |s: &str| s.parse::<SocketAddr>().unwrap();
    for (up, listener, loops) in [
        ("127.0.0.1:8080", "127.0.0.1:8080", true),
        ("127.0.0.1:8080", "0.0.0.0:8080", true),
        ("[::1]:8080", "[::]:8080", true),
        ("0.0.0.0:8080", "127.0.0.1:8080", true),
        ("10.0.0.5:8080", "0.0.0.0:8080", false),
        ("10.0.0.5:8080", "10.0.0.5:8080", true),
        ("127.0.0.1:8081", "127.0.0.1:8080", false),
        ("127.0.0.2:8080", "127.0.0.1:8080", false),
    ] {
        assert_eq!(loops_back(a(up), a(listener)), loops, "{up} -> {listener}");
    }
}

#[test]
fn listeners_clash_on_one_port_when_one_address_covers_the_other() {
    let a = |s: &str| s.parse::<SocketAddr>().unwrap();
    for (x, y, clash) in [
        ("127.0.0.1:80", "127.0.0.1:80", true),
        ("0.0.0.0:80", "127.0.0.1:80", true),
        ("127.0.0.1:80", "0.0.0.0:80", true),
        ("[::]:80", "127.0.0.1:80", true),
        ("[::]:80", "[::1]:80", true),
        ("0.0.0.0:80", "[::1]:80", false),
        ("127.0.0.1:80", "[::1]:80", false),
        ("127.0.0.1:80", "127.0.0.2:80", false),
        ("0.0.0.0:80", "0.0.0.0:81", false),
        ("[::ffff:127.0.0.1]:80", "127.0.0.1:80", true),
        ("[::ffff:0.0.0.0]:80", "127.0.0.1:80", true),
    ] {
        assert_eq!(same_socket(a(x), a(y)), clash, "{x} {y}");
    }
}
