//! Values read from the environment or a file (`env:`, `file:`) are never told in a problem
//! at their keys: `check`, the log and `/readyz` show the problems.

use super::build;
use super::locate::KeyPath;

/// A problem without the `hidden` values (read from the environment or a file) of its key,
/// the keys under it and the key it is under, as written or as `{:?}` quotes them: each is
/// told as `(a value read from env: or file:)`. Scoped by key, not by text: a value is not
/// looked for in another key's problem (re-review: a variable's value `shop` hid the word in
/// every message, a host written in the file too), and every string a variable put in is
/// known, also one inside a list or table read as TOML (re-review: a token put in as a role
/// inside `tokens = "env:TOKS"` was quoted). Values under four characters are hidden only
/// where quoted (a rate of `5` would hide every 5), and the longest go first.
pub(super) fn scrub(hidden: &[(KeyPath, String)], p: &mut build::Problem) {
    const SHOWN: &str = "(a value read from env: or file:)";
    let key = p.key.to_string();
    let related = |k: &KeyPath| {
        let k = k.to_string();
        let under = |a: &str, b: &str| {
            a.strip_prefix(b)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        };
        under(&key, &k) || under(&k, &key)
    };
    let mut forms: Vec<(String, String)> = hidden
        .iter()
        .filter(|(k, v)| !v.is_empty() && related(k))
        .flat_map(|(_, v)| {
            let quoted = format!("{v:?}");
            let mut forms = vec![(quoted, format!("\"{SHOWN}\""))];
            if v.chars().count() >= 4 {
                forms.push((v.clone(), SHOWN.to_string()));
                let inner = forms[0].0[1..forms[0].0.len() - 1].to_string();
                forms.push((inner, SHOWN.to_string()));
            }
            // The pieces a key splits its value into (`consume = "POST …"`), long enough
            // not to be a common word (re-review).
            for piece in v
                .split_whitespace()
                .filter(|p| p.len() >= 8 && p.len() < v.len())
            {
                let quoted = format!("{piece:?}");
                forms.push((quoted, format!("\"{SHOWN}\"")));
                forms.push((piece.to_string(), SHOWN.to_string()));
            }
            forms
        })
        .collect();
    forms.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
    forms.dedup();
    for (v, shown) in &forms {
        for text in [&mut p.what, &mut p.fix] {
            if text.contains(v.as_str()) {
                *text = text.replace(v.as_str(), shown);
            }
        }
    }
    // A parser's own words may quote a piece of the value (`unknown time unit "SoEDQBZiZCZA"`
    // of a token put in as a duration: found by review): any quoted piece of a value is hidden.
    let values: Vec<&str> = hidden
        .iter()
        .filter(|(k, v)| !v.is_empty() && related(k))
        .map(|(_, v)| v.as_str())
        .collect();
    for text in [&mut p.what, &mut p.fix] {
        *text = hide_quoted_pieces(text, &values, SHOWN);
    }
}

/// `text` with every quoted piece (`"…"`, as `{:?}` writes it) of at least two characters that
/// is part of one of `values` told as `shown`.
fn hide_quoted_pieces(text: &str, values: &[&str], shown: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('"') {
        out.push_str(&rest[..=open]);
        let after = &rest[open + 1..];
        let mut escaped = false;
        let close = after.char_indices().find_map(|(i, c)| {
            let end = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            end.then_some(i)
        });
        let Some(close) = close else {
            out.push_str(after);
            return out;
        };
        let piece = &after[..close];
        let unescaped = piece.replace("\\\"", "\"").replace("\\\\", "\\");
        if piece.chars().count() >= 2 && values.iter().any(|v| v.contains(unescaped.as_str())) {
            out.push_str(shown);
        } else {
            out.push_str(piece);
        }
        out.push('"');
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn values_read_from_outside_are_not_told_at_their_keys() {
        use super::super::build::Problem;
        use super::super::locate::KeyPath;
        let at = |k: &str| KeyPath::root().key(k);
        let hidden = vec![
            (at("timeout"), "redis://:pw@h:1".to_string()),
            (at("role"), "pw\"x".to_string()),
            (at("rate"), "175".to_string()),
        ];
        let told = |key: &str, what: &str| {
            let mut p = Problem {
                key: at(key),
                what: what.to_string(),
                fix: String::new(),
            };
            super::scrub(&hidden, &mut p);
            p.what
        };
        assert_eq!(
            told("timeout", "\"redis://:pw@h:1\" is not a duration"),
            "\"(a value read from env: or file:)\" is not a duration"
        );
        // As `{:?}` quotes it; a short value only where quoted.
        assert_eq!(
            told("role", "\"pw\\\"x\" is not a role"),
            "\"(a value read from env: or file:)\" is not a role"
        );
        assert_eq!(
            told("rate", "\"175\" is not a number; at most 1750"),
            "\"(a value read from env: or file:)\" is not a number; at most 1750"
        );
        // Another key's problem keeps its words.
        assert_eq!(
            told("hosts", "\"redis://:pw@h:1\" is not a host"),
            "\"redis://:pw@h:1\" is not a host"
        );
        // A piece of the value a parser quotes (found by review: a token put in as a
        // duration showed twelve of its characters).
        assert_eq!(
            told(
                "timeout",
                "\"(x)\" is not a duration (unknown time unit \"edis\", supported units: \"ms\")"
            ),
            "\"(x)\" is not a duration (unknown time unit \"(a value read from env: or file:)\", supported units: \"ms\")"
        );
        assert_eq!(
            told("role", "a role \"w\\\"x\""),
            "a role \"(a value read from env: or file:)\""
        );
    }

    /// Whatever a value put in as a duration is, no piece of four characters of it is told.
    #[test]
    fn no_piece_of_a_value_read_from_outside_is_told() {
        use super::super::locate::KeyPath;
        for secret in [
            "13SoEDQBZiZCZA5zHuZ/xRyUrNzJZaIvnZuD3mMpWKw=",
            "99secretsauce",
            "5 minutes and a password",
            "redis://user:hunter22@db.internal:6379/0",
        ] {
            let mut b = super::super::build::Builder {
                problems: Vec::new(),
                warnings: Vec::new(),
                base_dir: std::path::Path::new("."),
                broken_upstreams: Vec::new(),
                hidden: Vec::new(),
            };
            let key = KeyPath::root().key("session-ttl");
            b.hidden.push((key.clone(), secret.to_string()));
            let _ = b.duration(&key, Some(secret), std::time::Duration::from_secs(1));
            assert!(!b.problems.is_empty(), "{secret}");
            for p in &mut b.problems {
                super::scrub(&b.hidden, p);
                let told = format!("{} {}", p.what, p.fix);
                let chars: Vec<char> = secret.chars().collect();
                for w in chars.windows(5) {
                    let piece: String = w.iter().collect();
                    if piece.chars().all(|c| c.is_alphanumeric()) {
                        assert!(!told.contains(&piece), "{piece:?} of {secret:?} in {told}");
                    }
                }
            }
        }
    }
}
