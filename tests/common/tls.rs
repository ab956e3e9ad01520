//! Certificates made by the test with the openssl CLI (a CA and server certificates it signs),
//! and the HTTPS tests' room and clients (curl, `openssl s_client`).

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::base_config;

/// A test CA in `dir` (`ca.pem`, `ca.key`).
pub struct TestCa {
    pub dir: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TestCa {
    pub fn new(dir: &Path) -> TestCa {
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=anteroom-test-ca",
            ],
        );
        TestCa {
            dir: dir.to_path_buf(),
        }
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A server certificate `NAME.pem` and key `NAME.key` for `sans` (`DNS:shop.test`,
    /// `IP:127.0.0.1`), signed by the CA, good for a server and a client; the paths.
    pub fn issue(&self, name: &str, sans: &[&str]) -> (PathBuf, PathBuf) {
        self.issue_for(name, sans, 2)
    }

    /// [`Self::issue`] valid for `days` (0: it expires the second it is made).
    pub fn issue_for(&self, name: &str, sans: &[&str], days: u32) -> (PathBuf, PathBuf) {
        let days = days.to_string();
        let (key, csr, pem, ext) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.cnf"),
        );
        let subject = format!("/CN={name}");
        openssl(
            &self.dir,
            &[
                "req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj",
                &subject,
            ],
        );
        std::fs::write(
            self.dir.join(&ext),
            format!(
                "subjectAltName={}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n",
                sans.join(",")
            ),
        )
        .unwrap();
        openssl(
            &self.dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                &days,
                "-extfile",
                &ext,
            ],
        );
        (self.dir.join(pem), self.dir.join(key))
    }
}

/// The base64 SHA-256 of a certificate's public key, as Chromium's
/// `--ignore-certificate-errors-spki-list` takes it (trust this one key, nothing else).
pub fn spki_sha256(cert: &Path) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl x509 -in '{}' -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64",
            cert.display()
        ))
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// What curl got.
#[derive(Debug)]
pub struct Got {
    pub status: u16,
    /// `1.1` or `2`.
    pub version: String,
    pub headers: String,
    /// curl's `-v` lines (the certificate's subject is there).
    pub verbose: String,
}

impl Got {
    pub fn header(&self, name: &str) -> Vec<String> {
        self.headers
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| v.trim().to_string())
            })
            .collect()
    }

    pub fn subject(&self) -> String {
        self.verbose
            .lines()
            .find_map(|l| l.split_once("subject: ").map(|(_, s)| s.trim().to_string()))
            .unwrap_or_default()
    }
}

/// `curl` for `url` with `args`, trusting `ca`; `host` resolved to 127.0.0.1 on `port`.
pub fn curl(ca: &Path, host: &str, port: u16, url: &str, args: &[&str]) -> Result<Got, String> {
    let dir = tempfile::tempdir().unwrap();
    let headers = dir.path().join("headers");
    let out = Command::new("curl")
        .args(["-sS", "-v", "--max-time", "20", "--cacert"])
        .arg(ca)
        .args(["--resolve", &format!("{host}:{port}:127.0.0.1")])
        .args(["-o", "/dev/null", "-D"])
        .arg(&headers)
        .args(["-w", "%{http_code} %{http_version}"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl");
    let verbose = String::from_utf8_lossy(&out.stderr).to_string();
    if !out.status.success() {
        return Err(verbose);
    }
    let w = String::from_utf8_lossy(&out.stdout).to_string();
    let (status, version) = w.split_once(' ').unwrap_or(("0", ""));
    Ok(Got {
        status: status.parse().unwrap_or(0),
        version: version.to_string(),
        headers: std::fs::read_to_string(headers).unwrap_or_default(),
        verbose,
    })
}

/// `openssl s_client` to 127.0.0.1:`port` (SNI shop.test) offering only the protocol
/// `version` (`-tls1_2`, `-tls1_1`, `-tls1`): whether the handshake completed, and what it
/// printed. `@SECLEVEL=0`: at its default level Debian's OpenSSL gives up on TLS 1.0 and 1.1
/// by itself (legacy signature algorithms), which would say nothing about the server.
pub fn s_client(port: u16, version: &str) -> (bool, String) {
    let out = Command::new("timeout")
        .args(["20", "openssl", "s_client", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-servername", "shop.test", version])
        .args(["-cipher", "DEFAULT:@SECLEVEL=0"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

pub fn wait_listening(port: u16) {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {addr}");
        std::thread::park_timeout(Duration::from_millis(20));
    }
}

/// The `[listen]` lines for HTTPS on `port` and the rest of a config: a room on `/products`,
/// `[[tls]]` entries as given.
pub fn config(origin: SocketAddr, port: u16, redirect: bool, tls: &str) -> String {
    format!(
        r#"https = "127.0.0.1:{port}"
redirect-http = {redirect}
{base}
[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 100
max-active = 100
{tls}
"#,
        base = base_config(origin)
    )
}

pub fn entry(hosts: &str, cert: &Path, key: &Path) -> String {
    format!(
        "[[tls]]\nhosts = {hosts}\ncert = \"{}\"\nkey = \"{}\"\n",
        cert.display(),
        key.display()
    )
}
