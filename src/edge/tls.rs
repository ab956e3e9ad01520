//! HTTPS termination: the certificates of `[[tls]]`, chosen by SNI, swapped on SIGHUP.
//!
//! A pair is read and checked when the configuration is loaded ([`load_pair`], by `check`, at
//! start and on reload): the chain and the key parse, the key is the certificate's, and the
//! certificate covers every host the entry lists. A configuration whose pair fails is refused
//! as a whole, so a reload with a broken certificate keeps the running one. The listener's
//! [`Resolver`] holds the table behind an `ArcSwap`: a reload swaps it without touching the
//! listener or a connection in flight.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ParsedCertificate, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// A host pattern of a `[[tls]]` entry: `shop.example.com` or `*.example.com` (one label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsHost {
    Exact(String),
    /// The part after `*.`: matches exactly one more label in front.
    Wildcard(String),
}

impl TlsHost {
    /// Parses a pattern; `Err` says why it is not one.
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        let lower = raw.trim().trim_end_matches('.').to_ascii_lowercase();
        let (wild, name) = match lower.strip_prefix("*.") {
            Some(rest) => (true, rest.to_string()),
            None => (false, lower),
        };
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
            return Err(
                "is not a host name (letters, digits, '-' and dots; `*.` in front for a wildcard)",
            );
        }
        if wild && !name.contains('.') {
            return Err("a wildcard needs at least two labels after `*.` (`*.example.com`)");
        }
        Ok(if wild {
            TlsHost::Wildcard(name)
        } else {
            TlsHost::Exact(name)
        })
    }

    /// A name this pattern stands for, to ask a certificate whether it covers it.
    fn sample(&self) -> String {
        match self {
            TlsHost::Exact(h) => h.clone(),
            TlsHost::Wildcard(d) => format!("anteroom-check.{d}"),
        }
    }
}

impl std::fmt::Display for TlsHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsHost::Exact(h) => f.write_str(h),
            TlsHost::Wildcard(d) => write!(f, "*.{d}"),
        }
    }
}

/// Each certificate of `chain` parses as X.509 and is valid now (`now` in seconds since the
/// epoch); `Err` says which is not and why. `Ok` is when the first one expires, as it says it.
pub fn check_dates(chain: &[CertificateDer<'_>], file: &Path, now: i64) -> Result<String, String> {
    let mut expires = String::new();
    for (i, der) in chain.iter().enumerate() {
        let which = if i == 0 {
            "the certificate".to_string()
        } else {
            format!("certificate {} of the chain", i + 1)
        };
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
            .map_err(|e| format!("{}: {which} is not X.509: {e}", file.display()))?;
        let v = cert.validity();
        if v.not_after.timestamp() < now {
            return Err(format!(
                "{}: {which} expired on {}",
                file.display(),
                v.not_after
            ));
        }
        if v.not_before.timestamp() > now {
            return Err(format!(
                "{}: {which} is not valid before {}",
                file.display(),
                v.not_before
            ));
        }
        if i == 0 {
            expires = v.not_after.to_string();
        }
    }
    Ok(expires)
}

/// Seconds since the epoch, for [`check_dates`].
pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// What is wrong with a pair, by the key it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairError {
    Cert(String),
    Key(String),
    /// The key is not the certificate's.
    Mismatch,
    /// The certificate does not cover this host.
    Uncovered(String),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A certificate chain and its key, read once and checked.
pub struct Loaded {
    pub pair: Arc<CertifiedKey>,
    /// The key as read (a client certificate hands it to Pingora as DER).
    pub key: PrivateKeyDer<'static>,
    /// When the certificate expires, as it says it.
    pub expires: String,
}

/// The largest certificate chain or key file read (a chain of a few certificates is a few KiB).
const MAX_PEM: u64 = 1024 * 1024;

/// Reads and checks a certificate chain and its key for `hosts`: only regular files (a FIFO
/// blocked every later reload, `/dev/zero` was read until memory ran out: found by review).
pub fn load_pair(cert: &Path, key: &Path, hosts: &[TlsHost]) -> Result<Loaded, PairError> {
    let cert_pem = crate::files::read_regular(cert, MAX_PEM)
        .map_err(|e| PairError::Cert(format!("cannot read {}: {e}", cert.display())))?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| {
            PairError::Cert(format!(
                "{} is not a PEM certificate chain: {}",
                cert.display(),
                pem_problem(&e)
            ))
        })?;
    if chain.is_empty() {
        return Err(PairError::Cert(format!(
            "{} holds no certificate",
            cert.display()
        )));
    }
    let expires = check_dates(&chain, cert, now_secs()).map_err(PairError::Cert)?;
    let key_pem = crate::files::read_regular(key, MAX_PEM)
        .map_err(|e| PairError::Key(format!("cannot read {}: {e}", key.display())))?;
    let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        PairError::Key(format!(
            "{} holds no private key: {}",
            key.display(),
            pem_problem(&e)
        ))
    })?;
    let pair =
        CertifiedKey::from_der(chain, private.clone_key(), &provider()).map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => PairError::Mismatch,
            other => PairError::Key(format!("{}: {other}", key.display())),
        })?;
    let end = pair
        .end_entity_cert()
        .map_err(|e| PairError::Cert(e.to_string()))?;
    let parsed = ParsedCertificate::try_from(end)
        .map_err(|e| PairError::Cert(format!("{}: {e}", cert.display())))?;
    for h in hosts {
        let covered = ServerName::try_from(h.sample())
            .ok()
            .is_some_and(|name| rustls::client::verify_server_name(&parsed, &name).is_ok());
        if !covered {
            return Err(PairError::Uncovered(h.to_string()));
        }
    }
    Ok(Loaded {
        pair: Arc::new(pair),
        key: private,
        expires,
    })
}

