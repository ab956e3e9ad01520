//! The `anteroom` command line: parses arguments and hands over to [`anteroom::commands`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "anteroom",
    version,
    about = "A virtual waiting room in front of a web shop"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy with a config file.
    Run {
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Validate a config file: a summary, or file:line:col, the key and the fix.
    Check {
        #[arg(long, short)]
        config: PathBuf,
    },
    /// A waiting room in front of a built-in demo shop: memory store, no Redis, one command.
    Demo {
        /// Where the waiting room listens.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Where the demo shop (the origin) listens.
        #[arg(long, default_value = "127.0.0.1:8081")]
        shop: SocketAddr,
        /// Simulated visitors who join the line ahead of you (0 for none).
        #[arg(long, default_value_t = 25)]
        crowd: u32,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ANTEROOM_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Run { config } => anteroom::commands::run(&config),
        Command::Check { config } => anteroom::commands::check(&config),
        Command::Demo {
            listen,
            shop,
            crowd,
        } => anteroom::demo::run(anteroom::demo::DemoOptions {
            listen,
            shop,
            crowd,
        }),
    }
}
