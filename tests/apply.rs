//! `sbx apply -f` and `sbx diff -f` through the real CLI against the real `sbx serve`
//! (embedded default): created / configured / unchanged, a second apply changes nothing,
//! diff's exit statuses, a dry run writes nothing (read back through the API), a bad file
//! writes nothing and names its line, minted keys' tokens go to private files, and the
//! round trip `sbx tenant get -o yaml | sbx apply -f -`; `--applyset` labels and `--prune`
//! with and without `--cascade`, on real sandboxes.
mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::sbxd::{self, TestNet};
use common::{Daemon, cli};
use serde_json::{Value, json};

const TENANCY: &str = "\
apiVersion: sbx.io/v1alpha1
kind: Tenant
metadata:
  name: acme
spec:
  namespaces: [acme-dev, acme-prod]
  quotas:
    sandboxes: 10
    memory: 16Gi
---
apiVersion: sbx.io/v1alpha1
kind: Tenant
metadata:
  name: beta
spec:
  namespaces: [beta]
---
apiVersion: sbx.io/v1alpha1
kind: ApiKey
metadata:
  name: acme-ci
spec:
  role: user
  tenant: acme
  namespaces: [acme-dev]
  expiresDays: 30
";

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `sbx ARGS` with the CLI config in `config`, against `daemon` as `token`.
fn run(config: &Path, daemon: &Daemon, token: &str, args: &[&str], stdin: Option<&str>) -> Run {
    let mut command = cli(config);
    command
        .args(args)
        .args(["--server", &daemon.url, "--api-key", token]);
    if let Some(text) = stdin {
        command.write_stdin(text);
    }
    let out = command.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn apply_converges_and_a_second_apply_changes_nothing() {
    let daemon = Daemon::start();
    let token = daemon.admin_token();
    let config = tempfile::tempdir().unwrap();
    let dir = config.path().join("tenancy");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("tenancy.yaml"), TENANCY).unwrap();
    let tokens = config.path().join("tokens");
    std::fs::create_dir(&tokens).unwrap();
    let sbx = |args: &[&str], stdin: Option<&str>| run(config.path(), &daemon, &token, args, stdin);
    let files = dir.to_str().unwrap();
    let token_dir = tokens.to_str().unwrap();
    let tenants = || -> Value {
        let out = sbx(&["tenant", "list", "-o", "json"], None);
        serde_json::from_str(&out.stdout).unwrap()
    };

    // Diff first: everything differs (exit 1); a dry run writes nothing.
    let diff = sbx(&["diff", "-f", files], None);
    assert_eq!(diff.code, 1, "{}{}", diff.stdout, diff.stderr);
    assert!(diff.stdout.contains("+++ tenant/acme"), "{}", diff.stdout);
    let dry = sbx(&["apply", "-f", files, "--dry-run"], None);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stdout.contains("tenant/acme created (dry run)"),
        "{}",
        dry.stdout
    );
    assert_eq!(tenants().as_array().unwrap().len(), 0);
    // A key to mint with nowhere for its token: refused before any write.
    let refused = sbx(&["apply", "-f", files], None);
    assert_eq!(refused.code, 1);
    assert!(refused.stderr.contains("--token-dir"), "{}", refused.stderr);
    assert_eq!(tenants().as_array().unwrap().len(), 0);

    // Apply: created, with the key's token in a private file that works.
    let applied = sbx(&["apply", "-f", files, "--token-dir", token_dir], None);
    assert_eq!(applied.code, 0, "{}", applied.stderr);
    let lines: Vec<&str> = applied.stdout.lines().collect();
    assert_eq!(lines[..2], ["tenant/acme created", "tenant/beta created"]);
    assert!(
        lines[2].starts_with("apikey/acme-ci created (token in "),
        "{}",
        lines[2]
    );
    let token_file = tokens.join("acme-ci.token");
    assert_eq!(
        std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let minted = std::fs::read_to_string(&token_file).unwrap();
    assert!(!applied.stdout.contains(minted.trim_end()));
    let me = cli(config.path())
        .args(["whoami", "-o", "json", "--server", &daemon.url])
        .args(["--api-key", minted.trim_end()])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&me.stdout).contains("acme"));

    // Again: all unchanged, exit 0, diff exit 0.
    let again = sbx(&["apply", "-f", files, "--token-dir", token_dir], None);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(
        again.stdout,
        "tenant/acme unchanged\ntenant/beta unchanged\napikey/acme-ci unchanged\n"
    );
    assert_eq!(sbx(&["diff", "-f", files], None).code, 0);

    // One field changed: one `configured`; a section the file leaves out is left alone.
    let changed = TENANCY.replace("sandboxes: 10", "sandboxes: 12");
    std::fs::write(dir.join("tenancy.yaml"), &changed).unwrap();
    let diff = sbx(&["diff", "-f", files], None);
    assert_eq!(diff.code, 1);
    assert!(
        diff.stdout.contains("-    sandboxes: 10") && diff.stdout.contains("+    sandboxes: 12"),
        "{}",
        diff.stdout
    );
    let configured = sbx(&["apply", "-f", files, "--token-dir", token_dir], None);
    assert_eq!(
        configured.stdout,
        "tenant/acme configured\ntenant/beta unchanged\napikey/acme-ci unchanged\n"
    );
    let acme = sbx(&["tenant", "get", "acme", "-o", "json"], None);
    let acme: Value = serde_json::from_str(&acme.stdout).unwrap();
    assert_eq!(acme["spec"]["quotas"]["sandboxes"], 12);

    // Round trip: what `tenant get -o yaml` and `tenant list -o yaml` print applies unchanged.
    let one = sbx(&["tenant", "get", "acme", "-o", "yaml"], None);
    let back = sbx(&["apply", "-f", "-"], Some(&one.stdout));
    assert_eq!(back.stdout, "tenant/acme unchanged\n", "{}", back.stderr);
    let all = sbx(&["tenant", "list", "-o", "yaml"], None);
    let back = sbx(&["apply", "-f", "-"], Some(&all.stdout));
    assert_eq!(
        back.stdout, "tenant/acme unchanged\ntenant/beta unchanged\n",
        "{}",
        back.stderr
    );

    // A bad document anywhere: nothing written, its line named.
    let bad = format!(
        "{changed}---\napiVersion: sbx.io/v1alpha1\nkind: Tenant\nmetadata:\n  name: gamma\nspec:\n  namespaces: [acme-dev]\n"
    )
    .replace("sandboxes: 12", "sandboxes: 14");
    std::fs::write(dir.join("tenancy.yaml"), bad).unwrap();
    let rejected = sbx(&["apply", "-f", files, "--token-dir", token_dir], None);
    assert_eq!(rejected.code, 1);
    assert!(
        rejected.stderr.contains("tenancy.yaml:28:")
            && rejected
                .stderr
                .contains("namespace acme-dev is also tenant acme's"),
        "{}",
        rejected.stderr
    );
    let acme = sbx(&["tenant", "get", "acme", "-o", "json"], None);
    let acme: Value = serde_json::from_str(&acme.stdout).unwrap();
    assert_eq!(acme["spec"]["quotas"]["sandboxes"], 12);
    // A key of the same name with other settings: reported, nothing applied.
    std::fs::write(
        dir.join("tenancy.yaml"),
        changed.replace("sandboxes: 12", "sandboxes: 16").replace(
            "namespaces: [acme-dev]\n  expires",
            "namespaces: [acme-prod]\n  expires",
        ),
    )
    .unwrap();
    let conflict = sbx(&["apply", "-f", files, "--token-dir", token_dir], None);
    assert_eq!(conflict.code, 1);
    assert!(
        conflict.stderr.contains("sbx key revoke acme-ci"),
        "{}",
        conflict.stderr
    );
    let acme = sbx(&["tenant", "get", "acme", "-o", "json"], None);
    let acme: Value = serde_json::from_str(&acme.stdout).unwrap();
    assert_eq!(acme["spec"]["quotas"]["sandboxes"], 12);
}

