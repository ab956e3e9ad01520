//! The built-in waiting page, rendered once per room, language and shape at load: what a
//! request does is to write its few figures between the constant pieces.
//!
//! A *shape* is what the template's branches depend on: the state, whether there is a
//! position, an ETA, an ETA range and an ETA text. Each shape is rendered with sentinel figures (numbers and
//! a text no page contains otherwise) and cut at them; a request writes the pieces and its own
//! figures (the ETA text HTML-escaped, as the template escapes it). At load every shape is also
//! rendered both ways with sample figures and compared byte for byte: a language whose pages
//! differ in any way is rendered by Tera as before. Operators' own templates always are (their
//! branches may depend on the figures themselves).

use std::collections::HashMap;
use std::fmt::Write;

use tera::{Context, Tera};

use super::{Figures, State};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Position,
    Waiting,
    EtaSeconds,
    RetryAfterMs,
    RefreshSeconds,
    ProgressPercent,
    EtaLow,
    EtaHigh,
    EtaText,
    RefreshUrl,
}

/// Sentinel figures: 9-digit numbers no real figure reaches in a page, and a text of private
/// use characters.
const NUMBERS: [(Field, u64); 8] = [
    (Field::Position, 987_654_321),
    (Field::Waiting, 987_654_322),
    (Field::EtaSeconds, 987_654_323),
    (Field::RetryAfterMs, 987_654_324),
    (Field::RefreshSeconds, 987_654_325),
    (Field::ProgressPercent, 987_654_326),
    (Field::EtaLow, 987_654_327),
    (Field::EtaHigh, 987_654_328),
];
const TEXT: &str = "\u{E000}eta\u{E001}";
/// The refresh's address: another text of private use characters.
const URL_TEXT: &str = "\u{E002}url\u{E003}";
/// The texts, each written HTML-escaped.
const TEXTS: [(Field, &str); 2] = [(Field::EtaText, TEXT), (Field::RefreshUrl, URL_TEXT)];

fn sentinel(f: Field) -> u64 {
    NUMBERS.iter().find(|(g, _)| *g == f).map_or(0, |(_, n)| *n)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Figure(Field),
}

/// What the template's branches depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Shape {
    state: State,
    position: bool,
    eta: bool,
    eta_range: bool,
    eta_text: bool,
}

impl Shape {
    fn of(state: State, v: &Figures<'_>) -> Self {
        Self {
            state,
            position: v.position > 0,
            eta: v.eta_seconds.is_some(),
            eta_range: v.eta_range.is_some(),
            eta_text: !v.eta_text.is_empty(),
        }
    }

    fn all() -> impl Iterator<Item = Shape> {
        [State::Waiting, State::Paused, State::Full, State::Admitted]
            .into_iter()
            .flat_map(|state| {
                (0..16).map(move |bits| Shape {
                    state,
                    position: bits & 1 != 0,
                    eta: bits & 2 != 0,
                    eta_text: bits & 4 != 0,
                    eta_range: bits & 8 != 0,
                })
            })
    }

    fn sentinels(self) -> Figures<'static> {
        Figures {
            state: self.state.as_str(),
            position: if self.position {
                sentinel(Field::Position)
            } else {
                0
            },
            waiting: sentinel(Field::Waiting),
            eta_seconds: self.eta.then(|| sentinel(Field::EtaSeconds)),
            eta_range: self
                .eta_range
                .then(|| [sentinel(Field::EtaLow), sentinel(Field::EtaHigh)]),
            eta_text: if self.eta_text {
                TEXT.to_string()
            } else {
                String::new()
            },
            // Not a figure the built-in page writes: a page that did would differ from Tera's
            // for the samples below (which say "rate"), and be rendered by Tera.
            held_by: "",
            retry_after_ms: sentinel(Field::RetryAfterMs),
            refresh_seconds: sentinel(Field::RefreshSeconds),
            progress_percent: sentinel(Field::ProgressPercent),
            refresh_url: URL_TEXT,
            event: None,
            placed_by: None,
            form: false,
        }
    }
}

/// Cuts a page rendered with sentinel figures into pieces.
fn cut(page: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut rest = page;
    loop {
        let next = NUMBERS
            .iter()
            .map(|(f, n)| (*f, n.to_string()))
            .chain(TEXTS.iter().map(|(f, t)| (*f, t.to_string())))
            .filter_map(|(f, s)| rest.find(&s).map(|at| (at, f, s.len())))
            .min_by_key(|(at, _, _)| *at);
        match next {
            Some((at, f, len)) => {
                if at > 0 {
                    out.push(Piece::Text(rest[..at].to_string()));
                }
                out.push(Piece::Figure(f));
                rest = &rest[at + len..];
            }
            None => {
                if !rest.is_empty() {
                    out.push(Piece::Text(rest.to_string()));
                }
                return out;
            }
        }
    }
}

