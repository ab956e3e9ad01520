//! `env:NAME` in any string value of the file: the variable's value stands in for it before
//! the file is read into its keys, so that every string key takes one (an address, a path, a
//! host, a method) and not only the secrets that used to resolve it themselves (found by
//! review: `paths = ["env:SALE_PATH"]` was read as a path that does not start with `/`). An
//! unset or empty variable is a problem at its key. Numbers and booleans are written inline.

use super::build::Problem;
use super::locate::KeyPath;

/// Which strings are resolved: those whose key (`room[0].paths[1]`) it accepts.
pub(super) type Scope<'a> = &'a dyn Fn(&str) -> bool;

/// Replaces every `env:NAME` string in `value` (at `key`) within `scope` by the variable's
/// value, with `get` reading the environment; returns the problems (unset, empty).
pub(super) fn resolve(
    value: &mut toml::Value,
    key: &KeyPath,
    get: &dyn Fn(&str) -> Option<String>,
    scope: Scope<'_>,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    walk(value, key, get, scope, &mut problems);
    problems
}

fn walk(
    value: &mut toml::Value,
    key: &KeyPath,
    get: &dyn Fn(&str) -> Option<String>,
    scope: Scope<'_>,
    problems: &mut Vec<Problem>,
) {
    match value {
        toml::Value::String(s) => {
            let Some(name) = s.strip_prefix("env:") else {
                return;
            };
            if !scope(&key.to_string()) {
                return;
            }
            match get(name) {
                Some(v) if !v.is_empty() => *s = v,
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
                walk(item, &key.index(i), get, scope, problems);
            }
        }
        toml::Value::Table(t) => {
            for (k, v) in t.iter_mut() {
                walk(v, &key.key(k), get, scope, problems);
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
hosts = ["env:UNSET"]
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
        let problems = resolve(&mut v, &KeyPath::root(), &env, &|_| true);
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
                    "room[0].queueing".to_string(),
                    "environment variable METHOD is empty".to_string()
                ),
            ]
        );
        // Out of scope: left as written, and no problem told.
        let mut w: toml::Value = toml::from_str("[admin]\ntoken = \"env:UNSET\"\n").unwrap();
        assert!(resolve(&mut w, &KeyPath::root(), &env, &|k| k
            .starts_with("listen."))
        .is_empty());
        assert_eq!(w["admin"]["token"].as_str(), Some("env:UNSET"));
    }
}
