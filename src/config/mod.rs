//! Operator configuration: one TOML file, read in two stages.
//!
//! [`mod@file`] mirrors the file with serde (unknown keys rejected), [`build`] validates it into the
//! typed [`model::Config`], and [`locate`] gives every complaint a `file:line:col`. Bad config
//! fails at boot, never under traffic.

mod admin;
mod build;
pub use build::upstreams_at_listeners;
mod bypass;
mod consume;
mod durations;
mod env;
mod events;
pub mod file;
mod limits;
pub use limits::event_rate_bound;
pub mod locate;
pub mod model;
mod origin_lock;
mod origins;
mod queueing;
mod room_parts;
mod rooms;
mod rules;
mod scrub;
mod serde_errors;
mod store;
mod template;
mod tls;
mod upstream_pool;
mod upstream_tls;
mod values;

use std::fmt;
use std::path::Path;

pub use build::valid_room_name;
pub use model::*;
pub use queueing::QueueMethod;

use locate::{KeyPath, Located};
use serde_errors::{serde_error, without_value};

/// One thing wrong with a config file, with where and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    /// The key at fault, such as `room[0].upstream`; empty when the file itself is unreadable.
    pub key: String,
    pub problem: String,
    pub fix: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Line 0: the key is not in the file (a room the reload leaves out); no place to name
        // (found by review: "live.toml:0:0").
        if self.line == 0 {
            write!(f, "{}: ", self.file)?;
        } else {
            write!(f, "{}:{}:{}: ", self.file, self.line, self.col)?;
        }
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        write!(f, "{}", self.problem)?;
        if !self.fix.is_empty() {
            write!(f, "\n  fix: {}", self.fix)?;
        }
        Ok(())
    }
}

/// Every problem found in one file.
#[derive(Debug, Clone)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl ConfigErrors {
    /// An error about the file as a whole (unreadable, or a problem found after validation).
    pub fn whole_file(file: &str, problem: impl Into<String>, fix: impl Into<String>) -> Self {
        Self(vec![ConfigError {
            file: file.to_string(),
            line: 1,
            col: 1,
            key: String::new(),
            problem: problem.into(),
            fix: fix.into(),
        }])
    }
}

fn read(path: &Path) -> Result<(String, String), ConfigErrors> {
    let name = path.display().to_string();
    let text = crate::files::read_text_at(path, crate::files::MAX_CONFIG).map_err(|(e, at)| {
        let fix = if at.is_some() {
            "save the file as UTF-8"
        } else {
            "check the --config path: a regular file of at most 16 MiB"
        };
        let mut errors = ConfigErrors::whole_file(&name, format!("cannot read the file: {e}"), fix);
        // Where the first byte that is not UTF-8 is (found by review: said at 1:1).
        if let (Some((line, col)), Some(first)) = (at, errors.0.first_mut()) {
            (first.line, first.col) = (line, col);
        }
        errors
    })?;
    Ok((name, text))
}

/// Reads and validates a config file.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let (name, text) = read(path)?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse(&text, &name, base)
}

/// Reads only the admin address and (when `need_token`) the admin token of a config file, for
/// the admin commands: a file with unknown keys or bad syntax still fails, but `env:` values
/// and settings they do not use are not looked at.
pub fn load_admin(path: &Path, need_token: bool) -> Result<AdminEndpoint, ConfigErrors> {
    let (name, text) = read(path)?;
    let base = path.parent().unwrap_or(Path::new("."));
    // Only the keys it reads are resolved (an operator's terminal need not hold the cookie
    // key's variable: re-review found every `env:` of the file required).
    // Of `admin.tokens`, only the entry it uses (the whole list when the list itself is one
    // variable): an operator's terminal need not hold the other holders' variables either
    // (found by review).
    let entry = match need_token.then(|| own_token_entry(&text)).flatten() {
        Some(Some(i)) => Some(format!("admin.tokens[{i}]")),
        Some(None) => Some("admin.tokens".to_string()),
        None => None,
    };
    let scope = |k: &str| {
        k == "listen.admin"
            || (need_token && k == "admin.token")
            || entry.as_deref().is_some_and(|e| {
                k.strip_prefix(e)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
            })
    };
    with_builder(&text, &name, base, &scope, true, |b, mirror| {
        b.admin_endpoint(mirror, need_token)
    })
}

