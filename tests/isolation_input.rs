//! Issue 43, point 13 and the device nodes of point 10: what one tenant's upload or image may
//! cost the daemon, black-box against a real `sbx serve` with real sandboxes (runc, the
//! loopback registry). A tar archive's extension headers (GNU long names, PAX) announcing
//! gigabytes are refused by their header, before the daemon reads them into memory (checked
//! on the daemon's peak RSS); a body past 1.1 GiB is a 413; an image layer carrying such a
//! header is refused, and one carrying device nodes unpacks without them (whiteouts kept).
//! Needs root.
mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::Daemon;
use common::sbxd::{self, TestNet};
use sbx::cli::client::ApiClient;
use sbx::shared::models::sandbox::CreateSandboxRequest;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// How much the daemon's peak RSS may pass its RSS before an attack.
const RSS_SLACK: u64 = 50 << 20;

/// A field of `/proc/<pid>/status`, in bytes.
fn status_bytes(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("a number of kB");
    kib << 10
}

/// Runs `attack` and returns its result with how far the daemon's peak RSS (`VmHWM`, reset
/// first through `clear_refs`) went above its RSS before it.
async fn peak_rss_growth<T>(
    daemon: &Daemon,
    attack: impl std::future::Future<Output = T>,
) -> (T, u64) {
    let pid = daemon.pid();
    // Writing 5 resets the peak to the current RSS (proc(5)).
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset VmHWM");
    let before = status_bytes(pid, "VmRSS:");
    let out = attack.await;
    let peak = status_bytes(pid, "VmHWM:");
    eprintln!(
        "daemon RSS {} MiB before, peak {} MiB during",
        before >> 20,
        peak >> 20
    );
    (out, peak.saturating_sub(before))
}

/// A tar header block of `kind` announcing `size` bytes, with GNU magic.
fn header(name: &str, kind: tar::EntryType, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(0o644);
    h.set_mtime(1_700_000_000);
    h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    h.set_cksum();
    h
}

/// A body of `head` followed by `total - head.len()` bytes of `fill`, made as it is sent
/// (1 MiB chunks of one buffer): gigabytes cost the test nothing.
fn generated(head: Vec<u8>, fill: u8, total: u64) -> Body {
    let chunk = Bytes::from(vec![fill; 1 << 20]);
    let mut left = total - head.len() as u64;
    let more = std::iter::from_fn(move || {
        (left > 0).then(|| {
            let n = left.min(chunk.len() as u64);
            left -= n;
            chunk.slice(..n as usize)
        })
    });
    Box::new(std::iter::once(Bytes::from(head)).chain(more))
}

/// A body that repeats `unit` until `total` bytes (then stops at a unit's end).
fn repeated(unit: Vec<u8>, total: u64) -> Body {
    let unit = Bytes::from(unit);
    let count = total.div_ceil(unit.len() as u64);
    Box::new((0..count).map(move |_| unit.clone()))
}

/// A request body, chunk by chunk.
type Body = Box<dyn Iterator<Item = Bytes> + Send>;

/// `PUT /files` of `body` (chunked) into `dir` of the sandbox: status and envelope. A plain
/// HTTP/1.1 client over a socket: the body is sent from a thread while the answer is read,
/// and a daemon that answers early and closes (as it must for a refused body of gigabytes)
/// ends the sending, not the reading; HTTP clients that give up on a failed write would
/// report a broken connection instead of the answer.
async fn upload(daemon: &Daemon, token: &str, name: &str, dir: &str, body: Body) -> (u16, Value) {
    let addr = daemon.url.trim_start_matches("http://").to_string();
    let head = format!(
        "PUT /api/v1/sandboxes/{name}/files?path={dir} HTTP/1.1\r\nHost: {addr}\r\n\
         X-Api-Key: {token}\r\nContent-Type: application/x-tar\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let stream = std::net::TcpStream::connect(&addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(300)))
            .unwrap();
        let mut writer = stream.try_clone().unwrap();
        let sender = std::thread::spawn(move || {
            let send = || -> std::io::Result<()> {
                writer.write_all(head.as_bytes())?;
                for chunk in body {
                    write!(writer, "{:x}\r\n", chunk.len())?;
                    writer.write_all(&chunk)?;
                    writer.write_all(b"\r\n")?;
                }
                writer.write_all(b"0\r\n\r\n")
            };
            // A refused body ends in a reset: the answer is what counts.
            let _ = send();
        });
        let mut reader = stream.try_clone().unwrap();
        let mut answer = Vec::new();
        let mut buf = vec![0u8; 64 << 10];
        let (status, text) = loop {
            let n = reader.read(&mut buf).unwrap_or(0);
            answer.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&answer).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(usize::MAX);
                if body.len() >= length || n == 0 {
                    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok());
                    break (status.unwrap_or(0), body.to_string());
                }
            }
            assert!(n > 0, "the connection ended before an answer: {text:?}");
        };
        let _ = stream.shutdown(std::net::Shutdown::Both);
        sender.join().expect("sender");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    })
    .await
    .expect("upload task")
}

