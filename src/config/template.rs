//! A room's `template`: found next to the config file or in the working directory, and
//! checked to render before the file is accepted.

use std::path::{Path, PathBuf};

use super::build::Builder;
use super::locate::KeyPath;

impl Builder<'_> {
    pub(super) fn template(&mut self, key: &KeyPath, raw: &str) -> Option<PathBuf> {
        self.template_checked(key, raw, crate::page::check_template)
    }

    /// A template checked by `check` (an event's is rendered in the states an event shows).
    pub(super) fn template_checked(
        &mut self,
        key: &KeyPath,
        raw: &str,
        check: fn(&str) -> Result<(), String>,
    ) -> Option<PathBuf> {
        let text = self.string(key, raw)?;
        let given = PathBuf::from(&text);
        let candidates = template_candidates(self.base_dir, &given);
        match candidates.iter().find(|c| c.is_file()) {
            Some(found) => {
                let checked = crate::files::read_regular_text(found, 1024 * 1024)
                    .map_err(|e| format!("cannot read {}: {e}", found.display()))
                    .and_then(|text| check(&text));
                match checked {
                    Ok(()) => Some(found.clone()),
                    Err(why) => {
                        self.fail(
                            key.clone(),
                            format!("template {} does not render: {why}", found.display()),
                            "fix the template (the README lists the variables it may use)",
                        );
                        None
                    }
                }
            }
            None if candidates.iter().any(|c| c.exists()) => {
                let there = candidates.iter().find(|c| c.exists()).unwrap_or(&given);
                self.fail(
                    key.clone(),
                    format!(
                        "{} is not a regular file (a directory or a device)",
                        there.display()
                    ),
                    "name the template file itself",
                );
                None
            }
            None => {
                let tried: Vec<String> =
                    candidates.iter().map(|c| c.display().to_string()).collect();
                self.fail(
                    key.clone(),
                    format!("template file not found (looked at {})", tried.join(" and ")),
                    "fix the path (relative paths are looked up next to the config file, then in the working directory)",
                );
                None
            }
        }
    }
}

/// Where a template path is looked for: as given when absolute, else next to the config file,
/// then in the working directory; each made absolute (so that a message names a file the
/// operator can find) and each once (run from the config's own folder, both are one).
fn template_candidates(base_dir: &Path, given: &Path) -> Vec<PathBuf> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let absolute = |p: PathBuf| if p.is_absolute() { p } else { cwd.join(p) };
    let tried = if given.is_absolute() {
        vec![given.to_path_buf()]
    } else {
        vec![
            absolute(base_dir.join(given)),
            absolute(given.to_path_buf()),
        ]
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for p in tried {
        let p = tidy(&p);
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// `a/./b` as `a/b` (`..` stays: behind a symbolic link it is not the folder above).
fn tidy(p: &Path) -> PathBuf {
    p.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}
