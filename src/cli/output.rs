//! All CLI output goes through the [`Printer`]: data to stdout as a table, JSON or YAML;
//! status and progress to stderr, silenced by `-q`.
use std::io::IsTerminal;

use anyhow::{Context, Result};
use clap::ValueEnum;
use comfy_table::{ContentArrangement, Table, presets};
use serde::{Deserialize, Serialize};

/// How data is printed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    /// Aligned columns for people.
    #[default]
    Table,
    /// The table with more columns.
    Wide,
    /// The API's JSON model, pretty-printed.
    Json,
    /// The API's model as YAML.
    Yaml,
    /// A minted key's token alone, on one line (`sbx key create`).
    Token,
}

/// What `-o token` on a command that mints no key says.
const TOKEN_ONLY_FOR_KEYS: &str =
    "`-o token` prints the token of a key being minted: use it with `sbx key create`";

/// A record printable as one row of a table.
pub trait Row {
    /// Column headers; `wide` adds the extra columns.
    fn headers(wide: bool) -> Vec<&'static str>;
    /// The cells of this record, in header order.
    fn cells(&self, wide: bool) -> Vec<String>;
}

/// A single record printable as `FIELD  VALUE` lines.
pub trait Detail {
    /// Field names and values, in display order.
    fn fields(&self) -> Vec<(&'static str, String)>;
}

/// Where command output goes.
#[derive(Debug, Clone, Copy)]
pub struct Printer {
    /// The data format.
    pub format: OutputFormat,
    /// Whether status lines and progress are silenced.
    pub quiet: bool,
}

fn new_table() -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled);
    table
}

impl Printer {
    /// Prints a list: a table, or the models as JSON/YAML.
    pub fn list<T: Row + Serialize>(&self, items: &[T]) -> Result<()> {
        match self.format {
            OutputFormat::Table | OutputFormat::Wide => {
                let wide = self.format == OutputFormat::Wide;
                if items.is_empty() {
                    self.status("No resources found.");
                    return Ok(());
                }
                let mut table = new_table();
                table.set_header(T::headers(wide));
                for item in items {
                    table.add_row(item.cells(wide));
                }
                println!("{}", trim_lines(&table.to_string()));
                Ok(())
            }
            _ => self.structured(&items),
        }
    }

    /// Prints one record: `FIELD  VALUE` lines, or the model as JSON/YAML.
    pub fn detail<T: Detail + Serialize>(&self, item: &T) -> Result<()> {
        match self.format {
            OutputFormat::Table | OutputFormat::Wide => {
                let mut table = new_table();
                for (field, value) in item.fields() {
                    table.add_row(vec![format!("{field}:"), value]);
                }
                println!("{}", trim_lines(&table.to_string()));
                Ok(())
            }
            _ => self.structured(item),
        }
    }

    /// Prints any model as JSON or YAML (tables fall back to JSON).
    pub fn structured<T: Serialize + ?Sized>(&self, value: &T) -> Result<()> {
        let text = match self.format {
            OutputFormat::Token => anyhow::bail!(TOKEN_ONLY_FOR_KEYS),
            OutputFormat::Yaml => serde_yaml_ng::to_string(value).context("cannot encode YAML")?,
            _ => {
                let mut text = serde_json::to_string_pretty(value).context("cannot encode JSON")?;
                text.push('\n');
                text
            }
        };
        print!("{text}");
        Ok(())
    }

    /// Whether the output is for people (a table) rather than a script.
    pub fn is_table(&self) -> bool {
        matches!(self.format, OutputFormat::Table | OutputFormat::Wide)
    }

    /// A status line on stderr, unless quiet.
    pub fn status(&self, message: &str) {
        if !self.quiet {
            eprintln!("{message}");
        }
    }

    /// Whether progress bars and spinners should be drawn.
    pub fn show_progress(&self) -> bool {
        !self.quiet && std::io::stderr().is_terminal()
    }

    /// Awaits `work` behind a spinner (when progress is shown); returns its output and how
    /// long it took.
    pub async fn waiting<T>(
        &self,
        message: String,
        work: impl std::future::Future<Output = T>,
    ) -> (T, std::time::Duration) {
        let bar = self.spinner(message);
        let started = std::time::Instant::now();
        let output = work.await;
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        (output, started.elapsed())
    }

    /// A spinner with elapsed time on stderr for a long wait, when progress is shown.
    pub fn spinner(&self, message: String) -> Option<indicatif::ProgressBar> {
        if !self.show_progress() {
            return None;
        }
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        bar.set_message(message);
        bar.enable_steady_tick(std::time::Duration::from_millis(100));
        Some(bar)
    }
}

/// comfy-table pads every cell with a space; trim that from both ends of each line.
fn trim_lines(text: &str) -> String {
    text.lines()
        .map(|line| line.strip_prefix(' ').unwrap_or(line).trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lines_are_trimmed() {
        let mut table = new_table();
        table.set_header(vec!["NAME", "ROLE"]);
        table.add_row(vec!["ci", "admin"]);
        let text = trim_lines(&table.to_string());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("NAME"), "{text}");
        assert!(lines[1].starts_with("ci"), "{text}");
        assert!(lines.iter().all(|l| !l.ends_with(' ')));
    }
}
