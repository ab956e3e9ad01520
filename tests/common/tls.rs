//! Certificates made by the test with the openssl CLI: a CA and server certificates it signs.

use std::path::{Path, PathBuf};
use std::process::Command;

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
