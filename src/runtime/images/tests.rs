use super::*;
use std::os::unix::fs::FileTypeExt;

/// A layer tar built in memory, entry by entry.
struct LayerBuilder(tar::Builder<Vec<u8>>);

impl LayerBuilder {
    fn new() -> Self {
        LayerBuilder(tar::Builder::new(Vec::new()))
    }

    fn header(kind: tar::EntryType, mode: u32) -> tar::Header {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_mode(mode);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(1_700_000_000);
        header.set_size(0);
        header
    }

    fn dir(mut self, path: &str, mode: u32) -> Self {
        let mut header = Self::header(tar::EntryType::Directory, mode);
        self.0.append_data(&mut header, path, io::empty()).unwrap();
        self
    }

    fn file(self, path: &str, data: &[u8]) -> Self {
        self.file_owned(path, data, 0o644, 0)
    }

    fn file_owned(mut self, path: &str, data: &[u8], mode: u32, uid: u64) -> Self {
        let mut header = Self::header(tar::EntryType::Regular, mode);
        header.set_uid(uid);
        header.set_gid(uid);
        header.set_size(data.len() as u64);
        self.0.append_data(&mut header, path, data).unwrap();
        self
    }

    fn symlink(mut self, path: &str, target: &str) -> Self {
        let mut header = Self::header(tar::EntryType::Symlink, 0o777);
        self.0.append_link(&mut header, path, target).unwrap();
        self
    }

    fn hardlink(mut self, path: &str, target: &str) -> Self {
        let mut header = Self::header(tar::EntryType::Link, 0o644);
        self.0.append_link(&mut header, path, target).unwrap();
        self
    }

    /// An entry whose name is written raw, bypassing the builder's own path checks.
    fn raw(mut self, path: &str, kind: tar::EntryType, link: Option<&str>) -> Self {
        let mut header = Self::header(kind, 0o644);
        let gnu = header.as_gnu_mut().unwrap();
        gnu.name[..path.len()].copy_from_slice(path.as_bytes());
        if let Some(link) = link {
            gnu.linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        header.set_cksum();
        self.0.append(&header, io::empty()).unwrap();
        self
    }

    fn bytes(self) -> Vec<u8> {
        self.0.into_inner().unwrap()
    }
}

fn diff_id(bytes: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(bytes);
    sha256_digest(hasher)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn get_xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let c_path = CString::new(path.as_os_str().as_bytes()).unwrap();
    let c_name = CString::new(name).unwrap();
    let mut buffer = vec![0u8; 256];
    // SAFETY: valid C strings and a buffer of the given length.
    let n = unsafe {
        libc::lgetxattr(
            c_path.as_ptr(),
            c_name.as_ptr(),
            buffer.as_mut_ptr().cast(),
            buffer.len(),
        )
    };
    (n >= 0).then(|| buffer[..n as usize].to_vec())
}

/// A budget of the default limits (or `limits`), on a store of its own.
fn budget(limits: Option<ImageLimits>) -> Arc<Budget> {
    Arc::new(Budget::new(
        "test/image:1",
        limits.unwrap_or_default(),
        Arc::new(StoreSize::default()),
    ))
}

fn unpack_err(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    match unpack_tar(bytes, &dir.path().join("layer")) {
        Err(UnpackError::Invalid(reason)) => reason,
        other => panic!("expected an invalid layer, got {other:?}"),
    }
}

#[test]
fn references_normalize() {
    assert_eq!(
        normalize_reference("busybox").unwrap(),
        "docker.io/library/busybox:latest"
    );
    assert_eq!(
        normalize_reference("127.0.0.1:5000/x/y:1").unwrap(),
        "127.0.0.1:5000/x/y:1"
    );
    assert_eq!(
        normalize_reference("library/debian:12").unwrap(),
        "docker.io/library/debian:12"
    );
    let digest = format!("sha256:{}", "a".repeat(64));
    assert_eq!(
        normalize_reference(&format!("quay.io/x/y@{digest}")).unwrap(),
        format!("quay.io/x/y@{digest}")
    );
    for bad in ["", "  ", "Busybox", "a b", "x:y:z", "x@sha256:12", "/abs"] {
        let err = normalize_reference(bad).unwrap_err();
        assert!(
            matches!(err, ImageError::InvalidReference(_)),
            "{bad}: {err}"
        );
        assert!(err.is_caller_error());
    }
    assert!(
        normalize_reference("Busybox")
            .unwrap_err()
            .to_string()
            .contains("e.g. busybox")
    );
}

#[test]
fn unpacks_files_links_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("layer");
    let tar = LayerBuilder::new()
        .dir("etc", 0o755)
        .file("etc/hostname", b"sandbox\n")
        .file_owned("bin/tool", b"#!/bin/sh\n", 0o4755, 65532)
        .hardlink("bin/tool-again", "bin/tool")
        .symlink("bin/sh", "/bin/busybox")
        .dir("tmp", 0o1777)
        .bytes();
    let size = unpack_tar(&tar[..], &dest).unwrap();
    assert_eq!(size, 8 + 10, "hard links count once");
    assert_eq!(fs::read(dest.join("etc/hostname")).unwrap(), b"sandbox\n");
    let tool = fs::metadata(dest.join("bin/tool")).unwrap();
    assert_eq!((tool.uid(), tool.gid()), (65532, 65532));
    assert_eq!(tool.mode() & 0o7777, 0o4755, "set-uid survives chown");
    assert_eq!(
        fs::metadata(dest.join("bin/tool-again")).unwrap().ino(),
        tool.ino()
    );
    assert_eq!(
        fs::read_link(dest.join("bin/sh")).unwrap(),
        Path::new("/bin/busybox")
    );
    assert_eq!(
        fs::metadata(dest.join("tmp")).unwrap().mode() & 0o7777,
        0o1777
    );
    assert_eq!(
        fs::metadata(dest.join("etc")).unwrap().mtime(),
        1_700_000_000,
        "directory times are set after their children"
    );
    assert_eq!(fs::metadata(&dest).unwrap().mode() & 0o777, 0o755);
}

