//! The CLI commands: `run`, `check`, `rooms`, `room`, `health` (`demo` lives in
//! [`crate::demo`]). `main.rs` parses arguments and calls these.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::admin::client::{self as admin_client, Target};

use crate::config;
use crate::server;

mod summary;
use summary::summary;

/// Writes to stdout like `print!`; a reader that went away (`anteroom check | head`) ends the
/// command quietly with SIGPIPE's exit status (141), as a C tool would, not with a panic.
macro_rules! out {
    ($($t:tt)*) => { write_out(format_args!($($t)*)) };
}

/// [`out!`] with a newline.
macro_rules! outln {
    ($($t:tt)*) => { write_out(format_args!("{}\n", format_args!($($t)*))) };
}

/// Writes a line to stderr like `eprintln!`, which panics when stderr cannot be written
/// (`anteroom check 2>/dev/full` did, found by review); a message nobody can read is dropped.
macro_rules! errln {
    ($($t:tt)*) => { write_err(format_args!("{}\n", format_args!($($t)*))) };
}

fn write_err(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let whole = args.to_string();
    let text = printable(&whole);
    let mut stderr = std::io::stderr().lock();
    let _ = stderr
        .write_all(text.as_bytes())
        .and_then(|()| stderr.flush());
}

fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let whole = args.to_string();
    let text = printable(&whole);
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
    }
}

/// `anteroom check --config FILE [--connect]`: validate and summarise, or explain what is
/// wrong; with `connect`, also reach the store and the upstreams (exit 1 if one fails).
pub fn check(path: &Path, connect: bool) -> ExitCode {
    match config::load(path) {
        Ok(c) => {
            for w in &c.warnings {
                errln!("warning: {w}");
            }
            out!("{}", summary(&c));
            if !connect {
                outln!("  (nothing was connected to, only host names looked up: --connect reaches the store and the upstreams)");
                return ExitCode::SUCCESS;
            }
            let reached = crate::probe::reach(&c);
            out!("{}", crate::probe::report(&reached));
            if reached.iter().all(|r| r.ok) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            errln!("{e}");
            ExitCode::from(2)
        }
    }
}

