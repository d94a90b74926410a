//! Archives: an OCI image layout in a tar (or tar.gz), extracted and read blob by blob.
use super::*;

/// Extracts the parts of an OCI layout (`oci-layout`, `index.json`, `blobs/<alg>/<hex>`) from
/// a tar or tar.gz into `dest`; everything else in the archive is ignored.
pub(super) fn extract_layout(archive: &Path, dest: &Path) -> Result<(), ImageError> {
    let file = File::open(archive).map_err(ImageError::io(format!(
        "cannot open archive {}",
        archive.display()
    )))?;
    let mut reader = BufReader::new(file);
    let gzip = reader
        .fill_buf()
        .map_err(ImageError::io("cannot read the archive"))?
        .starts_with(&[0x1f, 0x8b]);
    let input: Box<dyn Read> = if gzip {
        Box::new(flate2::read::MultiGzDecoder::new(reader))
    } else {
        Box::new(reader)
    };
    let not_tar = |e: io::Error| match crate::shared::tar_guard::ExtensionTooLarge::find(&e) {
        Some(refused) => {
            ImageError::InvalidArchive(format!("the archive is refused: {}", refused.message()))
        }
        None => ImageError::InvalidArchive(format!(
            "not an OCI image archive: cannot read it as a tar file ({e})"
        )),
    };
    fs::create_dir_all(dest.join("blobs"))
        .map_err(ImageError::io(format!("cannot create {}", dest.display())))?;
    let mut archive = tar::Archive::new(crate::shared::tar_guard::TarGuard::new(input));
    let mut entries_seen = 0usize;
    for entry in archive.entries().map_err(not_tar)? {
        let mut entry = entry.map_err(not_tar)?;
        entries_seen += 1;
        let path = entry.path().map_err(not_tar)?.into_owned();
        let Ok(Some(relative)) = safe_relative(&path) else {
            continue;
        };
        let parts: Vec<&str> = relative.iter().filter_map(OsStr::to_str).collect();
        let wanted = match parts.as_slice() {
            ["oci-layout"] | ["index.json"] => true,
            ["blobs", algorithm, hex] => {
                matches!(*algorithm, "sha256" | "sha512")
                    && !hex.is_empty()
                    && hex.bytes().all(|b| b.is_ascii_hexdigit())
            }
            _ => false,
        };
        if !wanted || !entry.header().entry_type().is_file() {
            continue;
        }
        let target = dest.join(&relative);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(ImageError::io(format!(
                "cannot create {}",
                parent.display()
            )))?;
        }
        let mut out = File::create(&target).map_err(ImageError::io(format!(
            "cannot create {}",
            target.display()
        )))?;
        copy_checked(&mut entry, &mut out).map_err(|e| match e {
            CopyError::Read(e) => not_tar(e),
            CopyError::Write(e) => ImageError::Io {
                context: format!("cannot write {}", target.display()),
                source: e,
            },
        })?;
    }
    if entries_seen == 0 || !dest.join("index.json").is_file() {
        return Err(ImageError::InvalidArchive(
            "not an OCI image archive: it has no index.json; make one with `skopeo copy \
             docker://IMAGE oci-archive:FILE:NAME:TAG` or `podman save --format oci-archive`"
                .into(),
        ));
    }
    Ok(())
}

/// The blob file of a digest in an extracted layout.
pub(super) fn blob_path(layout: &Path, digest: &str) -> Result<PathBuf, ImageError> {
    let hex = digest_hex(digest).map_err(|reason| {
        ImageError::InvalidArchive(format!("the archive refers to a bad digest: {reason}"))
    })?;
    let path = layout.join("blobs").join("sha256").join(hex);
    if !path.is_file() {
        return Err(ImageError::InvalidArchive(format!(
            "the archive lacks blob {digest}"
        )));
    }
    Ok(path)
}