async fn sh(client: &ApiClient, name: &str, command: &str) -> (i32, String) {
    let (code, stdout, stderr) = sbxd::exec(client, name, "default", command).await;
    (code, format!("{stdout}{stderr}"))
}

async fn create_running(client: &ApiClient, name: &str, image: &str) {
    client
        .create_sandbox(&CreateSandboxRequest {
            name: Some(name.into()),
            image: Some(image.into()),
            ..Default::default()
        })
        .await
        .expect("create");
    sbxd::running(client, name, "default").await;
}

/// An archive with a file under a 3,000-byte path: a GNU long name well under 64 KiB.
fn long_path_archive() -> (String, Vec<u8>) {
    let path = (0..15)
        .map(|i| format!("{i:02}{}", "d".repeat(195)))
        .collect::<Vec<_>>()
        .join("/")
        + "/f";
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(6);
    h.set_mode(0o644);
    b.append_data(&mut h, &path, &b"long!\n"[..]).unwrap();
    (path, b.into_inner().unwrap())
}

#[tokio::test]
async fn uploads_with_gigantic_extension_headers_are_refused_before_they_are_read() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let admin = daemon.admin();
    let token = common::key(&admin, "tenant-user", "user", None).await;
    let user = daemon.client(&token);
    create_running(&user, "up", &sbxd::busybox()).await;
    sh(&user, "up", "mkdir -p /tmp/in").await;

    // Control: a long name (GNU `L`, 3,000 bytes) is still an ordinary upload.
    let (path, archive) = long_path_archive();
    let (status, body) = upload(
        &daemon,
        &token,
        "up",
        "/tmp/in",
        Box::new(std::iter::once(archive.into())),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        sh(&user, "up", &format!("cat '/tmp/in/{path}'")).await,
        (0, "long!\n".into())
    );

    // A GNU long name, then a PAX header, each announcing 4 GiB and followed by as many bytes
    // as the client can send. Read, they would be one 4 GiB allocation (the tar crate reads
    // an extension header whole); refused by their header, the daemon reads a bounded drain.
    for (kind, what) in [
        (
            tar::EntryType::GNULongName,
            "GNU long name ('L') of 4294967296 bytes",
        ),
        (
            tar::EntryType::XHeader,
            "PAX extended header ('x') of 4294967296 bytes",
        ),
    ] {
        let head = header("././@LongLink", kind, 4 << 30).as_bytes().to_vec();
        let body = generated(head, b'a', 512 + (4 << 30));
        let started = Instant::now();
        let ((status, body), growth) =
            peak_rss_growth(&daemon, upload(&daemon, &token, "up", "/tmp/in", body)).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("BadRequest")),
            "{body}"
        );
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(what) && message.contains("at most 65536 bytes"),
            "{message}"
        );
        assert!(
            growth < RSS_SLACK,
            "{what}: the daemon's RSS grew by {growth} bytes"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{:?}",
            started.elapsed()
        );
    }

    // The daemon still serves, uploads included.
    let (_, archive) = long_path_archive();
    let (status, body) = upload(
        &daemon,
        &token,
        "up",
        "/tmp/in",
        Box::new(std::iter::once(archive.into())),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        sh(&user, "up", "echo still here").await,
        (0, "still here\n".into())
    );
    user.delete_sandbox("up", "default").await.expect("delete");
}

