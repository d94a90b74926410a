//! The `files` scenario: `sbx sandbox cp` both ways (a tree with modes, a link and a binary
//! file, renamed or into a directory, an archive on stdout), the archive checks and every
//! refusal in the envelope. Under KWOK the "sandbox" is the test host (KWOK runs exec there),
//! so the scenario works under a directory of its own in /tmp on every platform.
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use reqwest::Method as M;
use sbx::shared::files::FileType;

use super::{Env, Platform, api_status};
use crate::common::{self, call_at};

/// Runs `sbx sandbox cp` against the scenario's service; its stdout.
fn cp(env: &Env, from: &str, to: &str) -> Vec<u8> {
    let out = std::process::Command::new(common::sbx_bin())
        .args(["sandbox", "cp", "-n", &env.namespace, from, to])
        .env("SBX_SERVER", &env.url)
        .env("SBX_API_KEY", &env.token)
        .env(
            "SBX_CONFIG_DIR",
            std::env::temp_dir().join("sbx-cp-cli-none"),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sbx sandbox cp {from} {to}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A raw upload: its status and body.
async fn put(env: &Env, name: &str, path: &str, body: Vec<u8>, kind: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .put(format!(
            "{}/api/v1/sandboxes/{name}/files?namespace={}&path={path}",
            env.url, env.namespace
        ))
        .header("x-api-key", &env.token)
        .header("content-type", kind)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// A tar archive of raw entries (`name`, type, data, link target) as a hostile client writes
/// it: names the tar crate's own builder would refuse go in as they are.
fn raw_archive(entries: &[(&str, tar::EntryType, &[u8], &str)]) -> Vec<u8> {
    let mut out = tar::Builder::new(Vec::new());
    for (name, kind, data, target) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(*kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        h.as_old_mut().linkname[..target.len()].copy_from_slice(target.as_bytes());
        h.set_cksum();
        out.append(&h, *data).unwrap();
    }
    out.into_inner().unwrap()
}

/// The tree's files: relative path → (mode, bytes or link target).
fn tree(root: &Path) -> Vec<(String, u32, Vec<u8>)> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let content = if meta.file_type().is_symlink() {
                std::fs::read_link(&path)
                    .unwrap()
                    .display()
                    .to_string()
                    .into_bytes()
            } else if meta.is_dir() {
                stack.push(path.clone());
                Vec::new()
            } else {
                std::fs::read(&path).unwrap()
            };
            let mode = if meta.file_type().is_symlink() {
                0
            } else {
                meta.permissions().mode() & 0o7777
            };
            found.push((rel, mode, content));
        }
    }
    found.sort();
    found
}

