//! What ships beside the binary: the configs in conf/, the Dockerfile, the Grafana dashboard.

use super::*;

#[test]
fn every_shipped_config_passes() {
    let mut n = 0;
    for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/conf")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let rel = path
                .strip_prefix(env!("CARGO_MANIFEST_DIR"))
                .unwrap()
                .display()
                .to_string();
            let (ok, stdout, stderr) = check(&rel);
            assert!(ok, "{rel}: {stderr}");
            assert!(stdout.starts_with(&format!("{rel}: OK")), "{stdout}");
            assert!(stdout.contains("room sale"), "{stdout}");
            n += 1;
        }
    }
    assert!(n >= 2, "conf/anteroom.toml and conf/demo.toml at least");
}

/// An operator's first step: `cp conf/anteroom.toml /etc/anteroom/` and check it there, from
/// its own folder and from elsewhere, with nothing of the source tree beside it.
#[test]
fn the_reference_config_passes_wherever_it_is_copied_alone() {
    let etc = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let copy = etc.path().join("anteroom.toml");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/conf/anteroom.toml"),
        &copy,
    )
    .unwrap();
    let (ok, stdout, stderr) = check_in(etc.path(), "anteroom.toml");
    assert!(ok, "from its folder: {stderr}");
    assert!(stdout.starts_with("anteroom.toml: OK"), "{stdout}");
    let (ok, _, stderr) = check_in(elsewhere.path(), copy.to_str().unwrap());
    assert!(ok, "from elsewhere: {stderr}");
}

/// There is no Docker engine here: check what can be checked by reading the Dockerfile.
#[test]
fn the_dockerfile_copies_what_exists_and_runs_a_real_command() {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/Dockerfile")).unwrap();
    let mut copies = 0;
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from="))
    {
        let parts: Vec<&str> = line.split_whitespace().collect();
        for src in &parts[1..parts.len() - 1] {
            assert!(
                std::path::Path::new(root).join(src).exists(),
                "COPY source {src} missing"
            );
            copies += 1;
        }
    }
    assert!(copies >= 5);
    let cmd = text.lines().find(|l| l.starts_with("CMD ")).expect("a CMD");
    let args: Vec<String> = serde_json::from_str(cmd.trim_start_matches("CMD ")).unwrap();
    assert_eq!(&args[..2], ["run", "--config"]);
    let config = args[2]
        .strip_prefix("/app/")
        .expect("config under WORKDIR /app");
    let (ok, _, stderr) = check(config);
    assert!(ok, "the image's config must pass check: {stderr}");
    assert!(text.contains("ENTRYPOINT [\"anteroom\"]"));
    assert!(text.contains("USER anteroom"));
    // The health check is a real command: against a closed port it fails the way a dead
    // process would (exit 1), not with a usage error (exit 2).
    let hc = text
        .lines()
        .find(|l| l.trim_start().starts_with("CMD [\"anteroom\", \"health\""))
        .expect("HEALTHCHECK CMD");
    let mut args: Vec<String> = serde_json::from_str(hc.trim().trim_start_matches("CMD ")).unwrap();
    args.remove(0);
    let port = common::free_port();
    let args: Vec<String> = args
        .into_iter()
        .map(|a| a.replace(":9180", &format!(":{port}")))
        .collect();
    let out = Command::new(common::binary()).args(&args).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach the admin API"));
}

/// The example Grafana dashboard only queries metrics anteroom exports.
#[test]
fn the_grafana_dashboard_uses_real_metrics() {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/docs/grafana-dashboard.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let known = [
        "anteroom_waiting",
        "anteroom_active",
        "anteroom_admitted_total",
        "anteroom_joined_total",
        "anteroom_rejected_total",
        "anteroom_requests_total",
        "anteroom_request_duration_seconds_bucket",
        "anteroom_wait_seconds_bucket",
        "anteroom_store_errors_total",
        "anteroom_breaker_open",
    ];
    let mut exprs = 0;
    for panel in v["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            exprs += 1;
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("anteroom_") {
                    assert!(known.contains(&word), "{word} in {expr}");
                }
            }
        }
    }
    assert!(exprs >= 8);
}