#[test]
fn whiteouts_become_overlay_whiteouts() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("layer");
    let tar = LayerBuilder::new()
        .dir("etc", 0o755)
        .file("etc/.wh.motd", b"")
        .file(".wh.gone", b"")
        .dir("var/cache", 0o755)
        .file("var/cache/.wh..wh..opq", b"")
        .file("var/cache/new", b"x")
        .file("opaque-first/.wh..wh..opq", b"")
        .file(".wh..wh.plnk", b"")
        .bytes();
    unpack_tar(&tar[..], &dest).unwrap();
    for whiteout in ["etc/motd", "gone"] {
        let meta = fs::symlink_metadata(dest.join(whiteout)).unwrap();
        assert!(meta.file_type().is_char_device(), "{whiteout}");
        assert_eq!(meta.rdev(), 0, "{whiteout}");
    }
    assert!(!dest.join("etc/.wh.motd").exists());
    assert_eq!(
        get_xattr(&dest.join("var/cache"), XATTR_OPAQUE).as_deref(),
        Some(&b"y"[..])
    );
    assert_eq!(
        get_xattr(&dest.join("opaque-first"), XATTR_OPAQUE).as_deref(),
        Some(&b"y"[..]),
        "a marker before its directory's entry still marks it"
    );
    assert!(!dest.join("var/cache/.wh..wh..opq").exists());
    assert_eq!(fs::read(dest.join("var/cache/new")).unwrap(), b"x");
    assert!(get_xattr(&dest.join("etc"), XATTR_OPAQUE).is_none());
    assert!(!dest.join(".wh..wh.plnk").exists() && !dest.join("plnk").exists());
}

