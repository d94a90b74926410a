//! A client generated from `docs/openapi.json` by openapi-python-client (PyPI) does the
//! README's quick start against a live `sbx serve` on the embedded default: create, wait for
//! Running, exec, logs, list, delete (`tests/client/quickstart.py`). If the document and the
//! server disagreed on a field, a type or a status, the generated code would fail here.
//!
//! Needs root and the test registry; `SBX_PYTOOLS` names the venv with openapi-python-client
//! (scripts/test installs it).
mod common;

use std::path::Path;
use std::process::Command;

use common::sbxd::{self, TestNet};
use sbx::shared::models::image::PullImageRequest;

fn run(program: &Path, args: &[&str], env: &[(&str, &str)], dir: &Path) -> String {
    let output = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "run {} ({e}): run scripts/test, which installs it",
                program.display()
            )
        });
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{} {args:?} failed:\n{text}",
        program.display()
    );
    text
}

#[tokio::test(flavor = "multi_thread")]
async fn a_generated_python_client_does_the_quick_start() {
    let tools = std::env::var("SBX_PYTOOLS")
        .expect("SBX_PYTOOLS: run scripts/test, which installs the Python tools");
    let bin = Path::new(&tools).join("bin");
    let work = tempfile::tempdir().unwrap();
    let document = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.json");
    let generated = run(
        &bin.join("openapi-python-client"),
        &[
            "generate",
            "--path",
            document,
            "--meta",
            "none",
            "--output-path",
            "sbx_client",
        ],
        &[],
        work.path(),
    );
    println!("{generated}");

    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let image = sbxd::busybox();
    daemon
        .admin()
        .pull_image(&PullImageRequest {
            reference: Some(image.clone()),
        })
        .await
        .unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/client/quickstart.py");
    let token = daemon.admin_token();
    let out = run(
        &bin.join("python"),
        &[script, &daemon.url, &token, &image],
        &[("PYTHONPATH", work.path().to_str().unwrap())],
        work.path(),
    );
    println!("{out}");
    assert!(
        out.contains("quick start through the generated client: ok"),
        "{out}"
    );
}