#[tokio::test]
async fn an_upload_body_past_its_limit_is_refused_without_being_buffered() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let admin = daemon.admin();
    let token = common::key(&admin, "tenant-user", "user", None).await;
    let user = daemon.client(&token);
    create_running(&user, "big", &sbxd::busybox()).await;
    sh(&user, "big", "mkdir -p /tmp/in /tmp/in2").await;

    // 1.2 GiB of archive whose content is a few KiB: each unit is a PAX header of 60 KiB
    // (a comment record: headers count to no content limit) and a 1-byte file. Only the
    // body's own limit (1.1 GiB) can stop it.
    let value = "c".repeat(60 * 1024 - 20);
    let record_body = format!(" comment={value}\n");
    let len = record_body.len() + 5;
    let record = format!("{len}{record_body}");
    assert_eq!(record.len(), len);
    let mut unit = header(
        "././@PaxHeader",
        tar::EntryType::XHeader,
        record.len() as u64,
    )
    .as_bytes()
    .to_vec();
    unit.extend(record.as_bytes());
    unit.resize(unit.len().div_ceil(512) * 512, 0);
    unit.extend(header("a", tar::EntryType::Regular, 1).as_bytes());
    unit.extend(b"a");
    unit.resize(unit.len().div_ceil(512) * 512, 0);

    // Control: a few such units are an ordinary upload.
    let mut small = unit.repeat(3);
    small.extend([0u8; 1024]);
    let (status, body) = upload(
        &daemon,
        &token,
        "big",
        "/tmp/in",
        Box::new(std::iter::once(Bytes::from(small.clone()))),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let started = Instant::now();
    let ((status, body), growth) = peak_rss_growth(
        &daemon,
        upload(
            &daemon,
            &token,
            "big",
            "/tmp/in",
            repeated(unit, 1200 << 20),
        ),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (413, Some("PayloadTooLarge")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("larger than 1181116006 bytes"),
        "{body}"
    );
    assert!(
        growth < RSS_SLACK,
        "the daemon's RSS grew by {growth} bytes"
    );
    eprintln!("1.2 GiB refused in {:?}", started.elapsed());

    // A body announced too large is refused before it is read.
    let response = reqwest::Client::new()
        .put(format!(
            "{}/api/v1/sandboxes/big/files?path=/tmp/in",
            daemon.url
        ))
        .header("x-api-key", &token)
        .header("content-type", "application/x-tar")
        .header("content-length", (2u64 << 30).to_string())
        .body(Vec::new())
        .send()
        .await;
    if let Ok(response) = response {
        assert_eq!(response.status().as_u16(), 413);
    }
    // The daemon still serves: the control upload again, in a directory of its own (the
    // sandbox's `tar` of the refused upload may still be dying over `a`).
    let (status, body) = upload(
        &daemon,
        &token,
        "big",
        "/tmp/in2",
        Box::new(std::iter::once(small.into())),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sh(&user, "big", "cat /tmp/in2/a").await, (0, "a".into()));
    user.delete_sandbox("big", "default").await.expect("delete");
}

/// Pushes blobs and a manifest to the loopback registry.
struct Push {
    http: reqwest::Client,
    base: String,
    repo: String,
}

impl Push {
    fn new(repo: &str) -> Push {
        Push {
            http: reqwest::Client::new(),
            base: format!("http://{}", sbxd::registry()),
            repo: repo.into(),
        }
    }

    /// Uploads a blob (a session, then one PUT of it all); its digest.
    async fn blob(&self, bytes: Vec<u8>) -> String {
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
        let session = self
            .http
            .post(format!("{}/v2/{}/blobs/uploads/", self.base, self.repo))
            .send()
            .await
            .expect("start an upload");
        assert_eq!(session.status().as_u16(), 202);
        let location = session.headers()["location"].to_str().unwrap().to_string();
        let location = if location.starts_with('/') {
            format!("{}{location}", self.base)
        } else {
            location
        };
        let separator = if location.contains('?') { '&' } else { '?' };
        let response = self
            .http
            .put(format!("{location}{separator}digest={digest}"))
            .header("content-type", "application/octet-stream")
            .body(bytes)
            .send()
            .await
            .expect("push blob");
        assert_eq!(
            response.status().as_u16(),
            201,
            "{:?}",
            response.text().await
        );
        digest
    }

    /// Makes a blob of another repository of the registry this one's too.
    async fn mount(&self, digest: &str, from: &str) {
        let response = self
            .http
            .post(format!(
                "{}/v2/{}/blobs/uploads/?mount={digest}&from={from}",
                self.base, self.repo
            ))
            .send()
            .await
            .expect("mount blob");
        assert_eq!(
            response.status().as_u16(),
            201,
            "{:?}",
            response.text().await
        );
    }

    async fn manifest(&self, tag: &str, manifest: &Value) {
        let response = self
            .http
            .put(format!("{}/v2/{}/manifests/{tag}", self.base, self.repo))
            .header("content-type", "application/vnd.oci.image.manifest.v1+json")
            .body(serde_json::to_vec(manifest).unwrap())
            .send()
            .await
            .expect("push manifest");
        assert_eq!(
            response.status().as_u16(),
            201,
            "{:?}",
            response.text().await
        );
    }

    async fn get(&self, path: &str) -> Value {
        self.http
            .get(format!("{}/v2/{path}", self.base))
            .header("accept", "application/vnd.oci.image.manifest.v1+json")
            .send()
            .await
            .expect("get")
            .json()
            .await
            .expect("json")
    }
}

/// Pushes an image of busybox's layers and `extra` (uncompressed tars) as `repo:tag`; or,
/// with `raw` layers, those gzip blobs with the given diff ids.
async fn push_image(repo: &str, extra: &[Vec<u8>], raw: &[(Vec<u8>, String)]) -> String {
    let push = Push::new(repo);
    let base = push.get("sbx-test/busybox/manifests/latest").await;
    let config_digest = base["config"]["digest"].as_str().unwrap().to_string();
    let mut config = push
        .get(&format!("sbx-test/busybox/blobs/{config_digest}"))
        .await;
    let mut layers = base["layers"].as_array().unwrap().clone();
    for layer in &layers {
        push.mount(layer["digest"].as_str().unwrap(), "sbx-test/busybox")
            .await;
    }
    let mut add = Vec::new();
    for tar in extra {
        let diff_id = format!("sha256:{}", hex::encode(Sha256::digest(tar)));
        add.push((
            tar.clone(),
            diff_id,
            "application/vnd.oci.image.layer.v1.tar",
        ));
    }
    for (gz, diff_id) in raw {
        add.push((
            gz.clone(),
            diff_id.clone(),
            "application/vnd.oci.image.layer.v1.tar+gzip",
        ));
    }
    for (bytes, diff_id, media_type) in add {
        let size = bytes.len();
        let digest = push.blob(bytes).await;
        layers.push(json!({"mediaType": media_type, "digest": digest, "size": size}));
        config["rootfs"]["diff_ids"]
            .as_array_mut()
            .unwrap()
            .push(json!(diff_id));
    }
    let config = serde_json::to_vec(&config).unwrap();
    let config_size = config.len();
    let config_digest = push.blob(config).await;
    push.manifest(
        "latest",
        &json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config_size},
            "layers": layers,
        }),
    )
    .await;
    format!("{}/{repo}:latest", sbxd::registry())
}

