//! The real `sbx` CLI (assert_cmd) against the real `sbx serve`: login, whoami, keys, error
//! printing and exit statuses; help output snapshot-tested with insta.
mod common;

use std::os::unix::fs::PermissionsExt;

use common::{Daemon, cli};
use predicates::prelude::*;
use serde_json::Value;

fn stdout_json(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

#[test]
fn help_output() {
    let config = tempfile::tempdir().unwrap();
    for (name, args) in [
        ("help_root", vec!["--help"]),
        ("help_serve", vec!["serve", "--help"]),
        ("help_login", vec!["login", "--help"]),
        ("help_key_create", vec!["key", "create", "--help"]),
        ("help_sandbox", vec!["sandbox", "--help"]),
        ("help_sandbox_create", vec!["sandbox", "create", "--help"]),
        ("help_sandbox_exec", vec!["sandbox", "exec", "--help"]),
    ] {
        let output = cli(config.path()).args(&args).output().unwrap();
        assert!(output.status.success(), "{args:?}");
        insta::assert_snapshot!(name, String::from_utf8_lossy(&output.stdout));
    }
}

#[test]
fn login_bootstrap_then_whoami_and_keys() {
    let daemon = Daemon::start();
    let config = tempfile::tempdir().unwrap();
    let data_dir = daemon.data_dir.to_str().unwrap();

    cli(config.path())
        .args([
            "login",
            "--bootstrap",
            "--data-dir",
            data_dir,
            "--server",
            &daemon.url,
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("Logged in to").and(predicate::str::contains("admin")));
    let file = config.path().join("config.toml");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(saved.contains(&daemon.admin_token()) && saved.contains(&daemon.url));

    // The saved profile is used from now on: no --server, no key.
    cli(config.path())
        .arg("whoami")
        .assert()
        .success()
        .stdout(predicate::str::contains("Grants:").and(predicate::str::contains("admin")));
    let out = cli(config.path())
        .args(["whoami", "-o", "json"])
        .output()
        .unwrap();
    let me = stdout_json(&out);
    assert_eq!(me["type"], "key");
    assert_eq!(me["grants"][0], "admin");
    let out = cli(config.path())
        .args(["whoami", "-o", "yaml"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("type: key"));

    // key create / list / revoke.
    let out = cli(config.path())
        .args([
            "key",
            "create",
            "ci",
            "--role",
            "operator",
            "--expires-days",
            "3",
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = stdout_json(&out);
    let token = key["token"].as_str().unwrap().to_string();
    assert_eq!(key["role"], "operator");

    let out = cli(config.path())
        .args(["key", "create", "dev", "--role", "user", "-n", "team-a"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Token:") && text.contains("team-a"), "{text}");

    let out = cli(config.path()).args(["key", "list"]).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    let header = table.lines().next().unwrap();
    assert!(
        header.starts_with("ID") && header.contains("LAST USED"),
        "{table}"
    );
    assert!(
        table.contains("ci") && table.contains("operator") && table.contains("bootstrap-admin")
    );
    assert!(!table.contains(&token));
    let out = cli(config.path())
        .args(["key", "list", "-o", "wide"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("NAMESPACES"));
    let out = cli(config.path())
        .args(["key", "list", "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(stdout_json(&out).as_array().unwrap().len(), 3);

    // The minted key works through the env override.
    cli(config.path())
        .arg("whoami")
        .env("SBX_API_KEY", &token)
        .assert()
        .success()
        .stdout(predicate::str::contains("operator"));
    // ...and an operator cannot list keys: the API's message and code, exit 1.
    cli(config.path())
        .args(["key", "list", "--api-key", &token])
        .assert()
        .code(1)
        .stderr(
            predicate::str::starts_with("error: ").and(predicate::str::contains("(Forbidden)")),
        );

    cli(config.path())
        .args(["key", "revoke", "ci"])
        .assert()
        .success()
        .stdout(predicate::str::contains("revoked"));
    cli(config.path())
        .args(["key", "revoke", "ci"])
        .assert()
        .code(4)
        .stderr("error: no API key named 'ci' (NotFound)\n");
    cli(config.path())
        .arg("whoami")
        .env("SBX_API_KEY", &token)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("(Unauthorized)"));
}

#[test]
fn login_reads_stdin_and_refuses_bad_keys() {
    let daemon = Daemon::start();
    let config = tempfile::tempdir().unwrap();
    cli(config.path())
        .args(["login", "--profile", "bad", "--server", &daemon.url])
        .write_stdin("0123456789abcdef_nope\n")
        .assert()
        .code(1)
        .stderr("error: invalid API key (Unauthorized)\n");
    assert!(
        !config.path().join("config.toml").exists(),
        "a failed login saves nothing"
    );

    cli(config.path())
        .args(["login", "--profile", "ci", "--server", &daemon.url])
        .write_stdin(format!("{}\n", daemon.admin_token()))
        .assert()
        .success();
    cli(config.path())
        .args(["whoami", "--profile", "ci", "-o", "json"])
        .assert()
        .success()
        .stdout(predicate::str::contains("\"admin\""));
    // An unknown profile has no key: the server says so.
    cli(config.path())
        .args(["whoami", "--profile", "other", "--server", &daemon.url])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("missing credentials"));
}

#[test]
fn unreachable_server_and_usage_errors_have_their_own_exit_status() {
    let config = tempfile::tempdir().unwrap();
    // Bind then drop a listener: nothing listens on that port now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    cli(config.path())
        .args([
            "whoami",
            "--server",
            &format!("http://127.0.0.1:{port}"),
            "--api-key",
            "x_y",
        ])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("cannot reach the sbx server"));
    cli(config.path()).args(["key", "create"]).assert().code(2);
    cli(config.path())
        .args(["key", "create", "x", "--role", "root"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("read-only"));
}

#[test]
fn completions_print_scripts() {
    let config = tempfile::tempdir().unwrap();
    for (shell, needle) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef sbx"),
        ("fish", "complete -c sbx"),
    ] {
        cli(config.path())
            .args(["completions", shell])
            .assert()
            .success()
            .stdout(predicate::str::contains(needle));
    }
}

/// Output piped into a reader that stops early (`| head -1`) ends the command quietly, as
/// `cat` does: no panic, no message.
#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    let config = tempfile::tempdir().unwrap();
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' completions bash | head -c 1 >/dev/null",
            common::sbx_bin()
        ))
        .env("SBX_CONFIG_DIR", config.path())
        .output()
        .unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn serve_reports_bad_configuration_and_exits_non_zero() {
    let config = tempfile::tempdir().unwrap();
    cli(config.path())
        .args([
            "serve",
            "--listen",
            "nonsense",
            "--data-dir",
            config.path().to_str().unwrap(),
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("invalid listen address"));
    // No cluster to reach: a clear message and a non-zero exit (tests/kubernetes.rs runs
    // the platform against a real API server).
    cli(config.path())
        .env("KUBECONFIG", config.path().join("no-such-kubeconfig"))
        .args([
            "serve",
            "--platform",
            "kubernetes",
            "--data-dir",
            config.path().to_str().unwrap(),
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "cannot configure a Kubernetes client",
        ));
}

/// A minted key's token for scripts: a new 0600 file (a taken one mints nothing unless
/// `--overwrite`), or the token alone on stdout with `-o token`; never elsewhere.
#[test]
fn a_minted_token_goes_to_a_private_file_or_alone_to_stdout() {
    let daemon = Daemon::start();
    let config = tempfile::tempdir().unwrap();
    let token = daemon.admin_token();
    let admin = |args: &[&str]| {
        let mut command = cli(config.path());
        command
            .args(args)
            .args(["--server", &daemon.url, "--api-key", &token]);
        command
    };
    let names = || -> Vec<String> {
        let out = admin(&["key", "list", "-o", "json"]).output().unwrap();
        stdout_json(&out)
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["name"].as_str().unwrap().to_string())
            .collect()
    };
    let file = config.path().join("ci.token");
    let path = file.to_str().unwrap();
    let out = admin(&[
        "key",
        "create",
        "ci",
        "--role",
        "operator",
        "--token-file",
        path,
    ])
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = std::fs::read_to_string(&file).unwrap();
    let minted = written.trim_end().to_string();
    assert_eq!(written, format!("{minted}\n"));
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // Printed without the token; the file's token works.
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        !printed.contains(&minted) && printed.contains("operator"),
        "{printed}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("mode 0600"));
    cli(config.path())
        .args(["whoami", "--server", &daemon.url, "--api-key", &minted])
        .assert()
        .success()
        .stdout(predicate::str::contains("operator"));
    // A taken file: nothing is minted.
    admin(&[
        "key",
        "create",
        "ci2",
        "--role",
        "operator",
        "--token-file",
        path,
    ])
    .assert()
    .code(1)
    .stderr(
        predicate::str::contains("--overwrite").and(predicate::str::contains("no key was minted")),
    );
    assert!(!names().contains(&"ci2".to_string()));
    // Replaced when asked, still 0600.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    admin(&[
        "key",
        "create",
        "ci2",
        "--role",
        "operator",
        "--token-file",
        path,
        "--overwrite",
    ])
    .assert()
    .success();
    assert_ne!(std::fs::read_to_string(&file).unwrap().trim_end(), minted);
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // `-o token`: the token alone, one line, nothing on stderr.
    let out = admin(&["key", "create", "ci3", "--role", "operator", "-o", "token"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let alone = String::from_utf8(out.stdout).unwrap();
    assert_eq!(alone.lines().count(), 1, "{alone}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cli(config.path())
        .args([
            "whoami",
            "--server",
            &daemon.url,
            "--api-key",
            alone.trim_end(),
        ])
        .assert()
        .success();
    // Never in the verbose log either (requests, timings: no bodies, no headers).
    let quiet_file = config.path().join("verbose.token");
    let out = admin(&[
        "-vv",
        "key",
        "create",
        "ci4",
        "--role",
        "operator",
        "--token-file",
        quiet_file.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    assert!(out.status.success());
    let secret = std::fs::read_to_string(&quiet_file).unwrap();
    let logged = String::from_utf8_lossy(&out.stderr);
    assert!(logged.contains("request"), "{logged}");
    for text in [secret.trim_end(), token.as_str()] {
        assert!(!logged.contains(text) && !String::from_utf8_lossy(&out.stdout).contains(text));
    }
    // ...and nowhere else.
    admin(&["key", "list", "-o", "token"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("sbx key create"));
}
