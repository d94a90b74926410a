//! `sbx login`: check a server URL and API key with whoami, then save them as a profile.
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Args;

use crate::cli::Cli;
use crate::cli::client::ApiClient;
use crate::cli::settings::{ConfigFile, Settings};
use crate::shared::paths;

/// Save a server URL and API key as a profile, after checking them with whoami
///
/// The key comes from --api-key / SBX_API_KEY, else a prompt on a terminal, else the first
/// line of standard input. On the daemon's own host, --bootstrap takes the first admin key
/// from the data dir. The profile (default: `default`, or --profile) becomes the current one
/// and is written with mode 0600.
///
/// Examples:
///   sbx login --server https://sbx.example.com
///   echo "$TOKEN" | sbx login --profile ci
///   sudo sbx login --bootstrap
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct LoginArgs {
    /// Use the first admin key that `sbx serve` wrote to its data dir on this host
    #[arg(long)]
    pub bootstrap: bool,

    /// The daemon's data dir, for --bootstrap [default: as sbx serve]
    #[arg(long, env = paths::ENV_DATA_DIR, value_name = "DIR", requires = "bootstrap")]
    pub data_dir: Option<PathBuf>,
}

fn read_key(cli: &Cli, args: &LoginArgs, server: &str) -> Result<String> {
    if args.bootstrap {
        let dir = args
            .data_dir
            .clone()
            .unwrap_or_else(paths::default_data_dir);
        let path = dir.join(paths::ADMIN_TOKEN_FILE);
        let token = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "cannot read the first admin key at {} (is sbx serve running on this host with \
                 this data dir, and are you allowed to read it?)",
                path.display()
            )
        })?;
        return Ok(token.trim().to_string());
    }
    if let Some(key) = &cli.global.api_key {
        return Ok(key.trim().to_string());
    }
    let key = if std::io::stdin().is_terminal() {
        rpassword::prompt_password(format!("API key for {server}: "))
            .context("cannot read the API key from the terminal")?
    } else {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the API key from standard input")?;
        text.lines().next().unwrap_or_default().to_string()
    };
    let key = key.trim().to_string();
    if key.is_empty() {
        bail!("no API key given");
    }
    Ok(key)
}

/// Verifies the key and saves the profile.
pub async fn run(cli: &Cli, args: &LoginArgs) -> Result<ExitCode> {
    let path = ConfigFile::path()?;
    let mut file = ConfigFile::load(&path)?;
    let settings = Settings::from_parts(&cli.global, &file);
    let key = read_key(cli, args, &settings.server)?;
    let client = ApiClient::new(&settings.server, Some(key.clone()))?;
    let me = client.whoami().await?;

    let profile = file.profiles.entry(settings.profile.clone()).or_default();
    profile.server = Some(settings.server.clone());
    profile.api_key = Some(key);
    if let Some(output) = cli.global.output {
        profile.output = Some(output);
    }
    file.current = Some(settings.profile.clone());
    file.save(&path)?;
    if !settings.quiet {
        eprintln!(
            "Logged in to {} as {} ({}); saved as profile '{}' in {}",
            settings.server,
            me.subject,
            me.grants.join("; "),
            settings.profile,
            path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
