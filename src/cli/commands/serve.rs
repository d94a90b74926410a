//! `sbx serve`: run the API daemon in this process.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use crate::daemon;
use crate::daemon::config::{Config, Mode, Overrides, PlatformKind};
use crate::shared::paths;

/// Run the API daemon (the embedded default on this host, or the Kubernetes platform)
///
/// On a host with no cluster this is the embedded default: state in SQLite under the data dir,
/// sandboxes on this host. The first start mints an admin key and writes its token to
/// `<data-dir>/admin.token` (mode 0600); `sbx login --bootstrap` picks it up.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port) [default: 127.0.0.1:8080]
    #[arg(long, env = paths::ENV_LISTEN, value_name = "HOST:PORT")]
    pub listen: Option<String>,

    /// Directory for the database, the admin token and sandbox files [default: /var/lib/sbx as root]
    #[arg(long, env = paths::ENV_DATA_DIR, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// development allows unscoped tenant keys; production requires tenants and sizes
    #[arg(long, env = paths::ENV_MODE, value_parser = clap::value_parser!(Mode), value_name = "MODE")]
    pub mode: Option<Mode>,

    /// Where sandboxes run: local (this host) or kubernetes
    #[arg(long, env = paths::ENV_PLATFORM, value_parser = clap::value_parser!(PlatformKind), value_name = "PLATFORM")]
    pub platform: Option<PlatformKind>,

    /// TOML configuration file (see docs/configuration.md); flags and env win
    #[arg(long, env = paths::ENV_CONFIG, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Import this OCI image archive into the host's image store at start-up (repeatable)
    #[arg(long = "import", value_name = "ARCHIVE")]
    pub import: Vec<PathBuf>,

    /// Log lines as text for people, or as JSON objects (one per line) for a log collector
    #[arg(long, env = paths::ENV_LOG_FORMAT, value_enum, default_value_t, value_name = "FORMAT")]
    pub log_format: LogFormat,
}

/// How the daemon writes its log (on stderr).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line: time, level, target, message and fields.
    Json,
}

/// Resolves the configuration and serves until SIGTERM/SIGINT.
pub async fn run(args: &ServeArgs) -> Result<ExitCode> {
    let config = Config::resolve(Overrides {
        listen: args.listen.clone(),
        data_dir: args.data_dir.clone(),
        mode: args.mode,
        platform: args.platform,
        config_file: args.config.clone(),
        preload: args.import.clone(),
    })?;
    daemon::serve(config).await.context("sbx serve")?;
    Ok(ExitCode::SUCCESS)
}
