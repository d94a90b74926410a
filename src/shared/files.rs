//! Wire types of the file routes (`/api/v1/sandboxes/{name}/files`): a path in a sandbox, what
//! is there, and the rules a path follows.
use serde::{Deserialize, Serialize};

use crate::shared::models::formats::{DnsLabel, SandboxPath};

/// Media type of the archives the file routes take and give.
pub const TAR: &str = "application/x-tar";

/// The most an upload may unpack (the sum of its files' sizes): 1 GiB.
pub const MAX_UPLOAD_BYTES: u64 = 1 << 30;

/// The body of an upload and of a download as documented: the raw bytes of a tar archive.
/// Never built in memory; the routes stream it.
#[derive(Debug, Clone, utoipa::ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct TarArchive(pub Vec<u8>);

/// The query of the file routes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FilesQuery {
    /// Namespace; `default` when omitted.
    #[serde(
        default,
        deserialize_with = "crate::shared::models::formats::namespace_param",
        skip_serializing_if = "Option::is_none"
    )]
    #[param(value_type = Option<DnsLabel>)]
    pub namespace: Option<String>,
    /// An absolute path in the sandbox (`/work/src`); `..` is refused. Upload: the directory
    /// the archive is unpacked in. Download: the file or directory archived (under its own
    /// name). Stat: the path looked at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(value_type = SandboxPath, required = true)]
    pub path: Option<String>,
}

/// What a path in a sandbox is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FileType {
    /// A regular file (or anything that is not a directory or a link).
    File,
    /// A directory.
    Directory,
    /// A symbolic link (not followed).
    Symlink,
}

impl FileType {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            FileType::File => "file",
            FileType::Directory => "directory",
            FileType::Symlink => "symlink",
        }
    }
}

/// A path in a sandbox and what is there (`GET …/files/stat`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FileStat {
    /// The path, normalized.
    pub path: String,
    /// What it is; a link is not followed.
    #[serde(rename = "type")]
    pub file_type: FileType,
}

/// What an upload unpacked (`PUT …/files`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct UploadResult {
    /// The directory the archive was unpacked in.
    pub path: String,
    /// Entries unpacked (files, directories, links).
    pub entries: u64,
    /// Bytes of file content unpacked.
    pub bytes: u64,
}

/// `path` made canonical: absolute, no empty, `.` or trailing components; or why it is refused
/// (not absolute, a `..`, a NUL).
pub fn sandbox_path(path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Err("`path` must not be empty".into());
    }
    if !path.starts_with('/') {
        return Err(format!(
            "path '{path}' is not absolute: name it from the sandbox's root (/…)"
        ));
    }
    if path.contains('\0') {
        return Err("path contains a NUL byte".into());
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(format!(
                    "path '{path}' has a '..' component: name the path without it"
                ));
            }
            other => parts.push(other),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

/// The parent directory and last component of a canonical path (`/` has none).
pub fn split(path: &str) -> Option<(&str, &str)> {
    let (parent, base) = path.rsplit_once('/')?;
    if base.is_empty() {
        return None;
    }
    Some((if parent.is_empty() { "/" } else { parent }, base))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(sandbox_path("/a//b/./c/").unwrap(), "/a/b/c");
        assert_eq!(sandbox_path("/").unwrap(), "/");
        for bad in ["", "a/b", "/a/../b", "/..", "/a\0b"] {
            assert!(sandbox_path(bad).is_err(), "{bad:?}");
        }
        assert_eq!(split("/a/b"), Some(("/a", "b")));
        assert_eq!(split("/a"), Some(("/", "a")));
        assert_eq!(split("/"), None);
    }
}
