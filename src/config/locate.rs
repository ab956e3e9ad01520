//! Finding where a key sits in the operator's file, so every error can say `file:line:col`.
//!
//! The serde mirror forgets positions; `toml_edit` keeps them. Validation names the key it
//! rejects as a [`KeyPath`] and this module turns that into a span, or turns the span of a
//! serde error back into the key it belongs to.

use std::fmt;
use std::ops::Range;

use toml_edit::{ImDocument, Item, Table, Value};

/// One step into the document: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A key path such as `room[1].upstream`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPath(pub Vec<Seg>);

impl KeyPath {
    pub fn root() -> Self {
        Self(Vec::new())
    }

    pub fn key(&self, k: &str) -> Self {
        let mut v = self.0.clone();
        v.push(Seg::Key(k.to_string()));
        Self(v)
    }

    pub fn index(&self, i: usize) -> Self {
        let mut v = self.0.clone();
        v.push(Seg::Index(i));
        Self(v)
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) if n == 0 => write!(f, "{k}")?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

/// A parsed document that remembers positions.
pub struct Located {
    text: String,
    doc: Option<ImDocument<String>>,
}

#[derive(Clone, Copy)]
enum Node<'a> {
    Table(&'a Table),
    Item(&'a Item),
    Value(&'a Value),
}

impl Located {
    pub fn new(text: &str) -> Self {
        Self {
            text: text.to_string(),
            doc: ImDocument::parse(text.to_string()).ok(),
        }
    }

    /// 1-based line and column of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let col = before
            .rsplit('\n')
            .next()
            .map(|s| s.chars().count())
            .unwrap_or(0)
            + 1;
        (line, col)
    }

    /// The span of the value at `path`, or of the nearest enclosing thing that exists.
    pub fn span_of(&self, path: &KeyPath) -> Option<Range<usize>> {
        let doc = self.doc.as_ref()?;
        let mut best: Option<Range<usize>> = None;
        let mut node = Node::Table(doc.as_table());
        for seg in &path.0 {
            let next = match (node, seg) {
                (Node::Table(t), Seg::Key(k)) => {
                    t.get_key_value(k).map(|(key, it)| (key.span(), it))
                }
                (Node::Item(Item::Table(t)), Seg::Key(k)) => {
                    t.get_key_value(k).map(|(key, it)| (key.span(), it))
                }
                (Node::Item(Item::Value(Value::InlineTable(t))), Seg::Key(k))
                | (Node::Value(Value::InlineTable(t)), Seg::Key(k)) => {
                    t.get_key_value(k).map(|(key, it)| (key.span(), it))
                }
                (Node::Item(Item::ArrayOfTables(a)), Seg::Index(i)) => match a.get(*i) {
                    Some(t) => {
                        best = t.span().or(best);
                        node = Node::Table(t);
                        continue;
                    }
                    None => break,
                },
                (Node::Item(Item::Value(Value::Array(a))), Seg::Index(i))
                | (Node::Value(Value::Array(a)), Seg::Index(i)) => match a.get(*i) {
                    Some(v) => {
                        best = v.span().or(best);
                        node = Node::Value(v);
                        continue;
                    }
                    None => break,
                },
                _ => None,
            };
            match next {
                Some((key_span, item)) => {
                    best = item_span(item).or(key_span).or(best);
                    node = Node::Item(item);
                }
                None => break,
            }
        }
        best
    }

    /// The key written on the line of `offset`, under the table header above it, read from
    /// the text alone (`room.max-active`, without the array's index): for a document that did
    /// not parse, which [`Self::path_at`] cannot walk (found by review r84c: a number too
    /// large for TOML was told without its key).
    pub fn key_on_line(&self, offset: usize) -> Option<String> {
        let offset = offset.min(self.text.len());
        let start = self.text[..offset].rfind('\n').map_or(0, |i| i + 1);
        let line = self.text[start..].lines().next()?;
        let (name, _) = line.split_once('=')?;
        let name = name.trim().trim_matches('"');
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        if !plain(name) {
            return None;
        }
        let table = self.text[..start].lines().rev().find_map(|l| {
            let l = l.trim();
            let inner = l.strip_prefix('[')?.strip_suffix(']')?;
            Some(inner.trim_matches(['[', ']']).trim().to_string())
        });
        Some(match table.filter(|t| plain(t)) {
            Some(t) => format!("{t}.{name}"),
            None => name.to_string(),
        })
    }

    /// The deepest key whose key or value covers `offset`.
    pub fn path_at(&self, offset: usize) -> Option<KeyPath> {
        let doc = self.doc.as_ref()?;
        let mut path = KeyPath::root();
        if walk_table(doc.as_table(), offset, &mut path) {
            Some(path)
        } else {
            None
        }
    }
}

fn item_span(item: &Item) -> Option<Range<usize>> {
    match item {
        Item::Value(v) => v.span(),
        Item::Table(t) => t.span(),
        other => other.span(),
    }
}

fn contains(span: Option<Range<usize>>, offset: usize) -> bool {
    span.is_some_and(|s| s.start <= offset && offset < s.end.max(s.start + 1))
}

fn walk_table(t: &Table, offset: usize, path: &mut KeyPath) -> bool {
    for (k, _) in t.iter() {
        let Some((key, item)) = t.get_key_value(k) else {
            continue;
        };
        path.0.push(Seg::Key(k.to_string()));
        if walk_item(item, offset, path) || contains(key.span(), offset) {
            return true;
        }
        path.0.pop();
    }
    false
}

fn walk_item(item: &Item, offset: usize, path: &mut KeyPath) -> bool {
    match item {
        Item::Table(t) => walk_table(t, offset, path) || contains(t.span(), offset),
        Item::ArrayOfTables(a) => {
            for (i, t) in a.iter().enumerate() {
                path.0.push(Seg::Index(i));
                if walk_table(t, offset, path) || contains(t.span(), offset) {
                    return true;
                }
                path.0.pop();
            }
            false
        }
        Item::Value(v) => walk_value(v, offset, path),
        Item::None => false,
    }
}

fn walk_value(v: &Value, offset: usize, path: &mut KeyPath) -> bool {
    match v {
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                path.0.push(Seg::Index(i));
                if walk_value(x, offset, path) {
                    return true;
                }
                path.0.pop();
            }
            contains(a.span(), offset)
        }
        Value::InlineTable(t) => {
            for (k, _) in t.iter() {
                let Some((key, item)) = t.get_key_value(k) else {
                    continue;
                };
                path.0.push(Seg::Key(k.to_string()));
                if walk_item(item, offset, path) || contains(key.span(), offset) {
                    return true;
                }
                path.0.pop();
            }
            contains(t.span(), offset)
        }
        other => contains(other.span(), offset),
    }
}

#[cfg(test)]
mod tests {
    use super::Located;

    /// A document that does not parse is still told the key on the error's line (review r84c).
    #[test]
    fn the_key_on_a_line_is_read_from_the_text() {
        let text = "[cookie]\nkeys = [\"k\"]\n\n[[room]]\nname = \"s\"\nmax-active = 99999999999999999999\n";
        let at = text.find("9999").unwrap();
        assert_eq!(
            Located::new(text).key_on_line(at).as_deref(),
            Some("room.max-active")
        );
        let top = "threads = 1e999\n";
        assert_eq!(Located::new(top).key_on_line(3).as_deref(), Some("threads"));
        assert_eq!(Located::new("[a]\n= 1\n").key_on_line(5), None);
    }
}