#[test]
fn escapes_are_refused() {
    let tar = LayerBuilder::new()
        .raw("../evil", tar::EntryType::Regular, None)
        .bytes();
    assert!(unpack_err(&tar).contains("'..'"));

    let tar = LayerBuilder::new()
        .raw("/etc/passwd", tar::EntryType::Regular, None)
        .bytes();
    assert!(unpack_err(&tar).contains("absolute"));

    let outside = tempfile::tempdir().unwrap();
    let tar = LayerBuilder::new()
        .symlink("escape", outside.path().to_str().unwrap())
        .file("escape/pwned", b"x")
        .bytes();
    assert!(unpack_err(&tar).contains("symlink 'escape'"));
    assert!(!outside.path().join("pwned").exists());

    let tar = LayerBuilder::new()
        .raw("link", tar::EntryType::Link, Some("../../etc/passwd"))
        .bytes();
    assert!(unpack_err(&tar).contains("hard link"));

    let tar = LayerBuilder::new()
        .symlink("up", "/etc")
        .raw("stolen", tar::EntryType::Link, Some("up/passwd"))
        .bytes();
    assert!(unpack_err(&tar).contains("symlink 'up'"));

    let tar = LayerBuilder::new()
        .raw("dangling", tar::EntryType::Link, Some("missing"))
        .bytes();
    assert!(unpack_err(&tar).contains("not a file of this layer"));
}

#[test]
fn blobs_are_verified_and_decompressed() {
    let dir = tempfile::tempdir().unwrap();
    let tar = LayerBuilder::new().file("hello", b"world").bytes();
    let gz = gzip(&tar);
    let blob = dir.path().join("blob");
    fs::write(&blob, &gz).unwrap();
    let blob_digest = diff_id(&gz);
    let dest = dir.path().join("a");
    let size = unpack_blob(
        &blob,
        "",
        Some(&blob_digest),
        &diff_id(&tar),
        &dest,
        budget(None),
    )
    .unwrap();
    assert_eq!(size, 5);
    assert_eq!(fs::read(dest.join("hello")).unwrap(), b"world");

    let err = unpack_blob(
        &blob,
        "",
        None,
        &diff_id(b"other"),
        &dir.path().join("b"),
        budget(None),
    );
    assert!(matches!(err, Err(UnpackError::Invalid(m)) if m.contains("diff id")));
    let err = unpack_blob(
        &blob,
        "",
        Some(&diff_id(b"other")),
        &diff_id(&tar),
        &dir.path().join("c"),
        budget(None),
    );
    assert!(matches!(err, Err(UnpackError::Invalid(m)) if m.contains("digest")));

    fs::write(&blob, [0x28, 0xb5, 0x2f, 0xfd, 0, 0]).unwrap();
    let err = unpack_blob(
        &blob,
        "",
        None,
        &diff_id(&tar),
        &dir.path().join("d"),
        budget(None),
    );
    assert!(matches!(err, Err(UnpackError::Unsupported(_))));
}

/// A gzip'd layer whose first header is a GNU long name announcing 4 GiB, followed by that
/// many bytes of name: the compressed blob is a few MiB, what it unpacks to is not.
fn long_name_bomb(path: &Path) {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::GNULongName);
    h.set_size(4 << 30);
    h.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
    h.set_cksum();
    let file = File::create(path).unwrap();
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    gz.write_all(h.as_bytes()).unwrap();
    // 64 MiB is enough to show the reader stops at the header; the rest would be read only
    // by an unguarded reader, which the hash check would fail afterwards.
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..64 {
        gz.write_all(&chunk).unwrap();
    }
    gz.finish().unwrap();
}

#[test]
fn oversized_extension_headers_in_layers_are_refused_before_they_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let blob = dir.path().join("blob");
    long_name_bomb(&blob);
    let budget = budget(None);
    let err = unpack_blob(
        &blob,
        "",
        None,
        &diff_id(b"whatever"),
        &dir.path().join("a"),
        budget.clone(),
    );
    match err {
        Err(UnpackError::TooLarge(m)) => assert!(
            m.contains("GNU long name ('L') of 4294967296 bytes")
                && m.contains("at most 65536 bytes"),
            "{m}"
        ),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Refused at the first header: of the 64 MiB after it, a read's worth at most passed.
    assert!(budget.used.load(Ordering::Relaxed) < 1 << 20);
    assert_eq!(budget.store.unpacking.load(Ordering::Relaxed), 0);
    let refused = UnpackError::TooLarge("x".into())
        .into_image_error("sha256:1", &Origin::Registry("r/i:1".into()));
    assert!(matches!(refused, ImageError::TooLarge(_)) && refused.is_caller_error());
}

