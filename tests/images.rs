//! The image routes and `sbx image` against the real `sbx serve` and a real registry on
//! loopback (Debian's docker-registry, started by `scripts/registry start`, which also builds
//! the test archives with `scripts/test-images`).
mod common;

use std::path::{Path, PathBuf};

use common::{Daemon, cli, test_registry};
use reqwest::StatusCode;
use sbx::cli::client::{ApiClient, ClientError};
use sbx::shared::models::identity::CreateKeyRequest;
use sbx::shared::models::image::{ImageRecord, PullImageRequest};
use serde_json::Value;

/// The directory holding `busybox.tar` (`scripts/test-images`).
fn test_images_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SBX_TEST_IMAGES") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("SBX_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/sbx")))
        .expect("HOME or SBX_CACHE");
    cache.join("images")
}

fn busybox_archive() -> PathBuf {
    let path = test_images_dir().join("busybox.tar");
    assert!(
        path.is_file(),
        "{} is missing: run scripts/test-images (or `eval $(scripts/registry start)`)",
        path.display()
    );
    path
}

/// A daemon that may pull from the loopback registry over plain HTTP (a private registry,
/// which tenant users may use), and try `127.0.0.1:1`, where nothing answers.
fn daemon_with_registry(registry: &str) -> (Daemon, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sbx.toml");
    std::fs::write(
        &config,
        format!(
            "[images]\ninsecureRegistries = [\"{registry}\"]\nprivateRegistries = \
             [\"{registry}\", \"127.0.0.1:1\"]\nallowedRegistries = [\"{registry}\"]\n"
        ),
    )
    .unwrap();
    let daemon = Daemon::start_with(&["--config", config.to_str().unwrap()]);
    (daemon, dir)
}

fn pull(reference: &str) -> PullImageRequest {
    PullImageRequest {
        reference: Some(reference.to_string()),
    }
}

