//! Names both sides agree on: headers, environment variables, default addresses and files.
use std::path::PathBuf;

/// Header carrying an API key.
pub const API_KEY_HEADER: &str = "x-api-key";
/// Prefix of every resource route.
pub const API_PREFIX: &str = "/api/v1";
/// Where the OpenAPI document is served.
pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";
/// The CLI's default server and the daemon's default listen address, as a URL.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";
/// The daemon's default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// File in the data dir holding the first admin token (mode 0600).
pub const ADMIN_TOKEN_FILE: &str = "admin.token";

/// Environment variable: the server URL the CLI talks to.
pub const ENV_SERVER: &str = "SBX_SERVER";
/// Environment variable: the API key the CLI sends.
pub const ENV_API_KEY: &str = "SBX_API_KEY";
/// Environment variable: the CLI profile to use.
pub const ENV_PROFILE: &str = "SBX_PROFILE";
/// Environment variable: the CLI's output format.
pub const ENV_OUTPUT: &str = "SBX_OUTPUT";
/// Environment variable: where the CLI keeps its profiles (overrides the platform config dir).
pub const ENV_CONFIG_DIR: &str = "SBX_CONFIG_DIR";
/// Environment variable: the daemon's listen address.
pub const ENV_LISTEN: &str = "SBX_LISTEN";
/// Environment variable: the daemon's data directory.
pub const ENV_DATA_DIR: &str = "SBX_DATA_DIR";
/// Environment variable: the daemon's mode (`development` or `production`).
pub const ENV_MODE: &str = "SBX_MODE";
/// Environment variable: the daemon's platform (`local` or `kubernetes`).
pub const ENV_PLATFORM: &str = "SBX_PLATFORM";
/// Environment variable: the daemon's configuration file.
pub const ENV_CONFIG: &str = "SBX_CONFIG";
/// Environment variable: log filter for `sbx serve` (tracing `EnvFilter` syntax).
pub const ENV_LOG: &str = "SBX_LOG";
/// Environment variable naming the daemon's log format (`text`, `json`).
pub const ENV_LOG_FORMAT: &str = "SBX_LOG_FORMAT";

/// The daemon's default data directory: `/var/lib/sbx` for root, else the user's data dir.
pub fn default_data_dir() -> PathBuf {
    // The owner of /proc/self is the effective uid: no libc call needed.
    let is_root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    if is_root {
        PathBuf::from("/var/lib/sbx")
    } else {
        dirs::data_dir()
            .unwrap_or_else(std::env::temp_dir)
            .join("sbx")
    }
}
