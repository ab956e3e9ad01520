//! Serde's and TOML's errors as `check` tells them: at their key, without the value (it may be
//! a secret), with a fix — the nearest known key for an unknown one.

use super::locate::Located;
use super::ConfigError;

/// A type or value error told without the value: the file's value may be a secret in the
/// wrong shape (a cookie key as a string where a list is expected, a Redis URL with its
/// password), and the problem is logged, printed by `check` and shown by `/readyz` after a
/// refused reload (found by review). `invalid type: string "…", expected a sequence` becomes
/// `invalid type: string, expected a sequence`; an unknown variant keeps no name either.
pub(super) fn without_value(message: &str) -> String {
    for head in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(head) {
            let Some(at) = rest.rfind(", expected ") else {
                return format!("{}(value not shown)", head);
            };
            let unexpected = &rest[..at];
            let kind = unexpected
                .split(['`', '"', '\''])
                .next()
                .unwrap_or("")
                .trim();
            let kind = if kind.is_empty() { "a value" } else { kind };
            return format!("{head}{kind}{}", &rest[at..]);
        }
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        return match rest.rfind(", expected ") {
            Some(at) => format!("unknown variant{}", &rest[at..]),
            None => "unknown variant".to_string(),
        };
    }
    message.to_string()
}

pub(super) fn serde_error(located: &Located, name: &str, e: &toml::de::Error) -> ConfigError {
    let span = e.span();
    let (line, col) = span
        .as_ref()
        .map(|s| located.line_col(s.start))
        .unwrap_or((1, 1));
    let key = span
        .as_ref()
        .and_then(|s| {
            located
                .path_at(s.start)
                .map(|p| p.to_string())
                .or_else(|| located.key_on_line(s.start))
        })
        .unwrap_or_default();
    let message = no_type_names(&without_value(e.message().trim()));
    let fix = if message.starts_with("unknown field") {
        match closest_field(&message) {
            Some(near) => format!("did you mean `{near}`? (keys are kebab-case)"),
            None => "check the spelling against conf/anteroom.toml (keys are kebab-case)".into(),
        }
    } else if message.starts_with("missing field") {
        "add the missing key".into()
    } else if message.starts_with("invalid type") {
        "check the value's type against conf/anteroom.toml (durations and addresses are quoted strings)".into()
    } else if message.contains("too large") {
        "use a smaller number: the README gives each key's range".into()
    } else if message.starts_with("invalid value") {
        // Found by review r84c: `threads = -1` was told to fix the TOML syntax.
        "give a value in the key's range (the README gives each key's range)".into()
    } else {
        "fix the TOML syntax at this position".into()
    };
    ConfigError {
        file: name.to_string(),
        line,
        col,
        key,
        problem: message,
        fix,
    }
}

/// serde's names of anteroom's types said as what the file holds (found by review:
/// "expected struct AutopilotFile").
fn no_type_names(message: &str) -> String {
    if let Some(at) = message.find("expected struct ") {
        return format!("{}expected a table", &message[..at]);
    }
    for unsigned in ["usize", "u64", "u32", "u16", "u8"] {
        if let Some(head) = message.strip_suffix(&format!("expected {unsigned}")) {
            return format!("{head}expected a whole number, 0 or more");
        }
    }
    message.to_string()
}

/// The known key nearest to an unknown one, from serde's "unknown field `x`, expected one of
/// `a`, `b`": the same but for case, `_` for `-`, or within a few letters.
fn closest_field(message: &str) -> Option<String> {
    let mut quoted = message.split('`').skip(1).step_by(2);
    let unknown = quoted.next()?.to_string();
    let kebab = unknown.to_ascii_lowercase().replace('_', "-");
    let known: Vec<&str> = quoted.collect();
    known
        .iter()
        .map(|k| (distance(&kebab, k), *k))
        .filter(|(d, k)| *d <= (k.len() / 4).max(1) + 1)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
        // A key named by one of its words (found by review r84c: `redis` and `url` were told
        // to check the spelling, not `redis-url`): the first that has it.
        .or_else(|| {
            known
                .iter()
                .copied()
                .find(|k| k.split('-').any(|word| word == kebab) && !kebab.is_empty())
        })
        .map(str::to_string)
}

/// Levenshtein distance over bytes (keys are ASCII).
fn distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_unknown_key_is_told_its_nearest_known_one() {
        let m = "unknown field `admit-per-secnd`, expected one of `name`, `paths`, `admit-per-second`, `max-active`";
        assert_eq!(super::closest_field(m).as_deref(), Some("admit-per-second"));
        let m = "unknown field `max_active`, expected one of `name`, `max-active`";
        assert_eq!(super::closest_field(m).as_deref(), Some("max-active"));
        let m = "unknown field `colour`, expected one of `name`, `paths`";
        assert_eq!(super::closest_field(m), None);
        // Named by one of its words (review r84c).
        let m = "unknown field `redis`, expected one of `backend`, `redis-url`, `redis-cluster`";
        assert_eq!(super::closest_field(m).as_deref(), Some("redis-url"));
        let m = "unknown field `url`, expected one of `backend`, `redis-url`, `timeout`";
        assert_eq!(super::closest_field(m).as_deref(), Some("redis-url"));
        assert_eq!(
            super::no_type_names("invalid value: integer `-1`, expected usize"),
            "invalid value: integer `-1`, expected a whole number, 0 or more"
        );
        assert_eq!(
            super::no_type_names("invalid type: boolean, expected struct AutopilotFile"),
            "invalid type: boolean, expected a table"
        );
    }
}
