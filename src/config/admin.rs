//! `[admin]`: the tokens of the admin API, each with a label (what the logs and the audit say,
//! never the token) and a role: `read` for dashboards and scrapers, `operate` for changes.
//! The single `token` of earlier configs is one operate token labelled `admin`. Part of
//! [`super::build`].

use std::fmt;

use subtle::ConstantTimeEq;

use super::build::Builder;
use super::file::AdminFile;
use super::locate::KeyPath;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminRole {
    /// `GET`: rooms, figures, metrics, the history of changes.
    Read,
    /// Everything `read` may, and changes: `PATCH` a room, empty its line.
    Operate,
}

impl AdminRole {
    pub fn as_str(self) -> &'static str {
        match self {
            AdminRole::Read => "read",
            AdminRole::Operate => "operate",
        }
    }
}

/// One admin token.
#[derive(Clone)]
pub struct AdminToken {
    pub label: String,
    pub value: String,
    pub role: AdminRole,
}

/// The admin API's tokens (none: it refuses every call but the probes).
#[derive(Clone, Default)]
pub struct AdminConfig {
    pub tokens: Vec<AdminToken>,
}

impl fmt::Debug for AdminConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<String> = self
            .tokens
            .iter()
            .map(|t| format!("{} ({}, <redacted>)", t.label, t.role.as_str()))
            .collect();
        f.debug_struct("AdminConfig")
            .field("tokens", &shown)
            .finish()
    }
}

impl AdminConfig {
    /// The token `given` is, compared in constant time with every token (which one matched,
    /// or whether any did, takes the same time).
    pub fn find(&self, given: &str) -> Option<&AdminToken> {
        let mut found = None;
        for t in &self.tokens {
            let same = given.len() == t.value.len()
                && bool::from(given.as_bytes().ct_eq(t.value.as_bytes()));
            if same && found.is_none() {
                found = Some(t);
            }
        }
        found
    }

    /// A token for this process's own calls (the demo, the CLI reading a config): an operate
    /// one if there is one, else any.
    pub fn own_token(&self) -> Option<&str> {
        self.tokens
            .iter()
            .find(|t| t.role == AdminRole::Operate)
            .or(self.tokens.first())
            .map(|t| t.value.as_str())
    }
}

impl Builder<'_> {
    pub(super) fn admin(&mut self, a: AdminFile) -> AdminConfig {
        let key = KeyPath::root().key("admin");
        let mut tokens = Vec::new();
        if let (Some(_), Some(_)) = (&a.token, &a.tokens) {
            self.fail(
                key.key("tokens"),
                "is set beside admin.token",
                "keep one: move the token into tokens = [{ label = \"admin\", value = \"env:...\", role = \"operate\" }]",
            );
            return AdminConfig::default();
        }
        if let Some(raw) = a.token.as_deref() {
            let k = key.key("token");
            if let Some(value) = self.token_value(&k, raw) {
                tokens.push(AdminToken {
                    label: "admin".to_string(),
                    value,
                    role: AdminRole::Operate,
                });
            }
        }
        for (i, t) in a.tokens.iter().flatten().enumerate() {
            let k = key.key("tokens").index(i);
            let label = t.label.trim();
            if !plain_label(label) {
                self.fail(
                    k.key("label"),
                    "must be a short name: 1 to 64 letters, digits, spaces or - _ . @ + : / ( ) # ' (nothing that shows as nothing or turns the text)",
                    "name who holds it, e.g. label = \"oncall\"",
                );
                continue;
            }
            if tokens.iter().any(|o: &AdminToken| o.label == label) {
                self.fail(
                    k.key("label"),
                    format!("{label:?} is used by another token"),
                    "give every token its own label (the logs and the audit name it)",
                );
                continue;
            }
            let role = match t.role.as_str() {
                "read" => AdminRole::Read,
                "operate" => AdminRole::Operate,
                other => {
                    self.fail(
                        k.key("role"),
                        format!("{other:?} is not a role"),
                        "role = \"read\" (GET only) or \"operate\" (changes too)",
                    );
                    continue;
                }
            };
            let Some(value) = self.token_value(&k.key("value"), &t.value) else {
                continue;
            };
            if tokens.iter().any(|o| o.value == value) {
                self.fail(
                    k.key("value"),
                    "is the value of another token",
                    "give every token its own value (openssl rand -hex 24)",
                );
                continue;
            }
            tokens.push(AdminToken {
                label: label.to_string(),
                value,
                role,
            });
        }
        AdminConfig { tokens }
    }

    /// The value of the one token this process's own calls use ([`AdminConfig::own_token`]:
    /// `token`, else the first operate one of `tokens`, else the first), the others not read:
    /// an operator's terminal needs no other holder's variable (found by review: every
    /// token's `env:` had to be set).
    pub(super) fn own_token_only(&mut self, a: AdminFile) -> Option<String> {
        let key = KeyPath::root().key("admin");
        if let Some(raw) = a.token.as_deref() {
            return self.token_value(&key.key("token"), raw);
        }
        let list = a.tokens.unwrap_or_default();
        let i = list
            .iter()
            .position(|t| t.role == "operate")
            .or((!list.is_empty()).then_some(0))?;
        self.token_value(&key.key("tokens").index(i).key("value"), &list[i].value)
    }

    fn token_value(&mut self, key: &KeyPath, raw: &str) -> Option<String> {
        let value = self.secret_string(key, raw)?;
        // A token travels in an `Authorization` header, which trims whitespace at its ends and
        // which the API reads as visible ASCII: any other value could never sign in (found by
        // review: a Kubernetes secret's trailing newline, read through `env:`, passed check
        // and locked the operator out).
        if let Some(c) = value.chars().find(|c| !c.is_ascii_graphic()) {
            self.fail(
                key.clone(),
                format!(
                    "holds {c:?}, which an Authorization header cannot carry (a newline at the \
                     end of a file read into an environment variable?)"
                ),
                "use visible ASCII only, with no spaces, e.g. openssl rand -hex 24",
            );
            return None;
        }
        if value.len() < 16 {
            self.fail(
                key.clone(),
                "is shorter than 16 characters",
                "use a long random token, e.g. openssl rand -hex 24",
            );
            return None;
        }
        Some(value)
    }
}

