//! CLI settings: flags > `SBX_*` env (both resolved by clap) > the profile in
//! `<config dir>/sbx/config.toml` > defaults, resolved here and nowhere else.
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::cli::GlobalArgs;
use crate::cli::output::OutputFormat;
use crate::shared::paths;

/// Name of the profile used when none is chosen.
pub const DEFAULT_PROFILE: &str = "default";

/// One named set of connection settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// Server URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// API key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Default output format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputFormat>,
}

/// The config file: profiles and which one is current.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigFile {
    /// The profile used when `--profile` is not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// Profiles by name.
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
}

impl ConfigFile {
    /// Where the file lives: `$SBX_CONFIG_DIR/config.toml`, else
    /// `<platform config dir>/sbx/config.toml`.
    pub fn path() -> Result<PathBuf> {
        if let Some(dir) = std::env::var_os(paths::ENV_CONFIG_DIR) {
            return Ok(PathBuf::from(dir).join("config.toml"));
        }
        let base =
            dirs::config_dir().context("cannot find a config directory; set SBX_CONFIG_DIR")?;
        Ok(base.join("sbx").join("config.toml"))
    }

    /// Reads the file; a missing file is an empty configuration.
    pub fn load(path: &Path) -> Result<ConfigFile> {
        match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text)
                .with_context(|| format!("invalid config file {}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ConfigFile::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Writes the file with mode 0600 (its directory 0700): it holds API keys.
    pub fn save(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let text = toml::to_string_pretty(self).context("cannot encode the config file")?;
        let tmp = path.with_extension("toml.tmp");
        let _ = std::fs::remove_file(&tmp);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
    }

    /// The profile name in effect: `--profile`/`SBX_PROFILE`, else `current`, else `default`.
    pub fn profile_name(&self, requested: Option<&str>) -> String {
        requested
            .map(str::to_string)
            .or_else(|| self.current.clone())
            .unwrap_or_else(|| DEFAULT_PROFILE.to_string())
    }
}

/// The settings a command runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Server URL, without a trailing slash.
    pub server: String,
    /// API key, if any.
    pub api_key: Option<String>,
    /// Name of the profile in effect.
    pub profile: String,
    /// Output format.
    pub output: OutputFormat,
    /// No progress or status lines.
    pub quiet: bool,
}

impl Settings {
    /// Resolves the settings from the global flags (which already include `SBX_*` env) and
    /// the config file.
    pub fn resolve(global: &GlobalArgs) -> Result<Settings> {
        let file = ConfigFile::load(&ConfigFile::path()?)?;
        Ok(Self::from_parts(global, &file))
    }

    /// The precedence rule itself, apart from the file system.
    pub fn from_parts(global: &GlobalArgs, file: &ConfigFile) -> Settings {
        let profile = file.profile_name(global.profile.as_deref());
        let stored = file.profiles.get(&profile).cloned().unwrap_or_default();
        let server = global
            .server
            .clone()
            .or(stored.server)
            .unwrap_or_else(|| paths::DEFAULT_SERVER.to_string());
        Settings {
            server: server.trim_end_matches('/').to_string(),
            api_key: global.api_key.clone().or(stored.api_key),
            profile,
            output: global.output.or(stored.output).unwrap_or_default(),
            quiet: global.quiet,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_beat_profile_beats_default() {
        let mut file = ConfigFile::default();
        file.profiles.insert(
            "prod".into(),
            Profile {
                server: Some("https://sbx.example.com/".into()),
                api_key: Some("k_s".into()),
                output: Some(OutputFormat::Json),
            },
        );
        file.current = Some("prod".into());

        let s = Settings::from_parts(&GlobalArgs::default(), &file);
        assert_eq!(s.server, "https://sbx.example.com");
        assert_eq!(s.api_key.as_deref(), Some("k_s"));
        assert_eq!(s.output, OutputFormat::Json);

        let global = GlobalArgs {
            server: Some("http://127.0.0.1:9".into()),
            output: Some(OutputFormat::Yaml),
            ..Default::default()
        };
        let s = Settings::from_parts(&global, &file);
        assert_eq!(s.server, "http://127.0.0.1:9");
        assert_eq!(s.api_key.as_deref(), Some("k_s"));
        assert_eq!(s.output, OutputFormat::Yaml);

        let global = GlobalArgs {
            profile: Some("other".into()),
            ..Default::default()
        };
        let s = Settings::from_parts(&global, &file);
        assert_eq!(s.server, paths::DEFAULT_SERVER);
        assert_eq!(s.api_key, None);
        assert_eq!(s.output, OutputFormat::Table);
    }

    #[test]
    fn saved_file_is_private_and_round_trips() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sbx").join("config.toml");
        let mut file = ConfigFile::default();
        file.profiles.insert(
            "default".into(),
            Profile {
                server: Some("http://x".into()),
                ..Default::default()
            },
        );
        file.save(&path).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(ConfigFile::load(&path).unwrap(), file);
        assert_eq!(
            ConfigFile::load(&dir.path().join("none.toml")).unwrap(),
            ConfigFile::default()
        );
    }
}
