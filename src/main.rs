//! The `anteroom` command line: parses arguments and hands over to [`anteroom::commands`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anteroom::commands::{self, AdminArgs, LogFormat, RoomAction};
use clap::{Args, Parser, Subcommand};

/// mimalloc: the proxy allocates and frees small buffers on every request; glibc malloc was
/// ~14 % of the admitted path's CPU in `perf` (docs/BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "anteroom",
    version,
    about = "A virtual waiting room in front of a web shop"
)]
struct Cli {
    /// Log format on stderr: readable text, or one JSON object per line.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "ANTEROOM_LOG_FORMAT"
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// How to reach the admin API: from a config file, or a URL and a token.
#[derive(Args)]
struct Admin {
    /// Read listen.admin and admin.token from this config file.
    #[arg(long, short, global = true)]
    config: Option<PathBuf>,
    /// The admin API's address.
    #[arg(long, global = true, default_value = "http://127.0.0.1:9180")]
    admin: String,
    /// The admin token (instead of --config).
    #[arg(
        long,
        global = true,
        env = "ANTEROOM_ADMIN_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
}

impl From<Admin> for AdminArgs {
    fn from(a: Admin) -> Self {
        AdminArgs {
            config: a.config,
            url: a.admin,
            token: a.token,
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy with a config file.
    Run {
        #[arg(long, short)]
        config: PathBuf,
        /// Take over the listening sockets of a running anteroom (then send it SIGQUIT):
        /// a binary or config upgrade without dropping a connection.
        #[arg(long)]
        upgrade: bool,
    },
    /// Validate a config file: a summary, or file:line:col, the key and the fix.
    Check {
        #[arg(long, short)]
        config: PathBuf,
        /// Also reach the store and every upstream once and report each (exit 1 if one
        /// cannot be reached). Without it, check never touches the network.
        #[arg(long)]
        connect: bool,
    },
    /// A waiting room in front of a built-in demo shop: memory store, no Redis, one command.
    Demo {
        /// Where the waiting room listens.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Where the demo shop (the origin) listens.
        #[arg(long, default_value = "127.0.0.1:8081")]
        shop: SocketAddr,
        /// Where the admin API listens.
        #[arg(long, default_value = "127.0.0.1:9180")]
        admin: SocketAddr,
        /// Simulated visitors who join the line ahead of you (0 for none).
        #[arg(long, default_value_t = 25)]
        crowd: u32,
        /// Run a short event: registration from now, a drawn opening after this long
        /// (e.g. 30s), the sale open for ten minutes.
        #[arg(long, value_parser = humantime::parse_duration)]
        event_in: Option<std::time::Duration>,
    },
    /// Check an event's draw: the seed against the commitment, the list against the seed's
    /// order, and the place of a registration ticket.
    VerifyDraw {
        /// The event as the room publishes it (https://SHOP/.anteroom/event?room=NAME), or a
        /// file saved from it with its list of tickets.
        #[arg(long)]
        event: String,
        /// The registration ticket your page showed (32 hex digits).
        #[arg(long)]
        ticket: String,
        /// The commitment your page showed before the opening (64 hex digits): checked
        /// against the one the room publishes now.
        #[arg(long)]
        commitment: Option<String>,
        /// Trust this CA for an https URL (a PEM file), instead of the system's.
        #[arg(long)]
        ca: Option<PathBuf>,
    },
    /// Every room with its live figures (through the admin API).
    Rooms {
        #[command(flatten)]
        admin: Admin,
    },
    /// Show or change one room (through the admin API).
    Room {
        /// The room's name.
        name: String,
        #[command(subcommand)]
        action: Option<RoomCmd>,
        #[command(flatten)]
        admin: Admin,
    },
    /// Exit 0 when the admin API answers /healthz (for container health checks).
    Health {
        #[command(flatten)]
        admin: Admin,
    },
}

#[derive(Subcommand)]
enum RoomCmd {
    /// Configuration and live figures, as JSON.
    Show,
    /// Change runtime state: enabled=, queue_all=, admit_per_second=, max_active=,
    /// autopilot= (default returns an override to the configured value).
    Set { pairs: Vec<String> },
    /// Empty the line: everyone waiting must join again.
    Clear,
    /// The operators' changes, newest first: who, when, from where, what from what to what.
    Changes {
        /// How many (at most 200).
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// The room's events, with their phase and draw.
    Events,
    /// Add, change or cancel an event at run time (every instance follows within a tick).
    Event {
        #[command(subcommand)]
        action: EventCmd,
    },
}

#[derive(Subcommand)]
enum EventCmd {
    /// A new event.
    Add {
        name: String,
        #[command(flatten)]
        fields: EventFields,
    },
    /// Change an event (its pre-queue's start and draw stay once it has begun).
    Change {
        name: String,
        #[command(flatten)]
        fields: EventFields,
    },
    /// Cancel an event.
    Cancel { name: String },
}

/// An event's fields on the command line (times RFC 3339 with an offset).
#[derive(Args)]
struct EventFields {
    #[arg(long)]
    prequeue_from: Option<String>,
    #[arg(long)]
    opens_at: Option<String>,
    /// A time, or "none".
    #[arg(long)]
    closes_at: Option<String>,
    /// true or false.
    #[arg(long)]
    draw: Option<bool>,
    /// keep or release.
    #[arg(long)]
    after_close: Option<String>,
    /// A rate, or "default".
    #[arg(long)]
    admit_per_second: Option<String>,
    /// A cap, or "default".
    #[arg(long)]
    max_active: Option<String>,
}

impl EventFields {
    fn body(&self, name: Option<&str>) -> Result<serde_json::Value, String> {
        let mut b = serde_json::Map::new();
        let mut put = |k: &str, v: serde_json::Value| {
            b.insert(k.to_string(), v);
        };
        if let Some(n) = name {
            put("name", n.into());
        }
        let none = |v: &str, word: &str| v.eq_ignore_ascii_case(word);
        if let Some(v) = &self.prequeue_from {
            put("prequeue_from", v.as_str().into());
        }
        if let Some(v) = &self.opens_at {
            put("opens_at", v.as_str().into());
        }
        if let Some(v) = &self.closes_at {
            put(
                "closes_at",
                if none(v, "none") {
                    serde_json::Value::Null
                } else {
                    v.as_str().into()
                },
            );
        }
        if let Some(v) = self.draw {
            put("draw", v.into());
        }
        if let Some(v) = &self.after_close {
            put("after_close", v.as_str().into());
        }
        // `null` means "back to the configured value": only `default` says it. A value that
        // does not read as a finite number (or, for max-active, a whole one) is refused here
        // with the option's name (found by review: `inf` was encoded as null and removed the
        // override, `2.9` was cut to 2; sent on as text, the API's answer named a JSON type).
        let number = |v: &str| match v.parse::<f64>() {
            _ if none(v, "default") => Ok(serde_json::Value::Null),
            Ok(n) if n.is_finite() => Ok(n.into()),
            _ => Err(format!(
                "--admit-per-second {v}: a number of visitors per second, or default"
            )),
        };
        let whole = |v: &str| match v.parse::<u64>() {
            _ if none(v, "default") => Ok(serde_json::Value::Null),
            Ok(n) => Ok(n.into()),
            Err(_) => Err(format!("--max-active {v}: a whole number, or default")),
        };
        if let Some(v) = &self.admit_per_second {
            put("admit_per_second", number(v)?);
        }
        if let Some(v) = &self.max_active {
            put("max_active", whole(v)?);
        }
        Ok(serde_json::Value::Object(b))
    }
}

fn main() -> ExitCode {
    // `anteroom run` catches SIGHUP from here on, before anything else (the signal's default
    // action ends a process; the reloader applies one caught meanwhile): found by re-review,
    // one sent in the first milliseconds, while the arguments were read and the logging set
    // up, still ended it. Not for the other commands (a demo in a closed terminal ends).
    if std::env::args_os().skip(1).any(|a| a == "run") {
        anteroom::reload::catch_early_hangups();
    }
    let cli = Cli::parse();
    commands::init_logging(cli.log_format);
    match cli.command {
        Command::Run { config, upgrade } => commands::run(&config, upgrade),
        Command::Check { config, connect } => commands::check(&config, connect),
        Command::Demo {
            listen,
            shop,
            admin,
            crowd,
            event_in,
        } => anteroom::demo::run(anteroom::demo::DemoOptions {
            listen,
            shop,
            admin,
            crowd,
            event_in,
        }),
        Command::VerifyDraw {
            event,
            ticket,
            commitment,
            ca,
        } => commands::verify_draw(&event, &ticket, commitment.as_deref(), ca.as_deref()),
        Command::Rooms { admin } => commands::rooms(admin.into()),
        Command::Room {
            name,
            action,
            admin,
        } => {
            let action = match action {
                None | Some(RoomCmd::Show) => RoomAction::Show,
                Some(RoomCmd::Set { pairs }) => RoomAction::Set(pairs),
                Some(RoomCmd::Clear) => RoomAction::Clear,
                Some(RoomCmd::Changes { limit }) => RoomAction::Changes(limit),
                Some(RoomCmd::Events) => RoomAction::Events,
                Some(RoomCmd::Event { action }) => match action {
                    EventCmd::Add { name, fields } => match fields.body(Some(&name)) {
                        Ok(body) => RoomAction::EventAdd(body),
                        Err(e) => return commands::fail(e),
                    },
                    EventCmd::Change { name, fields } => match fields.body(None) {
                        Ok(body) => RoomAction::EventChange(name, body),
                        Err(e) => return commands::fail(e),
                    },
                    EventCmd::Cancel { name } => RoomAction::EventCancel(name),
                },
            };
            commands::room(admin.into(), &name, action)
        }
        Command::Health { admin } => commands::health(admin.into()),
    }
}
