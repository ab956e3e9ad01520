//! [`Pages`]: the templates compiled once at boot and the pages rendered from them.

use std::collections::BTreeMap;

use tera::{Context, Tera};

use super::*;

impl Pages {
    /// Compiles the built-in templates and every room's override. Config validation has already
    /// test-rendered the overrides, so an error here means the file changed since.
    pub fn load(config: &Config) -> Result<Self, String> {
        let mut tera = Tera::default();
        tera.autoescape_on(vec![".tera", ".html"]);
        tera.add_raw_template(WAITING, DEFAULT_WAITING)
            .map_err(|e| error_chain(&e))?;
        tera.add_raw_template(MESSAGE, DEFAULT_MESSAGE)
            .map_err(|e| error_chain(&e))?;
        tera.add_raw_template(challenge::NAME, challenge::TEMPLATE)
            .map_err(|e| error_chain(&e))?;
        tera.add_raw_template(countdown::NAME, countdown::TEMPLATE)
            .map_err(|e| error_chain(&e))?;
        let mut event_templates = std::collections::HashMap::new();
        for (i, room) in config.rooms.iter().enumerate() {
            for (event, page) in &room.event_pages {
                let Some(path) = &page.template else {
                    continue;
                };
                let name = format!("event-{}-{event}.html.tera", room.name());
                let text = read(path)?;
                tera.add_raw_template(&name, &text)
                    .map_err(|e| format!("{}: {}", path.display(), error_chain(&e)))?;
                event_templates.insert((i, event.clone()), name);
            }
        }
        let mut room_templates = Vec::new();
        for room in &config.rooms {
            match &room.template {
                None => room_templates.push(WAITING.to_string()),
                Some(path) => {
                    let name = format!("room-{}.html.tera", room.name());
                    let text = read(path)?;
                    tera.add_raw_template(&name, &text)
                        .map_err(|e| format!("{}: {}", path.display(), error_chain(&e)))?;
                    room_templates.push(name);
                }
            }
        }
        let style = assets::style();
        let mut scripts = Vec::new();
        let mut bases: Vec<BTreeMap<String, Context>> = Vec::new();
        for room in &config.rooms {
            let mut langs = BTreeMap::new();
            let mut base = BTreeMap::new();
            for (lang, t) in &room.texts {
                let (ctx, script) = base_context(room.name(), lang, t, &style);
                base.insert(lang.clone(), ctx);
                langs.insert(lang.clone(), script);
            }
            bases.push(base);
            scripts.push((room.name().to_string(), langs));
        }
        let assets = assets::Assets::new(style, scripts);
        let fast = config
            .rooms
            .iter()
            .zip(&bases)
            .map(|(room, langs)| {
                if room.template.is_some() {
                    return BTreeMap::new();
                }
                langs
                    .iter()
                    .filter_map(|(lang, base)| {
                        let pre = fast::Prerendered::build(&tera, WAITING, base);
                        if pre.is_none() {
                            tracing::warn!(room = room.name(), lang, "the waiting page could not be pre-rendered; Tera renders it per request");
                        }
                        Some((lang.clone(), pre?))
                    })
                    .collect()
            })
            .collect();
        Ok(Self {
            tera,
            room_templates,
            bases,
            fast,
            assets,
            event_templates,
        })
    }

    /// The waiting page: the room's constant context for `lang` (when `t` is that language's
    /// texts, as the proxy passes them) plus this answer's figures.
    /// `url`: where its refresh goes ([`super::refresh_url`]); `form`: the request was a form
    /// the shop did not get ([`Figures::form`]).
    pub fn waiting(
        &self,
        room: usize,
        status: &Status,
        lang: &str,
        t: &TextSet,
        (url, form): (&str, bool),
    ) -> String {
        if let Some(page) = self.event_page(room, status, lang, t, (url, form)) {
            return page;
        }
        let mut figures = Figures::new(status, t, url);
        figures.form = form;
        let refresh = figures.refresh_seconds;
        let name = self
            .room_templates
            .get(room)
            .map(String::as_str)
            .unwrap_or(WAITING);
        let pre = self
            .fast
            .get(room)
            .and_then(|f| f.get(lang))
            .filter(|_| self.is_room(room, &status.room));
        // A registrant's page shows their ticket: the pre-rendered page has no place for it.
        // Nor has it the note on a form (rare: rendered by Tera).
        let pre = pre.filter(|_| figures.event.is_none() && figures.placed_by.is_none() && !form);
        if let Some(page) = pre.and_then(|p| p.page(status.state, &figures)) {
            return page;
        }
        let base = self
            .bases
            .get(room)
            .and_then(|b| b.get(lang))
            .filter(|b| b.get("room").and_then(|r| r.as_str()) == Some(status.room.as_str()));
        let ctx = match base {
            Some(base) => Context::from_serialize(&figures).map(|figures| {
                let mut ctx = base.clone();
                ctx.extend(figures);
                ctx
            }),
            None => Context::from_serialize(WaitingView::with(status, lang, t, figures)),
        };
        let rendered = ctx.and_then(|ctx| self.tera.render(name, &ctx));
        match rendered {
            Ok(html) => html,
            Err(e) => {
                tracing::error!(room = status.room, error = %error_chain(&e), "waiting template failed; serving the fallback page");
                fallback_page(
                    "Please wait",
                    "You are in line. This page refreshes by itself.",
                    refresh,
                    url,
                )
            }
        }
    }

    /// Whether room index `room` is the room called `name` (its constant parts name it).
    fn is_room(&self, room: usize, name: &str) -> bool {
        self.bases
            .get(room)
            .and_then(|b| b.values().next())
            .and_then(|ctx| ctx.get("room"))
            .and_then(|r| r.as_str())
            == Some(name)
    }

    pub fn message(&self, view: &MessageView<'_>) -> String {
        let rendered =
            Context::from_serialize(view).and_then(|ctx| self.tera.render(MESSAGE, &ctx));
        match rendered {
            Ok(html) => html,
            Err(e) => {
                tracing::error!(error = %error_chain(&e), "message template failed; serving the fallback page");
                fallback_page(
                    view.title,
                    view.message,
                    view.retry_seconds.unwrap_or(0),
                    view.refresh_url,
                )
            }
        }
    }
}