/// Of a file's values, `listen.admin` and `[admin]` alone.
fn keep_admin_only(value: &mut toml::Value) {
    if let Some(t) = value.as_table_mut() {
        t.retain(|k, _| k == "listen" || k == "admin");
        if let Some(l) = t.get_mut("listen").and_then(toml::Value::as_table_mut) {
            l.retain(|k, _| k == "admin");
        }
    }
}

/// Which entry of `admin.tokens` the admin commands use: the first whose role is `"operate"`,
/// else the first (as `AdminConfig::own_token` chooses; a role written `env:NAME` is read from
/// the environment, as the instance reads it: found by review, the CLI took another token
/// than the instance would). `Some(None)`: the list itself is an `env:` value, read whole.
fn own_token_entry(text: &str) -> Option<Option<usize>> {
    let v: toml::Value = toml::from_str(text).ok()?;
    let tokens = v.get("admin")?.get("tokens")?;
    if tokens.as_str().is_some_and(|t| t.starts_with("env:")) {
        return Some(None);
    }
    let list = tokens.as_array()?;
    let role = |t: &toml::Value| {
        let r = t.get("role").and_then(toml::Value::as_str)?;
        match r.strip_prefix("env:") {
            Some(var) => std::env::var(var).ok(),
            None => Some(r.to_string()),
        }
    };
    list.iter()
        .position(|t| role(t).as_deref() == Some("operate"))
        .or((!list.is_empty()).then_some(0))
        .map(Some)
}

/// Validates config text; `name` is used in messages and `base_dir` for relative paths.
pub fn parse(text: &str, name: &str, base_dir: &Path) -> Result<Config, ConfigErrors> {
    let mut warnings = Vec::new();
    let mut config = with_builder(text, name, base_dir, &|_| true, false, |b, mirror| {
        let c = b.config(mirror, name);
        warnings = std::mem::take(&mut b.warnings);
        for p in &mut warnings {
            scrub::scrub(&b.hidden, p);
        }
        c
    })?;
    let located = Located::new(text);
    config.warnings = warnings
        .into_iter()
        .map(|p| positioned(&located, name, &p.key, p.what, p.fix).to_string())
        .collect();
    Ok(config)
}

