//! Image references: parsing and the canonical form, one rule for the daemon (which pulls and
//! stores by it) and the CLI (which can check a reference before sending it). Parsing is
//! `oci-client`'s (the distribution reference grammar); only the messages are ours.
use oci_client::Reference;

/// Parses a reference, with a message that says what is expected.
pub fn parse_reference(reference: &str) -> Result<Reference, String> {
    let trimmed = reference.trim();
    if trimmed.is_empty() {
        return Err("the image reference is empty".into());
    }
    trimmed.parse::<Reference>().map_err(|e| {
        format!(
            "invalid image reference '{}': {e}; expected [REGISTRY/]REPOSITORY[:TAG][@DIGEST] \
             in lower case, e.g. busybox or 127.0.0.1:5000/team/app:1",
            clip(trimmed, 200)
        )
    })
}

/// The canonical form of an image reference: `busybox` → `docker.io/library/busybox:latest`;
/// references with a registry, tags and digests are kept as given.
pub fn normalize_reference(reference: &str) -> Result<String, String> {
    parse_reference(reference).map(|r| r.whole())
}

/// The first `max` characters of `text`, marked when cut (messages that quote what was given).
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}
