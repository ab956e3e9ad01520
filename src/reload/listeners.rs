//! A reload keeps the listeners running until a restart: an upstream the new file points at
//! one of them is refused, as `check` refuses one at the file's own listeners (found by
//! review: a file that moved `listen.http` and pointed the upstream at the old port passed,
//! and each request came back to anteroom, thousands a second, until a good file came).

use crate::config::{self, locate::KeyPath, locate::Located};

/// The problems of `new` (its listeners already set to the running ones), located in `path`.
pub(super) fn upstreams_at_running_listeners(
    new: &config::Config,
    path: &std::path::Path,
) -> Vec<config::ConfigError> {
    let found = config::upstreams_at_listeners(&new.upstreams, &new.listen);
    if found.is_empty() {
        return Vec::new();
    }
    let text = crate::files::read_regular_text(path, crate::files::MAX_CONFIG).unwrap_or_default();
    let located = Located::new(&text);
    found
        .into_iter()
        .map(|(i, key, a)| {
            let key = KeyPath::root().key("upstream").index(i).key(key);
            let (line, col) = located
                .span_of(&key)
                .map_or((0, 0), |s| located.line_col(s.start));
            config::ConfigError {
                file: path.display().to_string(),
                line,
                col,
                key: key.to_string(),
                problem: format!(
                    "{a} is one of anteroom's running listeners (they change only at a restart): every request would come back to anteroom"
                ),
                fix: "point the upstream at the shop's own server, on another port".to_string(),
            }
        })
        .collect()
}
