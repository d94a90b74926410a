//! Syscalls and devices from inside a sandbox, black-box against a real `sbx serve` (sbxd,
//! runc): the allow-list seccomp profile refuses namespaces, mounts and the kernel's riskier
//! interfaces with the errno a program expects (EPERM, or ENOSYS where libc and runtimes fall
//! back), lifts a block only for the capability granted, and leaves ordinary programs
//! working; the root filesystem is `nodev` and the device cgroup denies every device but the
//! usual few. The probe (tests/probes/syscalls.c) is built with the host's gcc, uploaded with
//! the files API and run with exec; it prints `name=OK` or `name=<errno>` per call, then
//! `done`, so that a crash is never taken for a refusal. Needs root.
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::sbxd::{self, TestNet};
use sbx::cli::client::ApiClient;
use sbx::shared::models::sandbox::{CreateSandboxRequest, ForkRequest, SandboxStatus};

/// Where the probe is uploaded in each sandbox.
const PROBE: &str = "/tmp/probe";

/// The probe, built once per test binary (static: the busybox image has no libc).
fn probe_binary() -> &'static Path {
    static BUILT: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = BUILT.get_or_init(|| {
        let dir = tempfile::tempdir().expect("probe dir");
        let out = dir.path().join("probe");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/probes/syscalls.c");
        let status = Command::new("gcc")
            .args(["-static", "-O2", "-pthread", "-Wall", "-o"])
            .arg(&out)
            .arg(&source)
            .status()
            .expect("run gcc");
        assert!(status.success(), "gcc failed on {}", source.display());
        (dir, out)
    });
    path
}

async fn exec(client: &ApiClient, name: &str, command: &str) -> (i32, String, String) {
    sbxd::exec(client, name, "default", command).await
}

/// Creates a busybox sandbox as `req` shapes it, waits until Ready and uploads the probe.
async fn sandbox_with_probe(client: &ApiClient, req: CreateSandboxRequest) -> String {
    let name = req.name.clone().expect("a name");
    let req = CreateSandboxRequest {
        image: Some(sbxd::busybox()),
        ..req
    };
    client.create_sandbox(&req).await.expect("create");
    let s = sbxd::running(client, &name, "default").await;
    assert_eq!(s.status, SandboxStatus::Running);
    let data = std::fs::read(probe_binary()).expect("read the probe");
    let mut archive = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(data.len() as u64);
    header.set_mode(0o755);
    header.set_cksum();
    archive
        .append_data(&mut header, "probe", data.as_slice())
        .expect("tar the probe");
    let body = archive.into_inner().expect("tar");
    client
        .upload_files(&name, "default", "/tmp", body.into())
        .await
        .expect("upload the probe");
    name
}