const SET: &str = "\
apiVersion: sbx.io/v1alpha1
kind: Tenant
metadata:
  name: acme
  labels: {team: platform}
spec:
  namespaces: [acme-dev]
---
apiVersion: sbx.io/v1alpha1
kind: Tenant
metadata:
  name: beta
spec:
  namespaces: [beta]
---
apiVersion: sbx.io/v1alpha1
kind: ApiKey
metadata:
  name: beta-ci
spec:
  role: user
  tenant: beta
";

/// `--applyset` labels what it applies; `--prune` removes what left the files, only that
/// set's, refusing a tenant with sandboxes unless `--cascade` (then its sandboxes go too).
#[tokio::test]
async fn prune_removes_what_left_the_set() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let token = daemon.admin_token();
    let config = tempfile::tempdir().unwrap();
    let dir = config.path().join("tenancy");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("set.yaml"), SET).unwrap();
    let tokens = config.path().join("tokens");
    std::fs::create_dir(&tokens).unwrap();
    let sbx = |args: &[&str]| run(config.path(), &daemon, &token, args, None);
    let files = dir.to_str().unwrap();
    let token_dir = tokens.to_str().unwrap();
    let apply = |extra: &[&str]| {
        let mut args = vec![
            "apply",
            "-f",
            files,
            "--applyset",
            "tenancy",
            "--token-dir",
            token_dir,
        ];
        args.extend_from_slice(extra);
        sbx(&args)
    };
    let tenant_names = || -> Vec<String> {
        let list: Value =
            serde_json::from_str(&sbx(&["tenant", "list", "-o", "json"]).stdout).unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .map(|t| t["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let key_names = || -> Vec<String> {
        let list: Value =
            serde_json::from_str(&sbx(&["key", "list", "-o", "json"]).stdout).unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .map(|k| k["name"].as_str().unwrap().to_string())
            .collect()
    };

    // The server holds tenants' and keys' labels to sandboxes' rules, with sbx.io/apply-set
    // the one reserved key a client may write.
    for labels in [json!({"sbx.io/other": "x"}), json!({"team": "-bad"})] {
        let (status, body) = common::call(
            &daemon,
            &token,
            reqwest::Method::POST,
            "/api/v1/tenants",
            Some(json!({"name": "badly", "spec": {"namespaces": ["badly"]}, "labels": labels})),
        )
        .await;
        assert_eq!(status, 400, "{body}");
    }

    // A tenant applied from elsewhere, with no set: never pruned.
    let legacy = config.path().join("legacy.yaml");
    std::fs::write(&legacy, "apiVersion: sbx.io/v1alpha1\nkind: Tenant\nmetadata: {name: legacy}\nspec: {namespaces: [legacy]}\n").unwrap();
    assert_eq!(sbx(&["apply", "-f", legacy.to_str().unwrap()]).code, 0);

    let first = apply(&[]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        first
            .stdout
            .starts_with("tenant/acme created\ntenant/beta created\napikey/beta-ci created"),
        "{}",
        first.stdout
    );
    let acme: Value =
        serde_json::from_str(&sbx(&["tenant", "get", "acme", "-o", "json"]).stdout).unwrap();
    assert_eq!(
        acme["metadata"]["labels"],
        json!({"sbx.io/apply-set": "tenancy", "team": "platform"})
    );
    let keys: Value = serde_json::from_str(&sbx(&["key", "list", "-o", "json"]).stdout).unwrap();
    let beta_ci = keys
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "beta-ci")
        .unwrap();
    assert_eq!(beta_ci["labels"], json!({"sbx.io/apply-set": "tenancy"}));
    assert_eq!(
        apply(&[]).stdout,
        "tenant/acme unchanged\ntenant/beta unchanged\napikey/beta-ci unchanged\n"
    );

    // A real sandbox in beta's namespace.
    let (status, body) = common::call(
        &daemon,
        &token,
        reqwest::Method::POST,
        "/api/v1/sandboxes",
        Some(json!({"name": "job", "namespace": "beta", "image": sbxd::busybox()})),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    // beta and its key leave the files.
    std::fs::write(dir.join("set.yaml"), SET.split("---").next().unwrap()).unwrap();
    let diff = sbx(&["diff", "-f", files, "--applyset", "tenancy", "--prune"]);
    assert_eq!(diff.code, 1, "{}", diff.stderr);
    assert!(
        diff.stdout
            .contains("# apikey/beta-ci is no longer in the files: it would be pruned")
            && diff.stdout.contains("-  - beta")
            && !diff.stdout.contains("legacy"),
        "{}",
        diff.stdout
    );
    let refused = apply(&["--prune"]);
    assert_eq!(refused.code, 1);
    assert!(
        refused
            .stderr
            .contains("tenant/beta would be pruned but has 1 sandbox(es): pass --cascade"),
        "{}",
        refused.stderr
    );
    let dry = apply(&["--prune", "--cascade", "--dry-run"]);
    assert_eq!(
        dry.stdout,
        "tenant/acme unchanged (dry run)\napikey/beta-ci pruned (dry run)\ntenant/beta pruned (dry run)\n",
        "{}",
        dry.stderr
    );
    assert_eq!(tenant_names(), ["acme", "beta", "legacy"]);
    assert!(key_names().contains(&"beta-ci".to_string()));

    let pruned = apply(&["--prune", "--cascade"]);
    assert_eq!(
        pruned.stdout, "tenant/acme unchanged\napikey/beta-ci pruned\ntenant/beta pruned\n",
        "{}",
        pruned.stderr
    );
    assert_eq!(tenant_names(), ["acme", "legacy"]);
    assert!(!key_names().contains(&"beta-ci".to_string()));
    let (status, _) = common::call(
        &daemon,
        &token,
        reqwest::Method::GET,
        "/api/v1/sandboxes/job?namespace=beta",
        None,
    )
    .await;
    assert_eq!(status, 404, "the pruned tenant's sandbox is gone");
    assert_eq!(apply(&["--prune"]).stdout, "tenant/acme unchanged\n");
}
