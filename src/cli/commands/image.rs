//! `sbx image list|pull|import`: the image store of the server's host (local platform).
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::commands::Context;
use crate::cli::output::{Detail, Row};
use crate::shared::duration::format_duration_short;
use crate::shared::models::image::{ImageRecord, PullImageRequest};
use crate::shared::timestamp::{format_rfc3339_utc, now_unix};

/// List, pull and import images on the server's host
#[derive(Debug, Clone, Subcommand)]
pub enum ImageCommand {
    #[command(visible_alias = "ls")]
    List(ListArgs),
    Pull(PullArgs),
    Import(ImportArgs),
}

/// List the images in the server's image store
#[derive(Debug, Clone, Args)]
pub struct ListArgs {}

/// Pull an image from its registry into the server's image store
///
/// Layers the store already holds are reused; pulling an unchanged image does nothing.
/// Registries are reached over HTTPS unless the server lists them as insecure.
///
/// Examples:
///   sbx image pull busybox
///   sbx image pull 127.0.0.1:5000/team/app:1
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct PullArgs {
    /// Image reference: [REGISTRY/]REPOSITORY[:TAG][@DIGEST]
    pub reference: String,
}

/// Import the images of an OCI archive file, for hosts with no registry (operator)
///
/// The archive is an OCI image layout in a tar (or tar.gz), as written by
/// `skopeo copy docker://IMAGE oci-archive:FILE:NAME:TAG` or
/// `podman save --format oci-archive -o FILE IMAGE`. An image the archive names only
/// by a tag is named after the file: busybox.tar gives busybox:TAG.
///
/// Examples:
///   sbx image import busybox.tar
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct ImportArgs {
    /// The OCI archive to upload
    pub file: PathBuf,
}

/// `sha256:0123456789ab…` → `0123456789ab`.
fn short_digest(digest: &str) -> String {
    let hex = digest.split_once(':').map_or(digest, |(_, hex)| hex);
    hex.chars().take(12).collect()
}

/// A byte count for people: `2140160` → `2.0MiB`.
fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes}B")
    } else {
        format!("{value:.1}{}", UNITS[unit])
    }
}

fn ago(unix: i64) -> String {
    let secs = (now_unix() - unix).max(0) as u64;
    format!("{} ago", format_duration_short(Duration::from_secs(secs)))
}

fn command_line(args: &[String]) -> String {
    if args.is_empty() {
        "-".to_string()
    } else {
        serde_json::to_string(args).unwrap_or_else(|_| args.join(" "))
    }
}

impl Row for ImageRecord {
    fn headers(wide: bool) -> Vec<&'static str> {
        let mut headers = vec!["REFERENCE", "DIGEST", "LAYERS", "SIZE", "CREATED"];
        if wide {
            headers.extend(["ENTRYPOINT", "CMD"]);
        }
        headers
    }

    fn cells(&self, wide: bool) -> Vec<String> {
        let mut cells = vec![
            self.reference.clone(),
            short_digest(&self.digest),
            self.layers.to_string(),
            human_size(self.size_bytes),
            ago(self.created),
        ];
        if wide {
            cells.extend([command_line(&self.entrypoint), command_line(&self.cmd)]);
        }
        cells
    }
}

impl Detail for ImageRecord {
    fn fields(&self) -> Vec<(&'static str, String)> {
        vec![
            ("Reference", self.reference.clone()),
            ("Digest", self.digest.clone()),
            ("Layers", self.layers.to_string()),
            (
                "Size",
                format!(
                    "{} ({} bytes)",
                    human_size(self.size_bytes),
                    self.size_bytes
                ),
            ),
            ("Created", format_rfc3339_utc(self.created)),
            ("Entrypoint", command_line(&self.entrypoint)),
            ("Cmd", command_line(&self.cmd)),
        ]
    }
}

/// A spinner with the elapsed time on stderr, when progress is shown at all.
fn spinner(ctx: &Context, message: String) -> Option<ProgressBar> {
    if !ctx.printer.show_progress() {
        return None;
    }
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
        bar.set_style(style);
    }
    bar.set_message(message);
    bar.enable_steady_tick(Duration::from_millis(100));
    Some(bar)
}

/// Runs an image subcommand.
pub async fn run(ctx: &Context, command: &ImageCommand) -> Result<ExitCode> {
    match command {
        ImageCommand::List(_) => {
            let images = ctx.client.list_images().await?;
            ctx.printer.list(&images)?;
        }
        ImageCommand::Pull(args) => {
            let bar = spinner(ctx, format!("pulling {}", args.reference));
            let request = PullImageRequest {
                reference: Some(args.reference.clone()),
            };
            let result = ctx.client.pull_image(&request).await;
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            let image = result?;
            ctx.printer.detail(&image)?;
        }
        ImageCommand::Import(args) => {
            let archive = tokio::fs::File::open(&args.file)
                .await
                .with_context(|| format!("cannot open {}", args.file.display()))?;
            let metadata = archive
                .metadata()
                .await
                .with_context(|| format!("cannot read {}", args.file.display()))?;
            if !metadata.is_file() {
                anyhow::bail!("{} is not a file", args.file.display());
            }
            let file_name = args
                .file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let bar = spinner(
                ctx,
                format!(
                    "importing {} ({})",
                    args.file.display(),
                    human_size(metadata.len())
                ),
            );
            let result = ctx.client.import_images(archive, &file_name).await;
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            let imported = result?;
            if ctx.printer.is_table() {
                ctx.printer.list(&imported.images)?;
            } else {
                ctx.printer.structured(&imported)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_short_and_readable() {
        assert_eq!(
            short_digest(&format!("sha256:{}", "ab".repeat(32))),
            "abababababab"
        );
        assert_eq!(human_size(512), "512B");
        assert_eq!(human_size(2_140_160), "2.0MiB");
        assert_eq!(human_size(3 << 30), "3.0GiB");
        assert_eq!(command_line(&[]), "-");
        assert_eq!(
            command_line(&["/bin/sh".into(), "-c".into()]),
            r#"["/bin/sh","-c"]"#
        );
    }
}