/// Runs the probe (with `args`); its `name=result` lines. Fails unless it ran to the end.
async fn probe(client: &ApiClient, name: &str, args: &str) -> BTreeMap<String, String> {
    let (code, out, err) = exec(client, name, &format!("{PROBE} {args}")).await;
    assert_eq!(code, 0, "the probe failed in {name}: {out}{err}");
    assert!(
        out.lines().last() == Some("done"),
        "the probe did not run to the end in {name} (a crash is no refusal): {out}{err}"
    );
    out.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Asserts each `(probe, result)`, listing every mismatch at once.
fn expect(results: &BTreeMap<String, String>, expected: &[(&str, &str)], context: &str) {
    let wrong: Vec<String> = expected
        .iter()
        .filter(|(k, v)| results.get(*k).map(String::as_str) != Some(*v))
        .map(|(k, v)| format!("{k}: expected {v}, got {:?}", results.get(*k)))
        .collect();
    assert!(wrong.is_empty(), "{context}:\n{}", wrong.join("\n"));
}

/// Calls every program makes: a refusal here is a broken sandbox, not a safe one.
const CONTROLS: &[(&str, &str)] = &[
    ("getpid", "OK"),
    ("write_file", "OK"),
    ("mmap", "OK"),
    ("fork", "OK"),
    ("clone_plain", "OK"),
    // pthread_create: glibc tries clone3, gets ENOSYS and falls back to clone with thread flags.
    ("thread", "OK"),
    ("socket_inet", "OK"),
    ("socket_unix", "OK"),
    ("personality_query", "OK"),
];

/// A default sandbox (root in its user namespace, no capabilities): namespaces, mounts and
/// the kernel's riskier interfaces are refused by the profile, with the errno programs
/// expect; ordinary programs still work.
#[tokio::test(flavor = "multi_thread")]
async fn the_default_profile_refuses_namespaces_mounts_and_kernel_interfaces() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let client = daemon.admin();
    let name = sandbox_with_probe(
        &client,
        CreateSandboxRequest {
            name: Some("plain".into()),
            ..Default::default()
        },
    )
    .await;
    let results = probe(&client, &name, "").await;
    expect(&results, CONTROLS, "controls in a default sandbox");
    expect(
        &results,
        &[
            // clone is filtered by argument: namespace flags are EPERM, a plain fork is not.
            ("clone_newuser", "EPERM"),
            ("clone_newns", "EPERM"),
            ("clone_newnet", "EPERM"),
            ("clone_newpid", "EPERM"),
            // clone3's flags are out of seccomp's reach: ENOSYS, so that libc falls back.
            ("clone3_plain", "ENOSYS"),
            ("clone3_newuser", "ENOSYS"),
            ("unshare_user", "EPERM"),
            ("unshare_net", "EPERM"),
            ("setns", "EPERM"),
            ("mount", "EPERM"),
            ("umount", "EPERM"),
            ("fsopen", "EPERM"),
            ("open_tree", "EPERM"),
            ("mount_setattr", "EPERM"),
            ("pivot_root", "EPERM"),
            ("io_uring_setup", "ENOSYS"),
            ("io_uring_enter", "ENOSYS"),
            ("io_uring_register", "ENOSYS"),
            ("bpf", "EPERM"),
            ("perf_event_open", "EPERM"),
            ("userfaultfd", "EPERM"),
            ("open_by_handle_at", "EPERM"),
            ("keyctl", "EPERM"),
            ("add_key", "EPERM"),
            ("request_key", "EPERM"),
            ("socket_vsock", "EPERM"),
            ("personality_exec", "EPERM"),
            ("init_module", "EPERM"),
            // The filter is for the native architecture only: a 32-bit syscall (int 0x80) is
            // no match, and the kernel kills the thread with SIGSYS.
            ("compat_getpid", "KILLED_BY_SIG31"),
        ],
        "refusals in a default sandbox",
    );

    // The same attacks with busybox's own tools: refused, with the kernel's message.
    for attack in ["unshare -U true", "unshare -rn true", "unshare -m true"] {
        let (code, out, err) = exec(&client, &name, attack).await;
        assert_ne!(code, 0, "{attack} succeeded: {out}");
        assert!(
            err.contains("Operation not permitted"),
            "{attack} failed for another reason: {err}"
        );
    }
    let (code, _, err) = exec(&client, &name, "mkdir -p /tmp/m; mount -t tmpfs t /tmp/m").await;
    assert_ne!(code, 0);
    assert!(
        err.contains("permission denied") || err.contains("Operation not permitted"),
        "{err}"
    );

    // Ordinary programs: the shell, pipes, tar both ways, background jobs and wait.
    let (code, out, err) = exec(
        &client,
        &name,
        "mkdir -p /tmp/t/d && echo hello > /tmp/t/d/f && tar -cf /tmp/t.tar -C /tmp/t d \
         && rm -r /tmp/t/d && tar -xf /tmp/t.tar -C /tmp/t && cat /tmp/t/d/f \
         && (sleep 0.1 & wait) && seq 1 1000 | grep -c 7 && id -u",
    )
    .await;
    assert_eq!((code, out.as_str()), (0, "hello\n271\n0\n"), "{err}");

    // A non-root sandbox gets the same profile.
    let name = sandbox_with_probe(
        &client,
        CreateSandboxRequest {
            name: Some("nonroot".into()),
            container_non_root: true,
            ..Default::default()
        },
    )
    .await;
    let results = probe(&client, &name, "").await;
    expect(&results, CONTROLS, "controls in a non-root sandbox");
    expect(
        &results,
        &[
            ("clone_newuser", "EPERM"),
            ("clone3_plain", "ENOSYS"),
            ("unshare_user", "EPERM"),
            ("io_uring_setup", "ENOSYS"),
            ("keyctl", "EPERM"),
        ],
        "refusals in a non-root sandbox",
    );
}

/// SYS_ADMIN (granted by an admin) lifts the namespace and mount blocks, as in moby's
/// profile, and nothing else: io_uring stays ENOSYS, keyrings and userfaultfd EPERM, and
/// open_by_handle_at needs DAC_READ_SEARCH. A device node cannot be made in a user namespace
/// even with MKNOD.
#[tokio::test(flavor = "multi_thread")]
async fn sys_admin_lifts_only_its_own_blocks() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let client = daemon.admin();
    let name = sandbox_with_probe(
        &client,
        CreateSandboxRequest {
            name: Some("admin".into()),
            cap_add: Some(vec!["SYS_ADMIN".into(), "MKNOD".into()]),
            ..Default::default()
        },
    )
    .await;
    let results = probe(&client, &name, "").await;
    expect(&results, CONTROLS, "controls with SYS_ADMIN");
    expect(
        &results,
        &[
            ("clone_newuser", "OK"),
            ("clone_newns", "OK"),
            ("clone_newnet", "OK"),
            ("clone3_plain", "OK"),
            ("unshare_user", "OK"),
            ("unshare_net", "OK"),
            ("mount", "OK"),
            ("io_uring_setup", "ENOSYS"),
            ("keyctl", "EPERM"),
            ("add_key", "EPERM"),
            ("userfaultfd", "EPERM"),
            ("open_by_handle_at", "EPERM"),
            ("init_module", "EPERM"),
        ],
        "with SYS_ADMIN",
    );
    // busybox's own tools too (`unshare -r` would also need SETFCAP to map root, since 5.12).
    let (code, out, err) = exec(
        &client,
        &name,
        "mkdir -p /tmp/m && unshare -m -n sh -c 'mount -t tmpfs t /tmp/m && echo mounted' \
         && unshare -U id -u",
    )
    .await;
    assert_eq!((code, out.as_str()), (0, "mounted\n65534\n"), "{err}");

    // The kernel refuses device nodes to a user namespace's root, MKNOD or not.
    let results = probe(&client, &name, "mknod /tmp/zero c 1 5").await;
    expect(&results, &[("mknod", "EPERM")], "mknod in a user namespace");
}

