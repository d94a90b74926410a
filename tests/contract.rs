//! The API contract under a property-based fuzzer: schemathesis (PyPI) runs all its phases
//! (examples, coverage, fuzzing, stateful) against a live `sbx serve` on the embedded default,
//! reading the OpenAPI document the daemon serves. Creates run real sandboxes (hooks.py swaps
//! a valid generated image for the test image), usage reads a real Prometheus. The bar is 0
//! failures; `tests/schemathesis/hooks.py` lists the 400s of rules the schema can only state
//! in words (a name that exists, a role that needs a tenant) and drops only those.
//!
//! Needs root, /usr/bin/prometheus, the test registry and schemathesis: `SBX_SCHEMATHESIS`
//! names the executable (scripts/test installs it in a cached venv). Seeded
//! (`SBX_CONTRACT_SEED`, a fixed default) so that a failure reproduces.
mod common;

use std::process::Command;

use common::prometheus::{free_port, prometheus};
use common::sbxd::{self, TestNet};
use common::{key, reap_sandboxes};
use sbx::shared::models::image::PullImageRequest;

/// Examples per operation and phase: enough to cross every rule, bounded in time.
const MAX_EXAMPLES: &str = "20";
const DEFAULT_SEED: &str = "20261127";

#[tokio::test(flavor = "multi_thread")]
async fn schemathesis_finds_the_server_doing_what_the_document_says() {
    let schemathesis = std::env::var("SBX_SCHEMATHESIS").unwrap_or_else(|_| "schemathesis".into());
    let seed = std::env::var("SBX_CONTRACT_SEED").unwrap_or_else(|_| DEFAULT_SEED.into());
    let net = TestNet::new();
    let prom_port = free_port();
    // Schemathesis is one client firing as fast as it can, with many requests that carry
    // no or invalid credentials (its authentication checks, which want 401 for each): the
    // per-address limit answers 429 to those past its burst, as it is there to. The limits
    // have tests of their own (tests/isolation_limits.rs); their 429 is in the document of
    // every protected route.
    let daemon = sbxd::daemon(
        &net,
        &format!(
            "[metering]\nmetricsUrl = \"http://127.0.0.1:{prom_port}\"\n\n\
             [rateLimit]\nperSecond = 0\nperAddressPerSecond = 0\n"
        ),
    );
    let admin = daemon.admin();
    let image = sbxd::busybox();
    admin
        .pull_image(&PullImageRequest {
            reference: Some(image.clone()),
        })
        .await
        .expect("pull the test image");
    let scraper = key(&admin, "prometheus", "operator", None).await;
    let target = daemon.url.trim_start_matches("http://").to_string();
    let _prometheus = prometheus(prom_port, &target, &scraper);

    let hooks = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/schemathesis");
    // schemathesis keeps a cache in its working directory: not in the repository.
    let workdir = tempfile::tempdir().unwrap();
    let output = Command::new(&schemathesis)
        .current_dir(workdir.path())
        .args([
            "--config-file",
            &format!("{hooks}/schemathesis.toml"),
            "run",
            &format!("{}/api/v1/openapi.json", daemon.url),
            "--header",
            &format!("X-API-Key: {}", daemon.admin_token()),
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "--max-examples",
            MAX_EXAMPLES,
            "--seed",
            &seed,
            "--workers",
            "1",
            "--request-timeout",
            "120",
            "--wait-for-schema",
            "30",
            // Revoking keys by name would revoke the run's own admin key.
            "--exclude-path-regex",
            "^/api/v1/keys/\\{name\\}$",
            "--no-color",
        ])
        .env("SCHEMATHESIS_HOOKS", "hooks")
        .env("PYTHONPATH", hooks)
        .env("SBX_CONTRACT_IMAGE", &image)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "run {schemathesis} ({e}): set SBX_SCHEMATHESIS or run scripts/test, which installs it"
            )
        });
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}\n{stderr}");
    let log = daemon.log_text();
    assert!(!log.contains("panicked"), "the daemon panicked:\n{log}");
    assert!(
        output.status.success(),
        "schemathesis (seed {seed}) found the server and the document disagreeing: see its report above"
    );
    // Errors (a request that could not be sent or answered) do not fail schemathesis' exit
    // status; they are failures here.
    assert!(
        !stdout.contains("\u{1f6ab}"),
        "schemathesis (seed {seed}) met errors: see its report above"
    );
    assert!(
        stdout.contains("\u{2705}  Stateful"),
        "the stateful phase did not run or did not pass:\n{stdout}"
    );
    let data_dir = daemon.data_dir.clone();
    drop(daemon);
    reap_sandboxes(&data_dir);
}
