//! `sbx whoami`: the caller's identity and grants.
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::cli::commands::Context;
use crate::cli::output::Detail;
use crate::shared::models::identity::{PrincipalType, WhoamiResponse};

/// Show who the API key (or OIDC token) is and what it may do
#[derive(Debug, Clone, Args)]
pub struct WhoamiArgs {}

impl Detail for WhoamiResponse {
    fn fields(&self) -> Vec<(&'static str, String)> {
        let mut fields = vec![
            (
                "Type",
                match self.principal_type {
                    PrincipalType::Key => "key".to_string(),
                    PrincipalType::Oidc => "oidc".to_string(),
                },
            ),
            ("Subject", self.subject.clone()),
            ("Grants", self.grants.join("; ")),
        ];
        if let Some(issuer) = &self.issuer {
            fields.push(("Issuer", issuer.clone()));
        }
        if let Some(groups) = &self.groups {
            fields.push(("Groups", groups.join(", ")));
        }
        fields
    }
}

/// Calls whoami and prints the record.
pub async fn run(ctx: &Context, _args: &WhoamiArgs) -> Result<ExitCode> {
    let me = ctx.client.whoami().await?;
    ctx.printer.detail(&me)?;
    Ok(ExitCode::SUCCESS)
}
