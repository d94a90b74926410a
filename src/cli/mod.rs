//! The `sbx` command line: a typed HTTP client of the API for developers and scripts, plus
//! `sbx serve`, which runs the daemon in-process.
pub mod client;
pub mod commands;
pub mod output;
pub mod settings;

use std::process::ExitCode;

use clap::{Args, Parser};

use crate::cli::client::ClientError;
use crate::cli::commands::Command;
use crate::cli::output::OutputFormat;
use crate::shared::paths;

/// sbx: isolated, disposable, forkable sandboxes — the API daemon and its command line.
///
/// Start the daemon with `sbx serve`, log in with `sbx login`, then manage sandboxes,
/// snapshots, tenants and keys. Every command talks to the server over its HTTP API.
#[derive(Debug, Parser)]
#[command(
    name = "sbx",
    version,
    propagate_version = true,
    after_help = "Exit status: 0 success, 1 error, 2 usage error, 3 server unreachable, \
                  4 not found.\n\
                  Settings: --flag > SBX_* environment > profile in the config file > default."
)]
pub struct Cli {
    /// Options every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// URL of the sbx server [default: the profile's, else http://127.0.0.1:8080]
    #[arg(long, global = true, env = paths::ENV_SERVER, value_name = "URL")]
    pub server: Option<String>,

    /// API key to send (`<key_id>_<secret>`); overrides the profile's
    #[arg(long, global = true, env = paths::ENV_API_KEY, hide_env_values = true, value_name = "KEY")]
    pub api_key: Option<String>,

    /// Profile of the config file to use [default: the current profile]
    #[arg(long, global = true, env = paths::ENV_PROFILE, value_name = "NAME")]
    pub profile: Option<String>,

    /// Output format: a table for people, JSON or YAML (the API's own models) for scripts
    #[arg(short = 'o', long, global = true, env = paths::ENV_OUTPUT, value_enum)]
    pub output: Option<OutputFormat>,

    /// Print only the data: no progress, no status lines
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// More detail on stderr (repeat for more): requests sent, timings
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// How a command failed, mapped to the process exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything worked.
    Success = 0,
    /// The command or the API reported an error.
    Failure = 1,
    /// The command line was wrong (clap's own status).
    Usage = 2,
    /// The server could not be reached.
    Unreachable = 3,
    /// The API answered 404.
    NotFound = 4,
}

impl Exit {
    /// The exit status for an error, looking through anyhow's chain for a client error.
    pub fn for_error(error: &anyhow::Error) -> Exit {
        match error.downcast_ref::<ClientError>() {
            Some(ClientError::Connect { .. }) => Exit::Unreachable,
            Some(ClientError::Api(api)) if api.status == 404 => Exit::NotFound,
            _ => Exit::Failure,
        }
    }
}

/// Prints an error the way every command does: `error: <message> (<code>)` for API errors,
/// the context chain for the rest.
pub fn report(error: &anyhow::Error) {
    match error.downcast_ref::<ClientError>() {
        Some(ClientError::Api(api)) => eprintln!("error: {} ({})", api.message, api.code),
        _ => {
            let chain: Vec<String> = error.chain().map(ToString::to_string).collect();
            eprintln!("error: {}", chain.join(": "));
        }
    }
}

fn init_tracing(cli: &Cli) {
    use tracing_subscriber::EnvFilter;
    let default = match (&cli.command, cli.global.verbose) {
        (Command::Serve(_) | Command::Agent(_), 0) => "info",
        (Command::Serve(_) | Command::Agent(_), 1) => "info,sbx=debug",
        (Command::Serve(_) | Command::Agent(_), _) => "debug",
        (_, 0) => "warn",
        (_, 1) => "warn,sbx=debug",
        (_, _) => "debug",
    };
    let filter = std::env::var(paths::ENV_LOG)
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new(default));
    let json = matches!(&cli.command, Command::Serve(args) if args.log_format == commands::serve::LogFormat::Json);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().with_current_span(false).try_init()
    } else {
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        builder.with_ansi(ansi).try_init()
    };
}

/// Entry point of the binary: parse, set up, dispatch, map the outcome to an exit status.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // The shim is a plain synchronous process: no async runtime, no log subscriber.
    if let Command::Shim(args) = &cli.command {
        return ExitCode::from(crate::runtime::shim::run(args).clamp(0, 255) as u8);
    }
    // The agent leaves its container for the host while it has one thread.
    if let Command::Agent(args) = &cli.command {
        if let Some(code) = commands::agent::enter_host_first(args) {
            return code;
        }
    }
    let daemon = matches!(cli.command, Command::Serve(_) | Command::Agent(_));
    if !daemon {
        // A client command whose reader goes away (`sbx key list | head -1`) ends quietly, as
        // `cat` does, instead of failing on the next write. The daemon keeps Rust's default
        // (SIGPIPE ignored): a client hanging up must never stop it.
        // SAFETY: called before any thread starts; SIG_DFL is a valid disposition.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    init_tracing(&cli);
    let runtime = if daemon {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(Exit::Failure as u8);
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(code) => code,
        Err(error) => {
            report(&error);
            ExitCode::from(Exit::for_error(&error) as u8)
        }
    }
}