/// `anteroom run --config FILE [--upgrade]`: serve until a signal says stop.
pub fn run(path: &Path, upgrade: bool) -> ExitCode {
    crate::reload::catch_early_hangups();
    let config = match config::load(path) {
        Ok(c) => c,
        Err(e) => {
            errln!("{e}");
            return ExitCode::from(2);
        }
    };
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    tracing::info!(
        config = %path.display(),
        public = %config.listen.http,
        admin = %config.listen.admin,
        store = %config.store.backend,
        rooms = config.rooms.len(),
        upgrade,
        "starting"
    );
    match server::build(config, upgrade) {
        Ok(mut built) => {
            let reloader = crate::reload::Reloader::new(
                built.current.clone(),
                path.to_path_buf(),
                built.reloaded.clone(),
            );
            built
                .server
                .add_service(pingora::services::background::background_service(
                    "reload", reloader,
                ));
            server::serve(built.server, built.current)
        }
        Err(e) => {
            errln!("{e}");
            ExitCode::from(1)
        }
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Logs to stderr, filtered by `ANTEROOM_LOG` (default `info`; e.g.
/// `info,anteroom::access=off` drops the access log). Pingora's own debug logs print whole
/// request headers, cookies included, and its start and stop steps are ~25 `info` lines, so
/// its crates stay at `warn` unless the filter names them (`ANTEROOM_LOG=debug,pingora_proxy=debug`).
pub fn init_logging(format: LogFormat) {
    let mut spec = std::env::var("ANTEROOM_LOG").unwrap_or_else(|_| "info".to_string());
    // Pingora's own start and stop lines (~25 at each Ctrl-C) say nothing an operator acts on;
    // anteroom logs the start, the signal and the failures itself.
    if !spec.contains("pingora") {
        spec.push_str(",pingora_core=warn,pingora_proxy=warn");
    }
    // The admin listener's server (Pingora's `http_app`) logs a request it cannot parse with
    // its raw head, `Authorization` and all (found by review: a token file with a `\r` put
    // the operate token in the log at the default level). Never shown, whatever the filter.
    spec.push_str(",pingora_core::apps::http_app=off");
    let filter = tracing_subscriber::EnvFilter::try_new(&spec)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
    // The access log is formatted and written off the request path (src/logwriter.rs); if its
    // thread cannot start, access lines go through `tracing` like every other line.
    crate::logwriter::start(matches!(format, LogFormat::Json));
}

/// How the admin commands find the admin API.
#[derive(Debug, Clone)]
pub struct AdminArgs {
    pub config: Option<PathBuf>,
    pub url: String,
    pub token: Option<String>,
}

impl AdminArgs {
    fn target(&self) -> Result<Target, String> {
        self.target_with(self.token.is_none())
    }

    /// `need_token`: whether the file's admin token is read (not for `/healthz`, which needs
    /// none: a container's health check need not hold the token's variable; found by review).
    fn target_with(&self, need_token: bool) -> Result<Target, String> {
        match &self.config {
            Some(path) => {
                let c = config::load_admin(path, need_token).map_err(|e| e.to_string())?;
                let mut t = Target::from_endpoint(&c);
                if let Some(token) = &self.token {
                    t.token = Some(crate::admin::client::checked_token(token)?);
                }
                Ok(t)
            }
            None => Target::from_url(&self.url, self.token.clone()),
        }
    }
}

/// What `anteroom room NAME` does.
#[derive(Debug, Clone)]
pub enum RoomAction {
    Show,
    Set(Vec<String>),
    Clear,
    Changes(usize),
    Events,
    EventAdd(serde_json::Value),
    EventChange(String, serde_json::Value),
    EventCancel(String),
}

/// `text` as a terminal shows it and nothing more: control characters but line ends and tabs
/// written as escapes. What a command prints may come from a server (an admin API's room names,
/// its errors) or a file, and an escape sequence in it would drive the operator's terminal
/// (found by review: a server's room name set the window title and cleared the screen).
fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let plain = |c: char| !c.is_control() || c == '\n' || c == '\t';
    if text.chars().all(plain) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars()
            .map(|c| {
                if plain(c) {
                    c.to_string()
                } else {
                    c.escape_unicode().to_string()
                }
            })
            .collect(),
    )
}

/// A command refused before anything was sent: the message, exit status 1.
pub fn fail(msg: impl std::fmt::Display) -> ExitCode {
    errln!("anteroom: {msg}");
    ExitCode::from(1)
}

/// `anteroom rooms`: a table of every room.
pub fn rooms(args: AdminArgs) -> ExitCode {
    match args.target().and_then(|t| t.json("GET", "/rooms", None)) {
        Ok(v) => {
            out!("{}", admin_client::rooms_table(&v));
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `anteroom room NAME [show | set K=V... | clear | changes]`.
pub fn room(args: AdminArgs, name: &str, action: RoomAction) -> ExitCode {
    // Names go into the request's path as they are: one no room or event could have is refused
    // here (found by review: `sale?x` showed the room `sale`, a newline broke the request).
    if !crate::config::valid_room_name(name) {
        return fail(format!(
            "{name:?} is no room name: lower-case letters, digits, '-' and '_', at most 32"
        ));
    }
    if let RoomAction::EventChange(event, _) | RoomAction::EventCancel(event) = &action {
        if !crate::event::valid_name(event) {
            return fail(format!(
                "{event:?} is no event name: letters, digits, '-', '_' and '.', at most 64"
            ));
        }
    }
    let path = format!("/rooms/{name}");
    let table = matches!(action, RoomAction::Changes(_));
    let result = args.target().and_then(|t| match action {
        RoomAction::Show => t.json("GET", &path, None),
        RoomAction::Set(pairs) => {
            let body = admin_client::patch_body(&pairs)?;
            t.json("PATCH", &path, Some(&body))
        }
        RoomAction::Clear => t.json("DELETE", &format!("{path}/waiting"), None),
        RoomAction::Changes(limit) => t.json("GET", &format!("{path}/changes?limit={limit}"), None),
        RoomAction::Events => t.json("GET", &format!("{path}/events"), None),
        RoomAction::EventAdd(body) => t.json("POST", &format!("{path}/events"), Some(&body)),
        RoomAction::EventChange(event, body) => {
            t.json("PATCH", &format!("{path}/events/{event}"), Some(&body))
        }
        RoomAction::EventCancel(event) => t.json("DELETE", &format!("{path}/events/{event}"), None),
    });
    match result {
        Ok(v) if table => {
            out!("{}", admin_client::changes_table(&v));
            ExitCode::SUCCESS
        }
        Ok(v) => {
            outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `anteroom verify-draw`: 0 when the draw checks out (and where the ticket is), 1 when not.
pub fn verify_draw(
    event: &str,
    ticket: &str,
    commitment: Option<&str>,
    ca: Option<&Path>,
) -> ExitCode {
    match crate::event::verify::run(event, ticket, commitment, ca) {
        Ok(r) => {
            outln!(
                "The draw of event {:?} in room {:?} checks out:",
                r.event,
                r.room
            );
            outln!(
                "  the seed is the one committed to (sha256 = {})",
                r.commitment
            );
            if commitment.is_none() {
                outln!("  (compare that commitment with the one the countdown page showed before the opening, or pass it as --commitment)");
            }
            outln!(
                "  all {} registrations are listed in the order the seed gives them",
                r.registrations
            );
            outln!(
                "  ticket {ticket} is at place {} of {}",
                r.place,
                r.registrations
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("the draw does not check out: {e}")),
    }
}

/// `anteroom health`: exit 0 when `/healthz` answers 200.
pub fn health(args: AdminArgs) -> ExitCode {
    match args.target_with(false).and_then(|t| t.health()) {
        Ok((200, _)) => ExitCode::SUCCESS,
        Ok((status, body)) => fail(format!(
            "/healthz answered {status}: {}",
            admin_client::clipped(&body)
        )),
        Err(e) => fail(e),
    }
}

#[cfg(test)]
mod tests {
    /// What a command prints cannot drive the terminal (found by review: a server's room name
    /// set the window title and cleared the screen).
    #[test]
    fn escape_sequences_are_printed_as_text() {
        assert_eq!(super::printable("a\tb\nc"), "a\tb\nc");
        let shown = super::printable("\u{1b}]0;PWNED\u{7}\u{1b}[2J ok");
        assert!(!shown.chars().any(|c| c.is_control()), "{shown}");
        assert!(shown.contains("PWNED") && shown.ends_with(" ok"), "{shown}");
    }
}
