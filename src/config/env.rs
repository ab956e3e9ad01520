//! `env:NAME` in any string value of the file: the variable's value stands in for it before
//! the file is read into its keys, so that every string key takes one (an address, a path, a
//! host, a method) and not only the secrets that used to resolve it themselves (found by
//! review: `paths = ["env:SALE_PATH"]` was read as a path that does not start with `/`). An
//! unset or empty variable is a problem at its key. Where the key takes a number, a boolean
//! or a list, the variable's value is read as TOML ([`retype`]): `admit-per-second =
//! "env:RATE"` with `RATE=175`, `paths = "env:PATHS"` with `PATHS='["/a", "/b"]'` (found by
//! review: the brief lets any value be `env:NAME`, and the rate and the cap are what a
//! deployment most wants from its environment).

use super::build::Problem;
use super::locate::{KeyPath, Seg};

/// Which strings are resolved: those whose key (`room[0].paths[1]`) it accepts.
pub(super) type Scope<'a> = &'a dyn Fn(&str) -> bool;

/// What [`resolve`] did: the problems (unset, empty), and the keys a variable stood in for.
#[derive(Debug, Default)]
pub(super) struct Resolved {
    pub problems: Vec<Problem>,
    pub from_env: Vec<KeyPath>,
}

/// Replaces every `env:NAME` string in `value` (at `key`) within `scope` by the variable's
/// value, with `get` reading the environment.
pub(super) fn resolve(
    value: &mut toml::Value,
    key: &KeyPath,
    get: &dyn Fn(&str) -> Option<String>,
    scope: Scope<'_>,
) -> Resolved {
    let mut out = Resolved::default();
    walk(value, key, get, scope, &mut out);
    out
}

/// After the keys were read with `message` (serde names the string it did not expect: `invalid
/// type: string "175", expected f64`): a string a variable stood in for (one of `from_env`)
/// that the message names, and that reads as a TOML number, boolean, list or table, is put
/// in as that; it leaves `from_env`. Whether one was: the keys are then read again. A string
/// written in the file is never retyped (`admit-per-second = "175"` stays an error).
pub(super) fn retype(value: &mut toml::Value, from_env: &mut Vec<KeyPath>, message: &str) -> bool {
    let found = from_env
        .iter()
        .enumerate()
        .find_map(|(i, k)| match at(value, k) {
            Some(toml::Value::String(s)) if names(message, s) => as_toml(s).map(|typed| (i, typed)),
            _ => None,
        });
    let Some((i, typed)) = found else {
        return false;
    };
    if let Some(node) = at(value, &from_env[i]) {
        *node = typed;
    }
    from_env.remove(i);
    true
}

/// The key among `from_env` whose variable's value `message` names.
pub(super) fn named(
    value: &mut toml::Value,
    from_env: &[KeyPath],
    message: &str,
) -> Option<KeyPath> {
    from_env
        .iter()
        .find(|k| matches!(at(value, k), Some(toml::Value::String(s)) if names(message, s)))
        .cloned()
}

/// Whether serde's `message` names the string `s` as the one it did not expect.
fn names(message: &str, s: &str) -> bool {
    message.contains(&format!("string {s:?}"))
}

/// `text` read as one TOML value other than a string.
fn as_toml(text: &str) -> Option<toml::Value> {
    let mut t: toml::Table = toml::from_str(&format!("v = {text}")).ok()?;
    t.remove("v").filter(|v| !v.is_str())
}