#[test]
fn images_and_the_store_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let tar = LayerBuilder::new().file("big", &vec![7u8; 100_000]).bytes();
    let blob = dir.path().join("blob");
    fs::write(&blob, &tar).unwrap();
    let small = |image, store| {
        Some(ImageLimits {
            max_image_bytes: image,
            max_store_bytes: store,
        })
    };
    let unpack = |budget: Arc<Budget>, dest: &str| {
        unpack_blob(
            &blob,
            "",
            None,
            &diff_id(&tar),
            &dir.path().join(dest),
            budget,
        )
    };
    match unpack(budget(small(50_000, 1 << 30)), "a") {
        Err(UnpackError::TooLarge(m)) => assert!(m.contains("maxImageBytes"), "{m}"),
        other => panic!("expected the image limit, got {other:?}"),
    }
    let full = budget(small(1 << 30, 1 << 20));
    full.store
        .recorded
        .store((1 << 20) - 50_000, Ordering::Relaxed);
    match unpack(full.clone(), "b") {
        Err(UnpackError::StoreFull(m)) => assert!(m.contains("maxStoreBytes"), "{m}"),
        other => panic!("expected the store limit, got {other:?}"),
    }
    assert_eq!(full.store.unpacking.load(Ordering::Relaxed), 0);
    assert_eq!(
        unpack(budget(small(200_000, 1 << 20)), "c").unwrap(),
        100_000
    );
    // A layer the store has counts to the image once.
    let reuse = budget(small(150_000, 1 << 30));
    reuse.reuse("aa", 100_000).unwrap();
    reuse.reuse("aa", 100_000).unwrap();
    assert!(matches!(
        reuse.reuse("bb", 100_000),
        Err(ImageError::TooLarge(_))
    ));
}

#[test]
fn device_nodes_are_dropped_and_whiteouts_kept() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("layer");
    let device = |b: LayerBuilder, path: &str, kind: tar::EntryType, major: u32, minor: u32| {
        let mut b = b;
        let mut h = LayerBuilder::header(kind, 0o666);
        h.set_device_major(major).unwrap();
        h.set_device_minor(minor).unwrap();
        b.0.append_data(&mut h, path, io::empty()).unwrap();
        b
    };
    let mut b = LayerBuilder::new().dir("dev", 0o755).file("etc/keep", b"k");
    b = device(b, "dev/mem", tar::EntryType::Char, 1, 1);
    b = device(b, "dev/sda", tar::EntryType::Block, 8, 0);
    b = device(b, "etc/gone", tar::EntryType::Char, 0, 0);
    b = device(b, "run/pipe", tar::EntryType::Fifo, 0, 0);
    let tar = b
        .hardlink("dev/kmem", "dev/mem")
        .file("etc/.wh.motd", b"")
        .bytes();
    unpack_tar(&tar[..], &dest).unwrap();
    for dropped in ["dev/mem", "dev/sda", "dev/kmem"] {
        assert!(
            fs::symlink_metadata(dest.join(dropped)).is_err(),
            "{dropped} was unpacked"
        );
    }
    for whiteout in ["etc/gone", "etc/motd"] {
        let meta = fs::symlink_metadata(dest.join(whiteout)).unwrap();
        assert!(
            meta.file_type().is_char_device() && meta.rdev() == 0,
            "{whiteout}"
        );
    }
    assert!(
        fs::symlink_metadata(dest.join("run/pipe"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert_eq!(fs::read(dest.join("etc/keep")).unwrap(), b"k");
}

/// Writes an OCI layout archive of one single-layer image, as `scripts/mkimage.py` does.
fn write_archive(
    path: &Path,
    layer_tar: &[u8],
    annotations: serde_json::Value,
    entrypoint: &[&str],
) -> String {
    let layer = gzip(layer_tar);
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": host_architecture(), "os": "linux",
        "config": {"Entrypoint": entrypoint, "Env": ["PATH=/bin"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id(layer_tar)]},
    }))
    .unwrap();
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": diff_id(&config), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": diff_id(&layer), "size": layer.len()}],
    }))
    .unwrap();
    let index = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": diff_id(&manifest), "size": manifest.len(),
                       "annotations": annotations}],
    }))
    .unwrap();
    let mut builder = tar::Builder::new(File::create(path).unwrap());
    let mut add = |name: String, data: &[u8]| {
        let mut header = tar::Header::new_ustar();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        builder.append_data(&mut header, name, data).unwrap();
    };
    add("oci-layout".into(), br#"{"imageLayoutVersion":"1.0.0"}"#);
    add("index.json".into(), &index);
    for blob in [&layer, &config, &manifest] {
        add(format!("blobs/sha256/{}", &diff_id(blob)[7..]), blob);
    }
    builder.finish().unwrap();
    diff_id(&manifest)
}