pub(super) async fn files(platform: Platform) {
    let env = Env::new(platform, "files").await;
    let name = "files";
    env.create(name).await;
    let base = format!("/tmp/sbx-files-{}-{}", std::process::id(), name);
    let r = env
        .exec(name, &format!("rm -rf {base} && mkdir -p {base}"))
        .await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    let sandbox = |path: &str| format!("{name}:{base}{path}");

    // A local tree: modes, a link, a binary file, a directory.
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("a.txt"), "hello\n").unwrap();
    std::fs::write(src.join("run.sh"), "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(src.join("run.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    let blob: Vec<u8> = (0..300_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(src.join("sub/blob"), &blob).unwrap();
    std::os::unix::fs::symlink("a.txt", src.join("link")).unwrap();

    // Into an existing directory: under its own name.
    cp(&env, src.to_str().unwrap(), &sandbox(""));
    let r = env
        .exec(
            name,
            &format!("cd {base}/src && cat a.txt && ./run.sh && readlink link && stat -c %a run.sh && wc -c < sub/blob"),
        )
        .await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().map(str::trim).collect();
    assert_eq!(lines, ["hello", "ran", "a.txt", "750", "300000"], "{r:?}");
    let stat = env
        .client
        .stat_file(name, &env.namespace, &format!("{base}/src/link"))
        .await
        .unwrap();
    assert_eq!(stat.file_type, FileType::Symlink);
    let stat = env
        .client
        .stat_file(name, &env.namespace, &format!("{base}/src/"))
        .await
        .unwrap();
    assert_eq!(
        (stat.file_type, stat.path),
        (FileType::Directory, format!("{base}/src"))
    );

    // A file under a new name, then replaced.
    cp(
        &env,
        src.join("run.sh").to_str().unwrap(),
        &sandbox("/renamed.sh"),
    );
    cp(
        &env,
        src.join("a.txt").to_str().unwrap(),
        &sandbox("/renamed.sh"),
    );
    let r = env.exec(name, &format!("cat {base}/renamed.sh")).await;
    assert_eq!(r.stdout, "hello\n", "{r:?}");

    // And back: the same tree, byte for byte, modes and the link kept.
    let back = local.path().join("back");
    cp(&env, &sandbox("/src"), back.to_str().unwrap());
    assert_eq!(tree(&back), tree(&src));
    // Into an existing local directory: under its own name.
    let into = local.path().join("into");
    std::fs::create_dir(&into).unwrap();
    cp(&env, &sandbox("/src/sub"), into.to_str().unwrap());
    assert_eq!(std::fs::read(into.join("sub/blob")).unwrap(), blob);
    // The archive itself on stdout: one entry, under the file's own name.
    let archive = cp(&env, &sandbox("/src/a.txt"), "-");
    let mut entries = tar::Archive::new(&archive[..]);
    let names: Vec<String> = entries
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert_eq!(names, ["a.txt"]);

    // Refusals, each in the envelope with its status.
    let at = |p: &str| format!("{base}{p}");
    let stat = |p: String| {
        let client = env.client.clone();
        let namespace = env.namespace.clone();
        async move { client.stat_file(name, &namespace, &p).await }
    };
    assert_eq!(
        api_status(stat(at("/nothing")).await),
        (404, "NotFound".into())
    );
    assert_eq!(
        api_status(stat("relative".into()).await),
        (400, "BadRequest".into())
    );
    assert_eq!(
        api_status(stat(at("/../etc")).await),
        (400, "BadRequest".into())
    );
    assert_eq!(
        api_status(env.client.stat_file("nope", &env.namespace, "/tmp").await),
        (404, "NotFound".into())
    );
    let download = |p: String| {
        let client = env.client.clone();
        let namespace = env.namespace.clone();
        async move { client.download_files(name, &namespace, &p).await.map(drop) }
    };
    assert_eq!(
        api_status(download(at("/nothing")).await),
        (404, "NotFound".into())
    );
    assert_eq!(
        api_status(download("/".into()).await),
        (400, "BadRequest".into())
    );

    let good = raw_archive(&[("ok.txt", tar::EntryType::Regular, b"ok", "")]);
    let (status, body) = put(&env, name, &at(""), good.clone(), "text/plain").await;
    assert_eq!(status, 415, "{body}");
    let (status, body) = put(
        &env,
        name,
        &at("/nothing"),
        good.clone(),
        "application/x-tar",
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = put(
        &env,
        name,
        &at("/renamed.sh"),
        good.clone(),
        "application/x-tar",
    )
    .await;
    assert!(
        status == 400 && body.contains("not a directory"),
        "{status} {body}"
    );
    let (status, body) = put(&env, name, &at(""), good, "application/x-tar").await;
    assert_eq!(status, 200, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["data"]["entries"], 1);
    for (archive, wanted) in [
        (
            raw_archive(&[("../escape", tar::EntryType::Regular, b"x", "")]),
            "'..'",
        ),
        (
            raw_archive(&[("/abs", tar::EntryType::Regular, b"x", "")]),
            "absolute",
        ),
        (
            raw_archive(&[
                ("out", tar::EntryType::Symlink, b"", "/"),
                ("out/etc/x", tar::EntryType::Regular, b"x", ""),
            ]),
            "under a link",
        ),
        (
            raw_archive(&[("dev", tar::EntryType::Char, b"", "")]),
            "an upload takes",
        ),
        (
            b"plain text, not an archive".repeat(30),
            "not a tar archive",
        ),
    ] {
        let (status, body) = put(&env, name, &at(""), archive, "application/x-tar").await;
        assert!(
            status == 400 && body.contains(wanted),
            "{wanted}: {status} {body}"
        );
    }
    // A header claiming more than the limit is refused before its content is read.
    let mut huge = tar::Header::new_gnu();
    huge.set_path("huge").unwrap();
    huge.set_size(2 << 30);
    huge.set_cksum();
    let (status, body) = put(
        &env,
        name,
        &at(""),
        huge.as_bytes().to_vec(),
        "application/x-tar",
    )
    .await;
    assert_eq!(status, 413, "{body}");
    // Nothing escaped: no file left the directory, nothing was written through a link.
    let r = env
        .exec(
            name,
            &format!("cat {base}/ok.txt; test ! -e /tmp/escape && test ! -e /abs && test ! -e /etc/x && test ! -e {base}/out/etc/x"),
        )
        .await;
    assert_eq!((r.exit_code, r.stdout.as_str()), (0, "ok"), "{r:?}");
    let (status, _) = call_at(
        &env.url,
        &env.token,
        M::GET,
        &format!("/api/v1/sandboxes/{name}/files?namespace={}", env.namespace),
        None,
    )
    .await;
    assert_eq!(status, 400);

    let _ = env.exec(name, &format!("rm -rf {base}")).await;
    env.cleanup().await;
}