/// A gzip blob whose tar starts with a GNU long name announcing 4 GiB and carrying it: one
/// gzip member for the header, then one member of 1 MiB of `a` repeated (gzip members
/// concatenate), so that 4 GiB of name is 4 MiB of blob.
fn long_name_layer() -> Vec<u8> {
    let gz = |bytes: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    };
    let mut blob = gz(header("././@LongLink", tar::EntryType::GNULongName, 4 << 30).as_bytes());
    let member = gz(&vec![b'a'; 1 << 20]);
    for _ in 0..4096 {
        blob.extend(&member);
    }
    blob
}

/// An empty header of `kind`, owned by root.
fn owned(kind: tar::EntryType) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(0);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(1_700_000_000);
    h
}

/// A layer tar of entries as a hostile image has them: devices, a hard link to one, files.
fn device_layer() -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut add = |path: &str, kind: tar::EntryType, major: u32, minor: u32, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(0o666);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(1_700_000_000);
        h.set_size(data.len() as u64);
        if matches!(kind, tar::EntryType::Char | tar::EntryType::Block) {
            h.set_device_major(major).unwrap();
            h.set_device_minor(minor).unwrap();
        }
        b.append_data(&mut h, path, data).unwrap();
    };
    add("evil/mem", tar::EntryType::Char, 1, 1, b"");
    add("evil/sda", tar::EntryType::Block, 8, 0, b"");
    add("evil/keep", tar::EntryType::Regular, 0, 0, b"kept\n");
    add("etc/lower-a", tar::EntryType::Regular, 0, 0, b"a\n");
    add("etc/lower-b", tar::EntryType::Regular, 0, 0, b"b\n");
    let mut h = owned(tar::EntryType::Link);
    b.append_link(&mut h, "evil/mem-link", "evil/mem").unwrap();
    b.into_inner().unwrap()
}

