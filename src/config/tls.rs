//! `[listen] https`, `redirect-http` and `[[tls]]`: certificates are read and checked here, so
//! that `check`, the start and a reload refuse a broken or mismatched pair with the key it is
//! about. Part of [`super::build`].

use std::collections::HashSet;
use std::path::PathBuf;

use super::build::{k, Builder};
use super::file::TlsFile;
use super::model::Listen;
use crate::edge::tls::{load_pair, PairError, TlsCert, TlsHost};

impl Builder<'_> {
    /// The `[[tls]]` entries, each loaded; checked against `[listen]`.
    pub(super) fn tls(&mut self, entries: &[TlsFile], listen: &Listen) -> Vec<TlsCert> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for (i, e) in entries.iter().enumerate() {
            let p = k("tls").index(i);
            let mut hosts = Vec::new();
            if e.hosts.is_empty() {
                self.fail(
                    p.key("hosts"),
                    "is required and may not be empty",
                    "list the host names this certificate is for, e.g. hosts = [\"shop.example.com\"]",
                );
            }
            for (j, raw) in e.hosts.iter().enumerate() {
                match TlsHost::parse(raw) {
                    Ok(h) if !seen.insert(h.to_string()) => self.fail(
                        p.key("hosts").index(j),
                        format!("{h} is listed by an earlier [[tls]] entry too"),
                        "list each host in one entry only",
                    ),
                    Ok(h) => hosts.push(h),
                    Err(why) => self.fail(
                        p.key("hosts").index(j),
                        format!("{raw:?} {why}"),
                        "write a host such as \"shop.example.com\" or \"*.example.com\"",
                    ),
                }
            }
            let cert = self.tls_path(&p, "cert", e.cert.as_deref());
            let key = self.tls_path(&p, "key", e.key.as_deref());
            let (Some(cert), Some(key)) = (cert, key) else {
                continue;
            };
            match load_pair(&cert, &key, &hosts) {
                Ok(loaded) => out.push(TlsCert {
                    hosts,
                    cert,
                    key,
                    pair: loaded.pair,
                    expires: loaded.expires,
                }),
                Err(PairError::Cert(why)) => self.fail(
                    p.key("cert"),
                    why,
                    "give the certificate chain in PEM (the server's certificate first, then its intermediates)",
                ),
                Err(PairError::Key(why)) => self.fail(
                    p.key("key"),
                    why,
                    "give the certificate's private key in PEM (PKCS#8, PKCS#1 or SEC1)",
                ),
                Err(PairError::Mismatch) => self.fail(
                    p.key("key"),
                    format!(
                        "{} is not the key of the certificate in {}",
                        key.display(),
                        cert.display()
                    ),
                    "give the private key the certificate was issued for",
                ),
                Err(PairError::Uncovered(host)) => self.fail(
                    p.key("hosts"),
                    format!("the certificate in {} is not valid for {host}", cert.display()),
                    "list only hosts the certificate names (its subject alternative names), or use a certificate that names them",
                ),
            }
        }
        if listen.https.is_some() && entries.is_empty() {
            self.fail(
                k("listen").key("https"),
                "an HTTPS listener needs a certificate",
                "add a [[tls]] entry with hosts, cert and key",
            );
        }
        if listen.https.is_none() && !entries.is_empty() {
            self.fail(
                k("tls"),
                "certificates are given but no HTTPS listener",
                "add https = \"0.0.0.0:8443\" (or :443) to [listen]",
            );
        }
        if listen.redirect_http && listen.https.is_none() {
            self.fail(
                k("listen").key("redirect-http"),
                "redirects to HTTPS, which is not served",
                "add https = \"0.0.0.0:443\" to [listen], or remove redirect-http",
            );
        }
        out
    }

    /// A certificate or key path: relative ones are next to the config file.
    fn tls_path(
        &mut self,
        p: &super::locate::KeyPath,
        name: &str,
        raw: Option<&str>,
    ) -> Option<PathBuf> {
        let Some(raw) = raw else {
            self.fail(
                p.key(name),
                "is required",
                format!(
                    "add {name} = \"/etc/anteroom/shop.{}\"",
                    if name == "cert" { "pem" } else { "key" }
                ),
            );
            return None;
        };
        self.file_path(&p.key(name), raw)
    }
}