/// The strings at and under `keys` in `value`, each with its key: what the variables put in,
/// read as TOML or not (kept out of every problem at those keys: see [`super::scrub`]).
pub(super) fn leaves(value: &mut toml::Value, keys: &[KeyPath]) -> Vec<(KeyPath, String)> {
    fn collect(v: &toml::Value, key: &KeyPath, out: &mut Vec<(KeyPath, String)>) {
        match v {
            toml::Value::String(s) => out.push((key.clone(), s.clone())),
            toml::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    collect(item, &key.index(i), out);
                }
            }
            toml::Value::Table(t) => {
                for (k, item) in t {
                    collect(item, &key.key(k), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for k in keys {
        if let Some(v) = at(value, k) {
            collect(v, k, &mut out);
        }
    }
    out
}

fn at<'a>(value: &'a mut toml::Value, key: &KeyPath) -> Option<&'a mut toml::Value> {
    key.0.iter().try_fold(value, |v, seg| match seg {
        Seg::Key(k) => v.get_mut(k.as_str()),
        Seg::Index(i) => v.get_mut(*i),
    })
}

fn walk(
    value: &mut toml::Value,
    key: &KeyPath,
    get: &dyn Fn(&str) -> Option<String>,
    scope: Scope<'_>,
    out: &mut Resolved,
) {
    match value {
        toml::Value::String(s) => {
            let Some(name) = s.strip_prefix("env:") else {
                return;
            };
            if !scope(&key.to_string()) {
                return;
            }
            let problems = &mut out.problems;
            if name.is_empty() {
                problems.push(Problem {
                    key: key.clone(),
                    what: "\"env:\" names no environment variable".to_string(),
                    fix: "write env:NAME, NAME the variable to read, or the value inline"
                        .to_string(),
                });
                return;
            }
            match get(name) {
                Some(v) if !v.is_empty() => {
                    *s = v;
                    out.from_env.push(key.clone());
                }
                Some(_) => problems.push(Problem {
                    key: key.clone(),
                    what: format!("environment variable {name} is empty"),
                    fix: format!("set {name} to a value, or write the value inline"),
                }),
                None => problems.push(Problem {
                    key: key.clone(),
                    what: format!("environment variable {name} is not set"),
                    fix: format!("export {name}=..., or write the value inline"),
                }),
            }
        }
        toml::Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                walk(item, &key.index(i), get, scope, out);
            }
        }
        toml::Value::Table(t) => {
            for (k, v) in t.iter_mut() {
                walk(v, &key.key(k), get, scope, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_string_is_resolved_and_a_missing_variable_is_named_at_its_key() {
        let mut v: toml::Value = toml::from_str(
            r#"
[[room]]
name = "sale"
paths = ["/products", "env:SALE_PATH"]
queueing = "env:METHOD"
hosts = ["env:UNSET", "env:"]
note = "environ: not a reference"
rate = 5
"#,
        )
        .unwrap();
        let env = |n: &str| match n {
            "SALE_PATH" => Some("/orders".to_string()),
            "METHOD" => Some(String::new()),
            _ => None,
        };
        let problems = resolve(&mut v, &KeyPath::root(), &env, &|_| true).problems;
        assert_eq!(v["room"][0]["paths"][1].as_str(), Some("/orders"));
        assert_eq!(
            v["room"][0]["note"].as_str(),
            Some("environ: not a reference")
        );
        let mut seen: Vec<(String, String)> = problems
            .iter()
            .map(|p| (p.key.to_string(), p.what.clone()))
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            vec![
                (
                    "room[0].hosts[0]".to_string(),
                    "environment variable UNSET is not set".to_string()
                ),
                (
                    "room[0].hosts[1]".to_string(),
                    "\"env:\" names no environment variable".to_string()
                ),
                (
                    "room[0].queueing".to_string(),
                    "environment variable METHOD is empty".to_string()
                ),
            ]
        );
        // Out of scope: left as written, and no problem told.
        let mut w: toml::Value = toml::from_str("[admin]\ntoken = \"env:UNSET\"\n").unwrap();
        assert!(resolve(&mut w, &KeyPath::root(), &env, &|k| k
            .starts_with("listen."))
        .problems
        .is_empty());
        assert_eq!(w["admin"]["token"].as_str(), Some("env:UNSET"));
    }
}