/// The layer above it: an OCI whiteout and an overlay one (a `0/0` character device).
fn whiteout_layer() -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = owned(tar::EntryType::Regular);
    b.append_data(&mut h, "etc/.wh.lower-a", &b""[..]).unwrap();
    let mut h = owned(tar::EntryType::Char);
    h.set_device_major(0).unwrap();
    h.set_device_minor(0).unwrap();
    b.append_data(&mut h, "etc/lower-b", &b""[..]).unwrap();
    b.into_inner().unwrap()
}

#[tokio::test]
async fn image_layers_with_gigantic_headers_are_refused_and_devices_are_dropped() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let admin = daemon.admin();
    let token = common::key(&admin, "tenant-user", "user", None).await;
    let user = daemon.client(&token);
    let tag = format!("isolation-{}", std::process::id());

    // A layer whose GNU long name is 4 GiB (4 MiB of gzip). Its diff id cannot matter: the
    // daemon must stop at the header, long before it could hash the stream.
    let bomb = push_image(
        &format!("sbx-test/{tag}-bomb"),
        &[],
        &[(long_name_layer(), format!("sha256:{}", "0".repeat(64)))],
    )
    .await;
    let started = Instant::now();
    let ((status, body), growth) = peak_rss_growth(
        &daemon,
        common::call(
            &daemon,
            &token,
            reqwest::Method::POST,
            "/api/v1/images/pull",
            Some(json!({"reference": bomb})),
        ),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("BadRequest")),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(
            "is refused: tar header 1 (at byte 0) is a GNU long name ('L') of 4294967296 bytes"
        ),
        "{message}"
    );
    assert!(
        growth < RSS_SLACK,
        "the daemon's RSS grew by {growth} bytes"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );

    // Devices in a layer are not made (a hard link to one neither); whiteouts of both kinds
    // still hide the lower layer's files.
    let devices = push_image(
        &format!("sbx-test/{tag}-devices"),
        &[device_layer(), whiteout_layer()],
        &[],
    )
    .await;
    create_running(&user, "dev", &devices).await;
    let (code, out) = sh(
        &user,
        "dev",
        "ls -la /evil /etc; cat /evil/keep; test ! -e /evil/mem && test ! -e /evil/sda \
         && test ! -e /evil/mem-link && test ! -e /etc/lower-a && test ! -e /etc/lower-b",
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("kept\n"), "{out}");
    user.delete_sandbox("dev", "default").await.expect("delete");
    let (status, body) = common::call(&daemon, &token, reqwest::Method::GET, "/health", None).await;
    assert_eq!(status, 200, "{body}");
}
