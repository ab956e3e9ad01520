//! `[[upstream]] ca` and `client-cert`: HTTPS to the origin checked against a CA of the
//! operator's, and anteroom showing the origin a certificate of its own (mutual TLS), so that
//! an origin that asks for it serves nobody else (docs/ORIGIN-LOCK.md). Part of
//! [`super::build`]; the files are read and checked here, like `[[tls]]`'s.

use std::path::PathBuf;
use std::sync::Arc;

use pingora::protocols::tls::CaType;
use pingora::utils::tls::{parse_x509, CertKey, WrappedX509};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use super::build::Builder;
use super::file::UpstreamFile;
use super::locate::KeyPath;
use crate::edge::tls::{load_pair, PairError};

impl Builder<'_> {
    /// A path as given, or next to the config file when relative.
    pub(super) fn file_path(&mut self, key: &KeyPath, raw: &str) -> Option<PathBuf> {
        let given = PathBuf::from(self.string(key, raw)?);
        Some(if given.is_absolute() {
            given
        } else {
            self.base_dir.join(given)
        })
    }

    /// `ca` and `client-cert` of an upstream; both need `tls = true`, as `sni` does (found by
    /// review: an `sni` without `tls` passed, and named nothing).
    pub(super) fn upstream_tls(
        &mut self,
        p: &KeyPath,
        u: &UpstreamFile,
    ) -> (Option<Arc<CaType>>, Option<Arc<CertKey>>) {
        let tls = u.tls.unwrap_or(false);
        for (given, name) in [
            (u.ca.is_some(), "ca"),
            (u.client_cert.is_some(), "client-cert"),
            (u.sni.is_some(), "sni"),
        ] {
            if given && !tls {
                self.fail(
                    p.key(name),
                    "is for HTTPS to the origin, and this upstream speaks plain HTTP",
                    "add tls = true (the origin must then serve HTTPS), or remove it",
                );
            }
        }
        let ca = u.ca.as_deref().and_then(|raw| {
            let path = self.file_path(&p.key("ca"), raw)?;
            match read_ca(&path) {
                Ok(ca) => Some(ca),
                Err(why) => {
                    self.fail(
                        p.key("ca"),
                        why,
                        "give the CA certificate(s) that sign the origin's certificate, in PEM",
                    );
                    None
                }
            }
        });
        let client = u.client_cert.as_ref().and_then(|c| {
            let cp = p.key("client-cert");
            let cert = self.file_path(&cp.key("cert"), &c.cert);
            let key = self.file_path(&cp.key("key"), &c.key);
            let (cert, key) = (cert?, key?);
            match client_cert(&cert, &key) {
                Ok(ck) => Some(ck),
                Err((which, why)) => {
                    self.fail(
                        cp.key(which),
                        why,
                        "give the client certificate (PEM, with its intermediates) and the private key it was issued for",
                    );
                    None
                }
            }
        });
        (ca, client)
    }
}

fn read_ca(path: &std::path::Path) -> Result<Arc<CaType>, String> {
    // A regular file within a bound: a FIFO blocked `check` and every reload after it (found by
    // review), as it did for `[[tls]]`.
    let pem = crate::files::read_regular(path, 1024 * 1024)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{} is not PEM: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no certificate", path.display()));
    }
    crate::edge::tls::check_dates(&certs, path, crate::edge::tls::now_secs())?;
    // The root store takes what webpki can parse: refuse here what it would refuse later.
    let mut roots = rustls::RootCertStore::empty();
    for c in &certs {
        roots.add(c.clone()).map_err(|e| {
            format!(
                "{}: not a CA certificate rustls can use: {e}",
                path.display()
            )
        })?;
    }
    let wrapped: Vec<WrappedX509> = certs
        .into_iter()
        .map(|c| WrappedX509::new(c.to_vec(), parse_x509))
        .collect();
    Ok(Arc::from(wrapped.into_boxed_slice()))
}

/// The client pair, checked as `[[tls]]` pairs are (parsed, in date, the key the
/// certificate's): every certificate is parsed before Pingora's `CertKey` parses it again.
fn client_cert(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<Arc<CertKey>, (&'static str, String)> {
    let loaded = load_pair(cert, key, &[]).map_err(|e| match e {
        PairError::Cert(why) => ("cert", why),
        PairError::Key(why) => ("key", why),
        PairError::Mismatch => (
            "key",
            format!(
                "{} is not the key of the certificate in {}",
                key.display(),
                cert.display()
            ),
        ),
        PairError::Uncovered(h) => ("cert", format!("not valid for {h}")),
    })?;
    let chain = loaded.pair.cert.iter().map(|c| c.to_vec()).collect();
    Ok(Arc::new(CertKey::new(
        chain,
        loaded.key.secret_der().to_vec(),
    )))
}

#[cfg(test)]
mod tests {
    /// A `ca` that is no regular file is refused at once: a FIFO blocked `check` and every
    /// reload after it, and `/dev/zero` would be read until memory ran out (found by review).
    /// `sni` names the server of an HTTPS origin: without `tls` it is refused like `ca`.
    #[test]
    fn sni_without_tls_is_refused() {
        let text = |tls: &str| {
            format!(
                "[cookie]\nkeys = [\"test-key-0123456789-0123456789-0123456789\"]\n[[upstream]]\n\
                 name = \"shop\"\naddr = \"127.0.0.1:9000\"\nsni = \"shop.test\"\n{tls}"
            )
        };
        let parse =
            |t: &str| crate::config::parse(&text(t), "unit.toml", std::path::Path::new("."));
        let e = parse("").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            e.contains("upstream[0].sni") && e.contains("add tls = true"),
            "{e}"
        );
        assert!(parse("tls = true\n").is_ok());
    }

    #[test]
    fn a_ca_that_is_no_regular_file_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("ca.pem");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()));
        for path in [fifo.as_path(), std::path::Path::new("/dev/zero")] {
            let e = super::read_ca(path).err().unwrap_or_default();
            assert!(e.contains("not a regular file"), "{}: {e}", path.display());
        }
    }
}
