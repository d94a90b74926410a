//! OCI documents (index, manifest, image config), read leniently: only the fields the store
//! needs.
use super::*;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DescriptorDoc {
    #[serde(default)]
    pub(super) media_type: String,
    pub(super) digest: String,
    #[serde(default)]
    pub(super) platform: Option<PlatformDoc>,
    #[serde(default)]
    pub(super) annotations: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct PlatformDoc {
    #[serde(default)]
    pub(super) os: String,
    #[serde(default)]
    pub(super) architecture: String,
}

impl PlatformDoc {
    pub(super) fn matches_host(&self) -> bool {
        self.os == "linux" && self.architecture == host_architecture()
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct IndexDoc {
    #[serde(default)]
    pub(super) manifests: Vec<DescriptorDoc>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ManifestDoc {
    pub(super) config: DescriptorDoc,
    #[serde(default)]
    pub(super) layers: Vec<DescriptorDoc>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct ConfigDoc {
    #[serde(default)]
    pub(super) architecture: String,
    #[serde(default)]
    pub(super) os: String,
    #[serde(default)]
    pub(super) config: Option<RuntimeConfigDoc>,
    pub(super) rootfs: RootFsDoc,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct RuntimeConfigDoc {
    #[serde(default)]
    pub(super) entrypoint: Option<Vec<String>>,
    #[serde(default)]
    pub(super) cmd: Option<Vec<String>>,
    #[serde(default)]
    pub(super) env: Option<Vec<String>>,
    #[serde(default)]
    pub(super) working_dir: Option<String>,
    #[serde(default)]
    pub(super) user: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RootFsDoc {
    #[serde(default)]
    pub(super) diff_ids: Vec<String>,
}

impl ConfigDoc {
    pub(super) fn platform_matches_host(&self) -> bool {
        (self.os.is_empty() || self.os == "linux")
            && (self.architecture.is_empty() || self.architecture == host_architecture())
    }

    pub(super) fn runtime_config(&self) -> ImageConfig {
        let Some(config) = &self.config else {
            return ImageConfig::default();
        };
        let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        ImageConfig {
            entrypoint: config.entrypoint.clone().unwrap_or_default(),
            cmd: config.cmd.clone().unwrap_or_default(),
            env: config.env.clone().unwrap_or_default(),
            working_dir: non_empty(&config.working_dir),
            user: non_empty(&config.user),
        }
    }
}

pub(super) fn parse_config(bytes: &[u8]) -> Result<ConfigDoc, String> {
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}