/// Parses the text into the file mirror and builds from it with `f`; every problem the builder
/// found comes back with its `file:line:col`.
fn with_builder<T>(
    text: &str,
    name: &str,
    base_dir: &Path,
    scope: env::Scope<'_>,
    admin_only: bool,
    f: impl FnOnce(&mut build::Builder<'_>, file::FileConfig) -> T,
) -> Result<T, ConfigErrors> {
    let located = Located::new(text);
    let read: Result<file::FileConfig, _> = toml::from_str(text);
    let mut hidden = Vec::new();
    let mirror = match read {
        Ok(m) if !text.contains("env:") => m,
        // Every `env:NAME` string resolved first ([`env`]); a problem of the file itself is
        // told where the text has it.
        read => {
            let mut value: toml::Value = match toml::from_str(text) {
                Ok(v) => v,
                Err(e) => return Err(ConfigErrors(vec![serde_error(&located, name, &e)])),
            };
            let env::Resolved {
                problems,
                mut from_env,
            } = env::resolve(
                &mut value,
                &KeyPath::root(),
                &|n| std::env::var(n).ok(),
                scope,
            );
            let read_from_env = from_env.clone();
            if !problems.is_empty() {
                let mut errors: Vec<ConfigError> = problems
                    .into_iter()
                    .map(|p| positioned(&located, name, &p.key, p.what, p.fix))
                    .collect();
                errors.sort_by_key(|e| (e.line, e.col));
                return Err(ConfigErrors(errors));
            }
            // For the admin commands, only what they read: an `env:` value left unread where
            // a number, a boolean or a list goes could not be typed (found by review:
            // `admit-per-second = "env:RATE"` failed `anteroom health --config`).
            if admin_only {
                keep_admin_only(&mut value);
            }
            // A variable where the key takes a number, a boolean or a list: read as TOML.
            let typed = loop {
                match value.clone().try_into::<file::FileConfig>() {
                    Err(e) if env::retype(&mut value, &mut from_env, e.message()) => continue,
                    typed => break typed,
                }
            };
            hidden = env::leaves(&mut value, &read_from_env);
            match (typed, read) {
                (Ok(m), _) => m,
                // A problem of the file itself (not at an `env:` string): told where it is.
                (Err(_), Err(e)) if !e.message().contains("\"env:") => {
                    return Err(ConfigErrors(vec![serde_error(&located, name, &e)]))
                }
                (Err(e), _) => {
                    let fix = "check the environment variable's value against the key it stands in for (a number, a boolean or a list is read as TOML: 175, true, [\"/a\", \"/b\"])";
                    // Without the value, as on the file's own path (re-review: the
                    // variable's value, a cookie key or a URL with its password, was shown).
                    let problem = format!(
                        "after env: values were read: {}",
                        without_value(e.message().trim())
                    );
                    // At the key whose variable's value the message names, when one does;
                    // else where the values as read, written out as TOML and read again, have
                    // it (re-review: a value read as a number or list, then refused, was told
                    // at 1:1 without a key).
                    let key = env::named(&mut value, &from_env, e.message())
                        .or_else(|| key_in_resolved(&value));
                    let error = match key {
                        Some(key) => positioned(&located, name, &key, problem, fix.to_string()),
                        None => ConfigError {
                            file: name.to_string(),
                            line: 1,
                            col: 1,
                            key: String::new(),
                            problem,
                            fix: fix.to_string(),
                        },
                    };
                    return Err(ConfigErrors(vec![error]));
                }
            }
        }
    };
    let mut b = build::Builder {
        problems: Vec::new(),
        warnings: Vec::new(),
        base_dir,
        broken_upstreams: Vec::new(),
        hidden,
    };
    let built = f(&mut b, mirror);
    let hidden = std::mem::take(&mut b.hidden);
    for p in b.problems.iter_mut() {
        scrub::scrub(&hidden, p);
    }
    if b.problems.is_empty() {
        Ok(built)
    } else {
        Err(ConfigErrors(
            b.problems
                .into_iter()
                .map(|p| positioned(&located, name, &p.key, p.what, p.fix))
                .collect(),
        ))
    }
}

/// The key the file's values (with `env:` values put in) fail at: they are written out as TOML
/// and read again, where an error has a position.
fn key_in_resolved(value: &toml::Value) -> Option<KeyPath> {
    let text = toml::to_string(value).ok()?;
    let e = toml::from_str::<file::FileConfig>(&text).err()?;
    Located::new(&text).path_at(e.span()?.start)
}

fn positioned(
    located: &Located,
    name: &str,
    key: &KeyPath,
    problem: String,
    fix: String,
) -> ConfigError {
    let (line, col) = located
        .span_of(key)
        .map(|s| located.line_col(s.start))
        .unwrap_or((1, 1));
    ConfigError {
        file: name.to_string(),
        line,
        col,
        key: key.to_string(),
        problem,
        fix,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_key_not_in_the_file_is_told_without_a_place() {
        let e = |line| super::ConfigError {
            file: "live.toml".into(),
            line,
            col: line,
            key: "room".into(),
            problem: "room \"sale\" is gone from the file".into(),
            fix: String::new(),
        };
        assert_eq!(
            e(0).to_string(),
            "live.toml: room: room \"sale\" is gone from the file"
        );
        assert!(e(3).to_string().starts_with("live.toml:3:3: room: "));
    }
}
