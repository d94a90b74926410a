//! The `lifetimes` scenario: a sandbox created with a TTL is deleted at its deadline, one with
//! an idle timeout stays running while it is used and is paused once it is not, a PATCH sets
//! and removes both, a tenant's maximum TTL is the default and the ceiling, and bad values are
//! 400s. The deadline and the idle time are enforced by the leader (one daemon here; two
//! replicas in the cluster, where it is whichever holds the Lease).
use std::time::{Duration, Instant};

use reqwest::Method as M;
use sbx::shared::models::sandbox::{CreateSandboxRequest, SandboxPatch, SandboxStatus};
use sbx::shared::timestamp::{now_unix, parse_timestamp};
use serde_json::json;

use super::{Env, Platform, api_status};
use crate::common::call_at;

/// Seconds from now to a record's time field.
fn from_now(field: &Option<String>) -> i64 {
    parse_timestamp(field.as_deref().expect("a time")).unwrap() - now_unix()
}

pub(super) async fn lifetimes(platform: Platform) {
    let env = Env::new(platform, "life").await;
    let short = CreateSandboxRequest {
        ttl_seconds: Some(10),
        ..env.request("short")
    };
    let idle = CreateSandboxRequest {
        idle_timeout_seconds: Some(10),
        ..env.request("idle")
    };
    for request in [&short, &idle, &env.request("keep")] {
        env.client.create_sandbox(request).await.expect("create");
    }
    // Read at once, not once Running: on a loaded cluster the Pod may take longer than the
    // TTL to start, and the sandbox is then (rightly) gone before it ever reads Running.
    let s = env.get("short").await.expect("get short");
    assert!((0..=10).contains(&from_now(&s.expires_at)), "{s:?}");
    let i = env.running("idle").await;
    assert_eq!(i.idle_timeout_seconds, Some(10));
    assert!(
        i.expires_at.is_none() && i.last_activity_at.is_some(),
        "{i:?}"
    );
    env.running("keep").await;

    // Bad values.
    for (body, wanted) in [
        (json!({"ttl_seconds": 5}), "at least 10"),
        (json!({"idle_timeout_seconds": 0}), "at least 10"),
    ] {
        let (status, answer) = call_at(
            &env.url,
            &env.token,
            M::PATCH,
            &format!("/api/v1/sandboxes/keep?namespace={}", env.namespace),
            Some(body),
        )
        .await;
        assert!(
            status == 400 && answer.to_string().contains(wanted),
            "{status} {answer}"
        );
    }
    let low = CreateSandboxRequest {
        ttl_seconds: Some(3),
        ..env.request("low")
    };
    assert_eq!(api_status(env.client.create_sandbox(&low).await).0, 400);
    let patch = |ttl: Option<Option<u64>>, idle: Option<Option<u64>>| SandboxPatch {
        ttl_seconds: ttl,
        idle_timeout_seconds: idle,
    };
    assert_eq!(
        api_status(
            env.client
                .patch_sandbox("nope", &env.namespace, &patch(Some(Some(60)), None))
                .await
        )
        .0,
        404
    );

    // A PATCH sets a TTL from now, and removes it again.
    let k = env
        .client
        .patch_sandbox(
            "keep",
            &env.namespace,
            &patch(Some(Some(12)), Some(Some(600))),
        )
        .await
        .unwrap();
    assert!((0..=12).contains(&from_now(&k.expires_at)), "{k:?}");
    assert_eq!(k.idle_timeout_seconds, Some(600));
    let k = env
        .client
        .patch_sandbox("keep", &env.namespace, &patch(Some(None), None))
        .await
        .unwrap();
    assert!(
        k.expires_at.is_none() && k.idle_timeout_seconds == Some(600),
        "{k:?}"
    );
    // The same through the CLI.
    let out = std::process::Command::new(crate::common::sbx_bin())
        .args([
            "sandbox",
            "update",
            "keep",
            "-n",
            &env.namespace,
            "--idle-timeout",
            "20m",
        ])
        .env("SBX_SERVER", &env.url)
        .env("SBX_API_KEY", &env.token)
        .env(
            "SBX_CONFIG_DIR",
            std::env::temp_dir().join("sbx-life-cli-none"),
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("1200s"), "{text}");

    // Used every 3 s, the idle sandbox keeps running past its timeout.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(14) {
        assert_eq!(env.exec("idle", "true").await.exit_code, 0);
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    assert_eq!(
        env.get("idle").await.unwrap().status,
        SandboxStatus::Running
    );
    // Left alone, it is paused; the short one is gone; the one whose TTL was removed stays.
    env.until("idle", SandboxStatus::Paused).await;
    let started = Instant::now();
    loop {
        if let Err(sbx::cli::client::ClientError::Api(e)) = env.get("short").await {
            if e.status == 404 {
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "short outlived its TTL"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        env.get("keep").await.unwrap().status,
        SandboxStatus::Running
    );
    // A resume starts a new idle period.
    env.client
        .resume_sandbox(
            "idle",
            &sbx::shared::models::sandbox::ResumeRequest {
                namespace: Some(env.namespace.clone()),
            },
        )
        .await
        .unwrap();
    // (On Kubernetes the activity is written in the background: within a few seconds.)
    let started = Instant::now();
    loop {
        let i = env.running("idle").await;
        if from_now(&i.last_activity_at) > -5 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{i:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A tenant's maximum TTL: the default, the ceiling, and not removable.
    if matches!(platform, Platform::Local | Platform::Kubernetes) {
        let tenant = format!("{}-t", env.namespace);
        let owned = format!("{}-t", env.namespace);
        let (status, body) = call_at(
            &env.url,
            &env.token,
            M::POST,
            "/api/v1/tenants",
            Some(json!({"name": tenant, "spec": {"namespaces": [owned],
                "limits": {"maxTtlSeconds": 3600}}})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        let in_tenant = |name: &str, ttl: Option<u64>| CreateSandboxRequest {
            namespace: Some(owned.clone()),
            ttl_seconds: ttl,
            ..env.request(name)
        };
        let too_long = env
            .client
            .create_sandbox(&in_tenant("long", Some(7200)))
            .await;
        assert_eq!(api_status(too_long).0, 400);
        env.client
            .create_sandbox(&in_tenant("capped", None))
            .await
            .unwrap();
        let c = env.client.get_sandbox("capped", &owned).await.unwrap();
        assert!((3590..=3600).contains(&from_now(&c.expires_at)), "{c:?}");
        let removed = env
            .client
            .patch_sandbox("capped", &owned, &patch(Some(None), None))
            .await;
        assert_eq!(api_status(removed).0, 400);
        let _ = env.client.delete_all_sandboxes(&owned).await;
        let _ = env.client.delete_tenant(&tenant, true).await;
    }
    env.cleanup().await;
}