#[tokio::test]
async fn archives_import_share_layers_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("images");
    let layer = LayerBuilder::new()
        .dir("bin", 0o755)
        .file("bin/app", b"app")
        .bytes();
    let first = dir.path().join("first.tar");
    let digest = write_archive(
        &first,
        &layer,
        serde_json::json!({ANNOTATION_IMAGE_NAME: "127.0.0.1:5000/t/app:1",
                           ANNOTATION_REF_NAME: "1"}),
        &["/bin/app"],
    );
    let second = dir.path().join("My App.tar");
    write_archive(
        &second,
        &layer,
        serde_json::json!({ANNOTATION_REF_NAME: "v2"}),
        &["/bin/app", "--two"],
    );

    let store = ImageStore::open(&root, vec![]).unwrap();
    let images = store.import_archive(&first).await.unwrap();
    assert_eq!(images.len(), 1);
    let image = &images[0];
    assert_eq!(image.reference, "127.0.0.1:5000/t/app:1");
    assert_eq!(image.digest, digest);
    assert_eq!(image.layers, vec![diff_id(&layer)]);
    assert_eq!(image.config.entrypoint, vec!["/bin/app"]);
    assert_eq!(image.config.working_dir.as_deref(), Some("/"));
    assert_eq!(image.size_bytes, 3);
    let dirs = store.layer_dirs(image);
    assert_eq!(dirs, vec![root.join("layers").join(&diff_id(&layer)[7..])]);
    assert_eq!(fs::read(dirs[0].join("bin/app")).unwrap(), b"app");

    // A tag-only name takes its repository from the file name; the layer is shared.
    let images = store.import_archive(&second).await.unwrap();
    assert_eq!(images[0].reference, "docker.io/library/my-app:v2");
    assert_eq!(store.layer_dirs(&images[0]), dirs);
    assert_eq!(fs::read_dir(root.join("layers")).unwrap().count(), 1);
    // Importing again is idempotent: same record, same time, no new layer.
    let first_record = store.get("127.0.0.1:5000/t/app:1").unwrap();
    assert_eq!(
        store.import_archive(&first).await.unwrap(),
        vec![first_record]
    );
    assert_eq!(fs::read_dir(root.join("layers")).unwrap().count(), 1);
    assert_eq!(fs::read_dir(root.join("tmp")).unwrap().count(), 0);
    drop(store);

    let store = ImageStore::open(&root, vec![]).unwrap();
    let listed: Vec<String> = store.list().into_iter().map(|i| i.reference).collect();
    assert_eq!(
        listed,
        ["127.0.0.1:5000/t/app:1", "docker.io/library/my-app:v2"]
    );
    let known = store.ensure("127.0.0.1:5000/t/app:1").await.unwrap();
    assert_eq!(known.digest, digest, "ensure uses the local image");
    assert_eq!(
        store.get("my-app:v2").unwrap().config.cmd,
        Vec::<String>::new()
    );
    assert!(store.remove("my-app:v2").unwrap().is_some());
    assert_eq!(ImageStore::open(&root, vec![]).unwrap().list().len(), 1);
}

