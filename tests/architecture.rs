//! The rooms of docs/architecture.md and what each may import, checked on the source: a use
//! of a forbidden path outside a file's `#[cfg(test)]` part fails here, naming the file and
//! the line.
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir)
            .expect("read the source tree")
            .flatten()
        {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join(dir), &mut out);
    assert!(!out.is_empty(), "no sources under {dir}");
    out
}

/// Lines of the room's files (before their tests) that mention one of `forbidden`.
fn offences(dir: &str, forbidden: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for path in sources(dir) {
        let text = std::fs::read_to_string(&path).expect("read a source file");
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("#[cfg(test)]") {
                break;
            }
            if line.trim_start().starts_with("//") {
                continue;
            }
            if let Some(what) = forbidden.iter().find(|f| line.contains(*f)) {
                found.push(format!("{}:{}: {what}", path.display(), n + 1));
            }
        }
    }
    found
}

#[test]
fn shared_imports_neither_side() {
    let found = offences(
        "src/shared",
        &[
            "crate::daemon",
            "crate::cli",
            "crate::runtime",
            "crate::agent",
        ],
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_runtime_is_its_own_room() {
    let found = offences("src/runtime", &["crate::daemon", "crate::cli"]);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_agent_is_its_own_room() {
    // It hosts the platform seam's sandbox manager; the daemon's HTTP side is not its business,
    // except the listener: the connection handling that bounds slow clients and completes TLS
    // before a request is read, which the agent's server needs as much as the API's.
    let found = offences(
        "src/agent",
        &[
            "crate::cli",
            "crate::daemon::services",
            "crate::daemon::routes",
            "crate::daemon::state",
            "crate::daemon::auth",
            "crate::daemon::config",
        ],
    );
    assert!(found.is_empty(), "{found:#?}");
    for path in sources("src/agent") {
        let text = std::fs::read_to_string(&path).expect("read a source file");
        for (n, line) in text.lines().enumerate() {
            let beside = line.match_indices("crate::daemon").any(|(at, _)| {
                !line[at..].starts_with("crate::daemon::platform")
                    && !line[at..].starts_with("crate::daemon::listener")
            });
            assert!(!beside, "{}:{}: {line}", path.display(), n + 1);
        }
    }
}

#[test]
fn only_the_local_platform_uses_the_runtime() {
    for room in [
        "src/daemon/routes",
        "src/daemon/services",
        "src/daemon/platform/kubernetes",
    ] {
        let found = offences(room, &["crate::runtime"]);
        assert!(found.is_empty(), "{found:#?}");
    }
}

#[test]
fn routes_reach_the_platform_only_through_services() {
    let found = offences(
        "src/daemon/routes",
        &["crate::daemon::platform", ".platform"],
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn nothing_below_the_routes_imports_them() {
    for room in ["src/daemon/services", "src/daemon/platform"] {
        let found = offences(room, &["crate::daemon::routes"]);
        assert!(found.is_empty(), "{found:#?}");
    }
}

#[test]
fn the_kubernetes_platform_does_not_lean_on_the_local_one() {
    let found = offences("src/daemon/platform/kubernetes", &["platform::local"]);
    assert!(found.is_empty(), "{found:#?}");
}