/// What is wrong with a PEM file, in words: the parser's own text gives the markers as lists
/// of byte values (found by review: a file cut short said `missing section end marker: [67,
/// 69, 82, …]`).
fn pem_problem(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    let text = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(64)]).into_owned();
    match e {
        Error::MissingSectionEnd { end_marker } => format!(
            "a section has no end line (-----END {}-----): the file is cut short or was joined wrongly",
            text(end_marker)
        ),
        Error::IllegalSectionStart { line } => {
            format!("a -----BEGIN line is malformed: {:?}", text(line))
        }
        Error::NoItemsFound => "no PEM section of this kind".to_string(),
        other => other.to_string(),
    }
}

/// One loaded `[[tls]]` entry.
#[derive(Debug, Clone)]
pub struct TlsCert {
    pub hosts: Vec<TlsHost>,
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
    pub pair: Arc<CertifiedKey>,
    /// When the certificate expires, as the certificate says it.
    pub expires: String,
}

/// Which certificate a name gets: exact names first, then a wildcard for one more label, then
/// the first entry (for a client without SNI or with a name no entry lists). Generic over what
/// is chosen, so that the choice is tested without certificates.
#[derive(Debug)]
pub struct SniTable<T> {
    exact: HashMap<String, T>,
    wild: HashMap<String, T>,
    default: Option<T>,
}

impl<T: Clone> SniTable<T> {
    pub fn new<'a>(entries: impl IntoIterator<Item = (&'a [TlsHost], T)>) -> Self {
        let mut t = SniTable {
            exact: HashMap::new(),
            wild: HashMap::new(),
            default: None,
        };
        for (hosts, value) in entries {
            t.default.get_or_insert_with(|| value.clone());
            for h in hosts {
                let (map, name) = match h {
                    TlsHost::Exact(n) => (&mut t.exact, n),
                    TlsHost::Wildcard(n) => (&mut t.wild, n),
                };
                // The first entry that lists a host keeps it (`check` refuses a repeat).
                map.entry(name.clone()).or_insert_with(|| value.clone());
            }
        }
        t
    }

    pub fn pick(&self, sni: Option<&str>) -> Option<T> {
        let found = sni.and_then(|name| {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            self.exact.get(&name).or_else(|| {
                let (_, parent) = name.split_once('.')?;
                self.wild.get(parent)
            })
        });
        found.or(self.default.as_ref()).cloned()
    }
}