#[tokio::test]
async fn bad_archives_are_caller_errors() {
    let dir = tempfile::tempdir().unwrap();
    let store = ImageStore::open(&dir.path().join("images"), vec![]).unwrap();
    let junk = dir.path().join("junk.tar");
    fs::write(&junk, b"this is not a tar archive at all").unwrap();
    let err = store.import_archive(&junk).await.unwrap_err();
    assert!(matches!(err, ImageError::InvalidArchive(_)), "{err}");

    let plain = dir.path().join("plain.tar");
    let mut builder = tar::Builder::new(File::create(&plain).unwrap());
    let mut header = tar::Header::new_ustar();
    header.set_size(2);
    builder
        .append_data(&mut header, "hello.txt", &b"hi"[..])
        .unwrap();
    builder.finish().unwrap();
    drop(builder);
    let err = store.import_archive(&plain).await.unwrap_err();
    assert!(err.to_string().contains("no index.json"), "{err}");
    assert!(err.is_caller_error());
}

#[tokio::test]
async fn concurrent_imports_unpack_a_layer_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(ImageStore::open(&dir.path().join("images"), vec![]).unwrap());
    let layer = LayerBuilder::new().file("data", &[7u8; 100_000]).bytes();
    let mut tasks = Vec::new();
    for n in 0..4 {
        let archive = dir.path().join(format!("img{n}.tar"));
        write_archive(&archive, &layer, serde_json::json!({}), &["/data"]);
        let store = store.clone();
        tasks.push(tokio::spawn(
            async move { store.import_archive(&archive).await },
        ));
    }
    for task in tasks {
        let images = task.await.unwrap().unwrap();
        assert_eq!(images[0].size_bytes, 100_000);
    }
    assert_eq!(store.list().len(), 4);
    let layers: Vec<_> = fs::read_dir(dir.path().join("images/layers"))
        .unwrap()
        .collect();
    assert_eq!(layers.len(), 1);
    assert!(store.layer_locks.lock().unwrap().is_empty());
}

#[tokio::test]
async fn unreachable_registries_are_reported_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let store = ImageStore::open(&dir.path().join("images"), vec!["127.0.0.1:1".into()]).unwrap();
    let err = store.pull("127.0.0.1:1/x/y:1").await.unwrap_err();
    assert!(matches!(err, ImageError::Refused(_)), "{err}");
    assert!(err.to_string().contains("privateRegistries"), "{err}");
    store.set_private_registries(vec!["127.0.0.1:1".into()]);
    let err = store.pull("127.0.0.1:1/x/y:1").await.unwrap_err();
    assert!(matches!(err, ImageError::Registry(_)), "{err}");
    assert!(
        err.to_string()
            .contains("cannot reach registry 127.0.0.1:1"),
        "{err}"
    );
}

#[test]
fn duplicate_layers_are_listed_once_at_their_highest_position() {
    let dir = tempfile::tempdir().unwrap();
    let store = ImageStore::open(dir.path(), vec![]).unwrap();
    let (a, b) = (
        format!("sha256:{}", "a".repeat(64)),
        format!("sha256:{}", "b".repeat(64)),
    );
    let image = Image {
        reference: "x".into(),
        digest: String::new(),
        layers: vec![a.clone(), b.clone(), a.clone()],
        config: ImageConfig::default(),
        size_bytes: 0,
        created: 0,
    };
    let names: Vec<String> = store
        .layer_dirs(&image)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["b".repeat(64), "a".repeat(64)]);
}

#[test]
fn archive_names() {
    let none = BTreeMap::new();
    assert_eq!(
        archive_reference(&none, Some("busybox")).unwrap(),
        "docker.io/library/busybox:latest"
    );
    assert!(archive_reference(&none, None).is_err());
    let full = BTreeMap::from([(
        ANNOTATION_REF_NAME.to_string(),
        "localhost/sbx-test/busybox:latest".to_string(),
    )]);
    assert_eq!(
        archive_reference(&full, None).unwrap(),
        "localhost/sbx-test/busybox:latest"
    );
    assert_eq!(
        repository_from_file_name("/x/Busy Box.tar.gz").as_deref(),
        Some("busy-box")
    );
    assert_eq!(repository_from_file_name("---.tar"), None);
}
