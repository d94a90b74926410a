//! The command registry: one file per command, each an `Args` struct and a `run` function.
pub mod agent;
pub mod apply;
pub mod completions;
pub mod cp;
pub mod image;
pub mod install;
pub mod key;
pub mod login;
pub mod node;
pub mod role_bindings;
pub mod sandbox;
pub mod serve;
pub mod snapshot;
pub mod stream;
pub mod tenant;
pub mod update;
pub mod usage;
pub mod whoami;

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

use crate::cli::Cli;
use crate::cli::client::ApiClient;
use crate::cli::output::Printer;
use crate::cli::settings::Settings;

/// Every `sbx` command.
#[derive(Debug, Subcommand)]
pub enum Command {
    Serve(serve::ServeArgs),
    Agent(agent::AgentArgs),
    Login(login::LoginArgs),
    Whoami(whoami::WhoamiArgs),
    /// Mint, list and revoke API keys (admin)
    #[command(subcommand)]
    Key(key::KeyCommand),
    #[command(subcommand)]
    Sandbox(sandbox::SandboxCommand),
    #[command(subcommand)]
    Snapshot(snapshot::SnapshotCommand),
    /// Create, read, update and delete tenants
    #[command(subcommand)]
    Tenant(tenant::TenantCommand),
    /// Show or replace the role bindings of OIDC identities (admin)
    #[command(subcommand)]
    RoleBindings(role_bindings::RoleBindingsCommand),
    Usage(usage::UsageArgs),
    Apply(apply::ApplyArgs),
    Diff(apply::DiffArgs),
    /// Node storage pools and dedication to tenants (operator, admin)
    #[command(subcommand)]
    Node(node::NodeCommand),
    /// List, pull and import images on the server's host
    #[command(subcommand)]
    Image(image::ImageCommand),
    /// Install sbx on cluster nodes (admin; Kubernetes, when turned on)
    #[command(subcommand)]
    Install(install::InstallCommand),
    Completions(completions::CompletionsArgs),
    /// Internal: the per-sandbox shim started by `sbx serve`
    #[command(hide = true)]
    Shim(crate::runtime::shim::ShimArgs),
}

/// What a client command needs: the resolved settings, a client and a printer.
pub struct Context {
    /// Resolved settings.
    pub settings: Settings,
    /// Client of the configured server.
    pub client: ApiClient,
    /// Output.
    pub printer: Printer,
}

impl Context {
    /// Resolves settings and builds the client.
    pub fn new(cli: &Cli) -> Result<Context> {
        let settings = Settings::resolve(&cli.global)?;
        let client = ApiClient::new(&settings.server, settings.api_key.clone())?;
        let printer = Printer {
            format: settings.output,
            quiet: settings.quiet,
        };
        Ok(Context {
            settings,
            client,
            printer,
        })
    }
}

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> Result<ExitCode> {
    match &cli.command {
        Command::Serve(args) => serve::run(args).await,
        Command::Agent(args) => agent::run(args).await,
        Command::Completions(args) => completions::run(args),
        Command::Login(args) => login::run(&cli, args).await,
        Command::Whoami(args) => whoami::run(&Context::new(&cli)?, args).await,
        Command::Key(command) => key::run(&Context::new(&cli)?, command).await,
        Command::Sandbox(command) => sandbox::run(&Context::new(&cli)?, command).await,
        Command::Snapshot(command) => snapshot::run(&Context::new(&cli)?, command).await,
        Command::Tenant(command) => tenant::run(&Context::new(&cli)?, command).await,
        Command::RoleBindings(command) => role_bindings::run(&Context::new(&cli)?, command).await,
        Command::Usage(args) => usage::run(&Context::new(&cli)?, args).await,
        Command::Apply(args) => apply::run_apply(&Context::new(&cli)?, args).await,
        Command::Diff(args) => apply::run_diff(&Context::new(&cli)?, args).await,
        Command::Node(command) => node::run(&Context::new(&cli)?, command).await,
        Command::Image(command) => image::run(&Context::new(&cli)?, command).await,
        Command::Install(command) => install::run(&Context::new(&cli)?, command).await,
        Command::Shim(args) => Ok(ExitCode::from(
            crate::runtime::shim::run(args).clamp(0, 255) as u8,
        )),
    }
}