/// A small blob of an extracted layout, verified against its digest.
pub(super) fn read_blob(layout: &Path, digest: &str) -> Result<Vec<u8>, ImageError> {
    let path = blob_path(layout, digest)?;
    let mut bytes = Vec::new();
    File::open(&path)
        .and_then(|f| f.take(MAX_JSON_BYTES + 1).read_to_end(&mut bytes))
        .map_err(ImageError::io(format!("cannot read {}", path.display())))?;
    if bytes.len() as u64 > MAX_JSON_BYTES {
        return Err(ImageError::InvalidArchive(format!(
            "blob {digest} is too large for a manifest or config"
        )));
    }
    let mut hasher = Sha256::new();
    hasher.update(&bytes);
    if sha256_digest(hasher) != digest {
        return Err(ImageError::InvalidArchive(format!(
            "blob {digest} in the archive does not match its digest"
        )));
    }
    Ok(bytes)
}

pub(super) fn read_json_blob<T: serde::de::DeserializeOwned>(
    layout: &Path,
    digest: &str,
) -> Result<T, ImageError> {
    let bytes = read_blob(layout, digest)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ImageError::InvalidArchive(format!("blob {digest} is not a valid OCI document: {e}"))
    })
}

pub(super) fn is_index_media_type(media_type: &str) -> bool {
    media_type == "application/vnd.oci.image.index.v1+json"
        || media_type == "application/vnd.docker.distribution.manifest.list.v2+json"
}

/// The images of an extracted layout: (normalized reference, manifest descriptor), with nested
/// indexes resolved to the host's platform.
pub(super) fn archive_manifests(
    layout: &Path,
    fallback_name: Option<&str>,
) -> Result<Vec<(String, DescriptorDoc)>, ImageError> {
    let index_path = layout.join("index.json");
    let index_bytes = fs::read(&index_path).map_err(ImageError::io("cannot read index.json"))?;
    let index: IndexDoc = serde_json::from_slice(&index_bytes).map_err(|e| {
        ImageError::InvalidArchive(format!("the archive's index.json is not valid: {e}"))
    })?;
    if index.manifests.is_empty() {
        return Err(ImageError::InvalidArchive(
            "the archive's index.json lists no images".into(),
        ));
    }
    let mut found = Vec::new();
    for descriptor in index.manifests {
        let reference = archive_reference(&descriptor.annotations, fallback_name)?;
        if descriptor
            .platform
            .as_ref()
            .is_some_and(|p| !p.matches_host())
        {
            continue;
        }
        let manifest = if is_index_media_type(&descriptor.media_type) {
            let nested: IndexDoc = read_json_blob(layout, &descriptor.digest)?;
            let Some(chosen) = nested
                .manifests
                .into_iter()
                .find(|m| m.platform.as_ref().is_none_or(PlatformDoc::matches_host))
            else {
                continue;
            };
            chosen
        } else {
            descriptor
        };
        found.push((reference, manifest));
    }
    Ok(found)
}

/// The normalized reference of an archived manifest from its annotations.
pub(super) fn archive_reference(
    annotations: &BTreeMap<String, String>,
    fallback_name: Option<&str>,
) -> Result<String, ImageError> {
    let invalid = |e: ImageError| {
        ImageError::InvalidArchive(format!("the archive names an image badly: {e}"))
    };
    if let Some(name) = annotations.get(ANNOTATION_IMAGE_NAME) {
        return normalize_reference(name).map_err(invalid);
    }
    let ref_name = annotations.get(ANNOTATION_REF_NAME).map(String::as_str);
    match ref_name {
        // A full name has a repository part before a tag, or a path.
        Some(name) if name.contains(['/', ':', '@']) => normalize_reference(name).map_err(invalid),
        tag => {
            let tag = tag.unwrap_or("latest");
            let Some(repository) = fallback_name else {
                return Err(ImageError::InvalidArchive(format!(
                    "an image in the archive is named only by the tag '{}' and no file name \
                     gives its repository; name the image when making the archive (NAME:TAG)",
                    clip(tag, 100)
                )));
            };
            normalize_reference(&format!("{repository}:{tag}")).map_err(invalid)
        }
    }
}