/// One language's pages of a room, by shape.
pub(super) struct Prerendered {
    shapes: HashMap<Shape, Vec<Piece>>,
    size: usize,
}

impl Prerendered {
    /// Renders every shape of `template` with `base`; `None` if any shape does not render, or
    /// does not come out the same as Tera's own rendering of sample figures.
    pub(super) fn build(tera: &Tera, template: &str, base: &Context) -> Option<Self> {
        let render = |f: &Figures<'_>| -> Option<String> {
            let mut ctx = base.clone();
            ctx.extend(Context::from_serialize(f).ok()?);
            tera.render(template, &ctx).ok()
        };
        let mut shapes = HashMap::new();
        let mut size = 0;
        for shape in Shape::all() {
            let pieces = cut(&render(&shape.sentinels())?);
            size = size.max(
                pieces
                    .iter()
                    .map(|p| match p {
                        Piece::Text(t) => t.len(),
                        Piece::Figure(_) => 24,
                    })
                    .sum(),
            );
            shapes.insert(shape, pieces);
        }
        let pre = Self { shapes, size };
        for sample in samples() {
            let shape = Shape {
                state: sample.0,
                position: sample.1 > 0,
                eta: sample.3.is_some(),
                eta_range: sample.5.is_some(),
                eta_text: !sample.4.is_empty(),
            };
            let figures = Figures {
                state: sample.0.as_str(),
                position: sample.1,
                waiting: sample.2,
                eta_seconds: sample.3,
                eta_range: sample.5,
                eta_text: sample.4.to_string(),
                held_by: "rate",
                retry_after_ms: 1234,
                refresh_seconds: 2,
                progress_percent: 37,
                refresh_url: "/products/a%20b;x?q=<1>&r='2'\"",
                event: None,
                placed_by: None,
                form: false,
            };
            if pre.write(shape, &figures)? != render(&figures)? {
                return None;
            }
        }
        Some(pre)
    }

    /// The page for these figures (`None` only for a shape that was not built).
    fn write(&self, shape: Shape, f: &Figures<'_>) -> Option<String> {
        let pieces = self.shapes.get(&shape)?;
        let mut out = String::with_capacity(self.size);
        for p in pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Figure(Field::EtaText) => out.push_str(&tera::escape_html(&f.eta_text)),
                Piece::Figure(Field::RefreshUrl) => out.push_str(&tera::escape_html(f.refresh_url)),
                Piece::Figure(field) => {
                    let n = match field {
                        Field::Position => f.position,
                        Field::Waiting => f.waiting,
                        Field::EtaSeconds => f.eta_seconds.unwrap_or(0),
                        Field::EtaLow => f.eta_range.map_or(0, |r| r[0]),
                        Field::EtaHigh => f.eta_range.map_or(0, |r| r[1]),
                        Field::RetryAfterMs => f.retry_after_ms,
                        Field::RefreshSeconds => f.refresh_seconds,
                        Field::ProgressPercent | Field::EtaText | Field::RefreshUrl => {
                            f.progress_percent
                        }
                    };
                    let _ = write!(out, "{n}");
                }
            }
        }
        Some(out)
    }

    /// The page of an answer in `state` with these figures.
    pub(super) fn page(&self, state: State, figures: &Figures<'_>) -> Option<String> {
        self.write(Shape::of(state, figures), figures)
    }
}

/// Figures to compare both renderings with: (state, position, waiting, eta, eta text, range).
type Sample = (State, u64, u64, Option<u64>, &'static str, Option<[u64; 2]>);

fn samples() -> Vec<Sample> {
    vec![
        (State::Waiting, 1, 1, Some(0), "less than a minute", None),
        (State::Waiting, 42, 1000, Some(90), "about 2 minutes", None),
        (
            State::Waiting,
            123_456,
            999_999,
            Some(86_400),
            "<about> & \"a day\"",
            None,
        ),
        (State::Waiting, 0, 0, None, "", None),
        (
            State::Waiting,
            1,
            4,
            None,
            "when someone leaves the shop",
            None,
        ),
        (
            State::Waiting,
            42,
            1000,
            Some(90),
            "1 to 3 minutes",
            Some([63, 135]),
        ),
        (State::Paused, 7, 8, None, "", None),
        (State::Full, 0, 5000, None, "", None),
        (State::Admitted, 0, 3, Some(0), "", None),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_cut_at_its_sentinels() {
        let page = format!("a987654321b{TEXT}c987654326");
        assert_eq!(
            cut(&page),
            vec![
                Piece::Text("a".into()),
                Piece::Figure(Field::Position),
                Piece::Text("b".into()),
                Piece::Figure(Field::EtaText),
                Piece::Text("c".into()),
                Piece::Figure(Field::ProgressPercent),
            ]
        );
    }
}