/// Without a user namespace (development hosts) a root sandbox with MKNOD can make device
/// nodes, and none is usable: on the rootfs (`/tmp`) `nodev` refuses to open even /dev/zero's
/// numbers (EACCES), and in `/dev` (the runtime's tmpfs) the device cgroup refuses what is not
/// on its list (EPERM). The devices a program needs still work.
#[tokio::test(flavor = "multi_thread")]
async fn device_nodes_are_unusable() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "[runtime]\nuserNamespace = false\n");
    let client = daemon.admin();
    let name = sandbox_with_probe(
        &client,
        CreateSandboxRequest {
            name: Some("devices".into()),
            cap_add: Some(vec!["MKNOD".into()]),
            ..Default::default()
        },
    )
    .await;
    for (node, kind, major, minor, open) in [
        // The device cgroup allows 1:5, so only nodev stands in the way here.
        ("/tmp/zero", "c", 1, 5, "EACCES"),
        // /dev/mem's numbers: nodev is checked before the cgroup.
        ("/tmp/mem", "c", 1, 1, "EACCES"),
        ("/tmp/disk", "b", 8, 0, "EACCES"),
        // /dev is no part of the rootfs: the device cgroup refuses.
        ("/dev/mem2", "c", 1, 1, "EPERM"),
        ("/dev/disk", "b", 8, 0, "EPERM"),
    ] {
        let results = probe(
            &client,
            &name,
            &format!("mknod {node} {kind} {major} {minor}"),
        )
        .await;
        expect(
            &results,
            &[("mknod", "OK"), ("open", open)],
            &format!("{kind} {major}:{minor} at {node}"),
        );
    }
    let (code, out, err) = exec(
        &client,
        &name,
        "head -c 4 /dev/zero | wc -c; echo x > /dev/null; head -c 4 /dev/urandom | wc -c",
    )
    .await;
    assert_eq!((code, out.as_str()), (0, "4\n4\n"), "{err}");

    // The cgroup of the sandbox: no device is allowed wholesale, /dev/mem is not listed.
    let id = sbxd::sandbox_ids(&daemon.data_dir)
        .into_iter()
        .next()
        .expect("the sandbox's dir");
    let list = std::fs::read_to_string(format!("/sys/fs/cgroup/devices/sbx/{id}/devices.list"))
        .expect("the sandbox's device cgroup");
    assert!(!list.contains("a *:* rwm"), "{list}");
    assert!(list.lines().any(|l| l == "c 1:3 rwm"), "{list}");
    assert!(!list.lines().any(|l| l.starts_with("c 1:1 ")), "{list}");
}

/// A warm fork (CRIU checkpoint and restore) keeps the profile: a loop started in the source
/// before the fork runs the probe again and again, and in the clone, where CRIU restored the
/// loop with the filter it had, its fresh results show the same refusals.
#[tokio::test(flavor = "multi_thread")]
async fn a_warm_fork_keeps_the_profile() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let client = daemon.admin();
    let name = sandbox_with_probe(
        &client,
        CreateSandboxRequest {
            name: Some("src".into()),
            ..Default::default()
        },
    )
    .await;
    exec(
        &client,
        &name,
        &format!(
            "setsid sh -c 'while :; do {PROBE} > /tmp/out.new && mv /tmp/out.new /tmp/out; \
             sleep 0.1; done' </dev/null >/dev/null 2>&1 &"
        ),
    )
    .await;
    let forked = client
        .fork_sandbox(
            &name,
            &ForkRequest {
                new_name: Some("clone".into()),
                warm: true,
                ..Default::default()
            },
        )
        .await
        .expect("warm fork");
    sbxd::running(&client, &forked.name, "default").await;
    // Only the restored loop writes /tmp/out again after this.
    exec(&client, "clone", "rm -f /tmp/out").await;
    let started = std::time::Instant::now();
    let out = loop {
        let (_, out, _) = exec(&client, "clone", "cat /tmp/out 2>/dev/null").await;
        if out.ends_with("done\n") {
            break out;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the restored loop never wrote its results: {out}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let results: BTreeMap<String, String> = out
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    expect(&results, CONTROLS, "controls in a restored process");
    expect(
        &results,
        &[
            ("clone_newuser", "EPERM"),
            ("clone3_plain", "ENOSYS"),
            ("unshare_user", "EPERM"),
            ("io_uring_setup", "ENOSYS"),
            ("keyctl", "EPERM"),
            ("userfaultfd", "EPERM"),
        ],
        "refusals in a restored process",
    );
}