fn api_error<T: std::fmt::Debug>(result: Result<T, ClientError>) -> (u16, String, String) {
    match result {
        Err(ClientError::Api(e)) => (e.status, e.code, e.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn layer_dirs(daemon: &Daemon) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(daemon.data_dir.join("images/layers"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

async fn key(daemon: &Daemon, name: &str, role: &str) -> ApiClient {
    let request = CreateKeyRequest {
        name: Some(name.into()),
        role: Some(role.into()),
        expires_days: Some(1),
        ..Default::default()
    };
    let token = daemon.admin().create_key(&request).await.unwrap().token;
    daemon.client(&token.expect("token"))
}

async fn post_raw(
    daemon: &Daemon,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let response = daemon
        .http()
        .post(format!("{}{path}", daemon.url))
        .header("X-API-Key", daemon.admin_token())
        .header("Content-Type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn pull_from_the_registry_reuses_layers_and_reports_failures() {
    let registry = test_registry();
    let (daemon, config_dir) = daemon_with_registry(&registry);
    let reference = format!("{registry}/sbx-test/busybox:latest");

    // 201 with the record, through plain HTTP to see the status.
    let (status, body) = post_raw(
        &daemon,
        "/api/v1/images/pull",
        "application/json",
        serde_json::to_vec(&pull(&reference)).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let first: ImageRecord = serde_json::from_value(body["data"].clone()).unwrap();
    assert_eq!(first.reference, reference);
    assert!(first.digest.starts_with("sha256:"), "{first:?}");
    assert_eq!(first.layers, 1);
    assert!(first.size_bytes > 1_000_000, "{first:?}");
    assert_eq!(first.entrypoint[0], "/bin/sh");
    assert_eq!(layer_dirs(&daemon).len(), 1);

    // Pulling again changes nothing and reuses the layer.
    let admin = daemon.admin();
    let again = admin
        .pull_image(&pull(&format!("{registry}/sbx-test/busybox")))
        .await
        .unwrap();
    assert_eq!(again, first, "an unchanged image is a no-op");
    assert_eq!(layer_dirs(&daemon).len(), 1);
    assert_eq!(admin.list_images().await.unwrap(), vec![first.clone()]);

    // A missing tag: 404; an unreachable registry: 503; a bad or missing reference: 400.
    let (status, code, message) = api_error(
        admin
            .pull_image(&pull(&format!("{registry}/sbx-test/busybox:nope")))
            .await,
    );
    assert_eq!((status, code.as_str()), (404, "NotFound"));
    assert!(message.contains("not found"), "{message}");
    assert!(message.contains("sbx-test/busybox:nope"), "{message}");

    let (status, code, message) = api_error(admin.pull_image(&pull("127.0.0.1:1/x/y:1")).await);
    assert_eq!((status, code.as_str()), (503, "ServiceUnavailable"));
    assert!(
        message.contains("cannot reach registry 127.0.0.1:1"),
        "{message}"
    );

    let (status, _, message) = api_error(admin.pull_image(&pull("Not A Reference")).await);
    assert_eq!(status, 400);
    assert!(message.contains("invalid image reference"), "{message}");

    let (status, _, message) = api_error(
        admin
            .pull_image(&PullImageRequest { reference: None })
            .await,
    );
    assert_eq!(status, 400);
    assert!(message.contains("`reference`"), "{message}");

    // The store survives a restart.
    let config_file = config_dir.path().join("sbx.toml");
    let daemon = daemon.restart(&["--config", config_file.to_str().unwrap()]);
    assert_eq!(daemon.admin().list_images().await.unwrap(), vec![first]);
}

#[tokio::test]
async fn import_through_the_cli_shares_layers_with_pulls() {
    let registry = test_registry();
    let (daemon, _config) = daemon_with_registry(&registry);
    let config = tempfile::tempdir().unwrap();
    let token = daemon.admin_token();
    let sbx = |args: &[&str]| {
        let mut cmd = cli(config.path());
        cmd.args(["--server", &daemon.url, "--api-key", &token]);
        cmd.args(args);
        cmd.output().unwrap()
    };
    let archive = busybox_archive();

    let output = sbx(&["image", "import", archive.to_str().unwrap()]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.starts_with("REFERENCE"), "{table}");
    assert!(
        table.contains("docker.io/sbx-test/busybox:latest"),
        "{table}"
    );

    // The registry holds the same image: its layer is already on disk.
    let pulled = daemon
        .admin()
        .pull_image(&pull(&format!("{registry}/sbx-test/busybox:latest")))
        .await
        .unwrap();
    assert_eq!(layer_dirs(&daemon).len(), 1, "one layer dir for both");

    let output = sbx(&["image", "list", "-o", "json"]);
    assert!(output.status.success());
    let listed: Vec<ImageRecord> = serde_json::from_slice(&output.stdout).unwrap();
    let references: Vec<&str> = listed.iter().map(|i| i.reference.as_str()).collect();
    assert_eq!(
        references,
        [
            pulled.reference.as_str(),
            "docker.io/sbx-test/busybox:latest"
        ]
    );
    assert_eq!(listed[0].digest, listed[1].digest, "the same manifest");

    let output = sbx(&["image", "list"]);
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        table
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            == ["REFERENCE", "DIGEST", "LAYERS", "SIZE", "CREATED"],
        "{table}"
    );
    assert!(table.contains(&listed[0].digest[7..19]), "{table}");

    // A file that is not an archive: 400 with a clear message, exit status 1.
    let junk = config.path().join("notes.txt");
    std::fs::write(&junk, "just some text, not a tar archive\n").unwrap();
    let output = sbx(&["image", "import", junk.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("not an OCI image archive") && stderr.contains("BadRequest"),
        "{stderr}"
    );
    let output = sbx(&["image", "import", "/nonexistent/busybox.tar"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot open"));
}

/// An archive written by skopeo names its image only by a tag: the file name gives the
/// repository.
#[tokio::test]
async fn skopeo_archives_are_named_after_their_file() {
    let registry = test_registry();
    let (daemon, _config) = daemon_with_registry(&registry);
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.json");
    std::fs::write(
        &policy,
        r#"{"default":[{"type":"insecureAcceptAnything"}]}"#,
    )
    .unwrap();
    let archive = dir.path().join("mybox.tar");
    let status = std::process::Command::new("skopeo")
        .arg("--policy")
        .arg(&policy)
        .args(["copy", "--quiet", "--src-tls-verify=false"])
        .arg(format!("docker://{registry}/sbx-test/busybox:latest"))
        .arg(format!("oci-archive:{}:v1", archive.display()))
        .status()
        .expect("skopeo (installed by scripts/registry)");
    assert!(status.success());

    let config = tempfile::tempdir().unwrap();
    let output = cli(config.path())
        .args(["--server", &daemon.url, "--api-key", &daemon.admin_token()])
        .args(["image", "import", "-o", "json", archive.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let imported: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        imported["images"][0]["reference"],
        "docker.io/library/mybox:v1"
    );
    assert_eq!(imported["images"][0]["layers"], 1);
}

#[tokio::test]
async fn roles_bodies_and_content_types_are_checked() {
    let daemon = Daemon::start();

    // read-only may list but not pull; only operators and admins import.
    let reader = key(&daemon, "reader", "read-only").await;
    assert_eq!(reader.list_images().await.unwrap(), vec![]);
    let (status, code, message) = api_error(reader.pull_image(&pull("busybox")).await);
    assert_eq!((status, code.as_str()), (403, "Forbidden"));
    assert!(message.contains("read-only"), "{message}");
    let user = key(&daemon, "dev", "user").await;
    let (status, _, _) = api_error(user.pull_image(&pull("Bad Ref")).await);
    assert_eq!(
        status, 400,
        "a user may pull; the reference is what is wrong"
    );
    let file = tokio::fs::File::open(busybox_archive()).await.unwrap();
    let (status, _, message) = api_error(user.import_images(file, "busybox.tar").await);
    assert_eq!(status, 403);
    assert!(message.contains("operator"), "{message}");

    // The import body: an archive, as application/x-tar, not empty.
    let (status, body) = post_raw(
        &daemon,
        "/api/v1/images/import",
        "application/json",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");
    assert_eq!(body["error"]["code"], "UnsupportedMediaType");
    let (status, body) = post_raw(
        &daemon,
        "/api/v1/images/import",
        "application/x-tar",
        vec![],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("empty"));
    let (status, body) = post_raw(
        &daemon,
        "/api/v1/images/import",
        "application/x-tar",
        vec![b'x'; 4096],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not an OCI image archive"),
        "{body}"
    );
    // Archives are not held to the 1 MiB limit of JSON bodies: a 3 MiB one built with
    // scripts/mkimage.py from incompressible data.
    let rootfs = tempfile::tempdir().unwrap();
    std::fs::create_dir(rootfs.path().join("data")).unwrap();
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let noise: Vec<u8> = (0..3 * 1024 * 1024)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    std::fs::write(rootfs.path().join("data/noise"), &noise).unwrap();
    let archive = rootfs.path().join("big.tar");
    let status = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/mkimage.py"))
        .arg(rootfs.path().join("data"))
        .arg(&archive)
        .args(["--ref", "sbx-test/noise:1", "--cmd", r#"["/noise"]"#])
        .status()
        .unwrap();
    assert!(status.success());
    let bytes = std::fs::read(&archive).unwrap();
    assert!(bytes.len() > 3 * 1024 * 1024);
    let (status, body) = post_raw(
        &daemon,
        "/api/v1/images/import?file_name=big.tar",
        "application/x-tar",
        bytes,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let record: ImageRecord = serde_json::from_value(body["data"]["images"][0].clone()).unwrap();
    assert_eq!(record.reference, "docker.io/sbx-test/noise:1");
    assert_eq!(record.cmd, ["/noise"]);
    assert_eq!(record.size_bytes, noise.len() as u64);
    assert!(
        Path::new(&daemon.data_dir.join("images/tmp"))
            .read_dir()
            .unwrap()
            .next()
            .is_none(),
        "uploads and extraction leave nothing behind"
    );
}

#[tokio::test]
async fn a_plain_http_registry_must_be_listed_as_insecure() {
    let registry = test_registry();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sbx.toml");
    std::fs::write(
        &config,
        format!("[images]\nprivateRegistries = [\"{registry}\"]\n"),
    )
    .unwrap();
    let daemon = Daemon::start_with(&["--config", config.to_str().unwrap()]);
    let (status, _, message) = api_error(
        daemon
            .admin()
            .pull_image(&pull(&format!("{registry}/sbx-test/busybox")))
            .await,
    );
    assert_eq!(status, 503);
    assert!(
        message.contains("cannot reach registry") && message.contains("insecureRegistries"),
        "{message}"
    );
}