/// Whether a token's label reads as it is written wherever it is shown (logs, the changes'
/// history, the dashboard): 1 to 64 characters (not bytes: found by review), each a letter, a
/// digit, a space or one of `- _ . @ + : / ( ) # '`, and none of the letters that show nothing
/// (Unicode's default-ignorable code points: the Hangul fillers among them). Before (found by
/// review), direction overrides showed a label backwards, and a soft hyphen made two labels
/// that read the same.
fn plain_label(label: &str) -> bool {
    let shown =
        |c: char| (c.is_alphanumeric() || " -_.@+:/()#'".contains(c)) && !default_ignorable(c);
    let n = label.chars().count();
    (1..=64).contains(&n) && label.chars().all(shown)
}

/// Unicode's Default_Ignorable_Code_Point: characters shown as nothing.
fn default_ignorable(c: char) -> bool {
    matches!(c as u32,
        0x00AD | 0x034F | 0x061C | 0x115F..=0x1160 | 0x17B4..=0x17B5 | 0x180B..=0x180F
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
        | 0xFEFF | 0xFFA0 | 0xFFF0..=0xFFF8 | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A
        | 0xE0000..=0xE0FFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_is_counted_in_characters_and_shown_as_written() {
        assert!(plain_label("oncall"));
        assert!(plain_label(&"é".repeat(64)), "64 characters, 128 bytes");
        assert!(!plain_label(&"é".repeat(65)));
        assert!(!plain_label(""));
        assert!(plain_label("ci-bot (deploys) #2"));
        assert!(plain_label("운영팀"));
        for hidden in [
            "on\u{00AD}call",
            "a\u{034F}",
            "\u{0301}",
            "\u{3164}",
            "\u{FFA0}x",
            "a\u{2028}b",
            "\u{2800}",
            "x\u{E0041}",
            "x\u{FE0F}",
            "\u{0600}x",
            "admin\u{202E}llacno",
            "on\u{200B}call",
            "a\u{2066}b",
            "x\ty",
        ] {
            assert!(!plain_label(hidden), "{hidden:?}");
        }
    }

    fn cfg() -> AdminConfig {
        let t = |label: &str, value: &str, role| AdminToken {
            label: label.into(),
            value: value.into(),
            role,
        };
        AdminConfig {
            tokens: vec![
                t("grafana", "read-token-0123456789", AdminRole::Read),
                t("oncall", "operate-token-0123456789", AdminRole::Operate),
            ],
        }
    }

    #[test]
    fn a_token_is_found_by_its_whole_value_only() {
        let c = cfg();
        assert_eq!(
            c.find("read-token-0123456789").map(|t| t.role),
            Some(AdminRole::Read)
        );
        assert_eq!(
            c.find("operate-token-0123456789").map(|t| t.label.as_str()),
            Some("oncall")
        );
        for wrong in [
            "",
            "read-token-012345678",
            "read-token-01234567890",
            "READ-TOKEN-0123456789",
        ] {
            assert!(c.find(wrong).is_none(), "{wrong}");
        }
        assert_eq!(c.own_token(), Some("operate-token-0123456789"));
        assert_eq!(AdminConfig::default().own_token(), None);
        let shown = format!("{c:?}");
        assert!(shown.contains("oncall (operate") && !shown.contains("0123456789"));
    }
}