fn table(certs: &[TlsCert]) -> SniTable<Arc<CertifiedKey>> {
    SniTable::new(certs.iter().map(|c| (c.hosts.as_slice(), c.pair.clone())))
}

/// The listener's certificate resolver; [`Resolver::swap`] on reload.
#[derive(Debug)]
pub struct Resolver {
    table: ArcSwap<SniTable<Arc<CertifiedKey>>>,
}

impl Resolver {
    pub fn new(certs: &[TlsCert]) -> Self {
        Self {
            table: ArcSwap::from_pointee(table(certs)),
        }
    }

    pub fn swap(&self, certs: &[TlsCert]) {
        self.table.store(Arc::new(table(certs)));
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.table.load().pick(hello.server_name())
    }
}

/// The listener's settings: the resolver, TLS 1.2 and 1.3 only (Pingora's rustls acceptor),
/// HTTP/2 and HTTP/1.1 by ALPN.
pub fn settings(resolver: Arc<Resolver>) -> pingora::Result<pingora::listeners::tls::TlsSettings> {
    let mut s = pingora::listeners::tls::TlsSettings::with_callbacks(Box::new(NoCallbacks))?;
    s.set_cert_resolver(resolver);
    s.enable_h2();
    Ok(s)
}

/// Pingora's rustls settings are built with callbacks or with files; ours are neither.
struct NoCallbacks;

#[async_trait::async_trait]
impl pingora::listeners::TlsAccept for NoCallbacks {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns_parse_and_refuse_what_is_not_one() {
        assert_eq!(
            TlsHost::parse("Shop.Example.com."),
            Ok(TlsHost::Exact("shop.example.com".into()))
        );
        assert_eq!(
            TlsHost::parse("*.example.com"),
            Ok(TlsHost::Wildcard("example.com".into()))
        );
        for bad in [
            "",
            "*.com",
            "a..b",
            "sh op.test",
            "*.*.test",
            "-a.test",
            "a.test:443",
            "*",
        ] {
            assert!(TlsHost::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_broken_pem_file_is_told_in_words() {
        let cut = "-----BEGIN CERTIFICATE-----\nMIIB\n";
        let e = CertificateDer::pem_slice_iter(cut.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap_err();
        assert_eq!(
            pem_problem(&e),
            "a section has no end line (-----END CERTIFICATE-----): the file is cut short or was joined wrongly"
        );
        let e = PrivateKeyDer::from_pem_slice(b"nothing here").unwrap_err();
        assert_eq!(pem_problem(&e), "no PEM section of this kind");
    }

    #[test]
    fn sni_picks_exact_then_one_label_wildcard_then_the_first_entry() {
        let h = |s: &[&str]| {
            s.iter()
                .map(|h| TlsHost::parse(h).unwrap())
                .collect::<Vec<_>>()
        };
        let (a, b, c) = (
            h(&["shop.test", "www.shop.test"]),
            h(&["*.shop.test"]),
            h(&["other.test", "shop.test"]),
        );
        let t = SniTable::new([
            (a.as_slice(), "a"),
            (b.as_slice(), "b"),
            (c.as_slice(), "c"),
        ]);
        assert_eq!(
            t.pick(Some("shop.test")),
            Some("a"),
            "the first entry keeps a repeated host"
        );
        assert_eq!(
            t.pick(Some("WWW.Shop.Test.")),
            Some("a"),
            "exact before wildcard, any case"
        );
        assert_eq!(t.pick(Some("api.shop.test")), Some("b"));
        assert_eq!(
            t.pick(Some("x.api.shop.test")),
            Some("a"),
            "a wildcard is one label: default"
        );
        assert_eq!(t.pick(Some("other.test")), Some("c"));
        assert_eq!(t.pick(Some("unknown.test")), Some("a"));
        assert_eq!(t.pick(None), Some("a"), "no SNI: the first entry");
        let empty: SniTable<&str> = SniTable::new([]);
        assert_eq!(empty.pick(Some("shop.test")), None);
    }
}
