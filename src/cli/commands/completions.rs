//! `sbx completions`: print a shell completion script.
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, CommandFactory};
use clap_complete::Shell;

use crate::cli::Cli;

/// Print a shell completion script
///
/// Examples:
///   sbx completions bash > /etc/bash_completion.d/sbx
///   sbx completions zsh > "${fpath[1]}/_sbx"
///   sbx completions fish > ~/.config/fish/completions/sbx.fish
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct CompletionsArgs {
    /// The shell
    #[arg(value_parser = ["bash", "zsh", "fish"])]
    pub shell: String,
}

/// The script for a shell as text.
pub fn script(shell: Shell) -> String {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "sbx", &mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Prints the script.
pub fn run(args: &CompletionsArgs) -> Result<ExitCode> {
    let shell = match args.shell.as_str() {
        "zsh" => Shell::Zsh,
        "fish" => Shell::Fish,
        _ => Shell::Bash,
    };
    print!("{}", script(shell));
    Ok(ExitCode::SUCCESS)
}
