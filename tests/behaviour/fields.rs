//! The `fields` scenario: a create with an inline `env` map, `entrypoint`/`cmd` and `labels`;
//! the variables reach the sandbox and never come back (get, list, the Deployment or record
//! the cluster keeps), the command runs, labels show and select (`label_selector`, `sbx
//! sandbox ls -l`), and every bad field is a 400 that names the field, never a value. Under
//! KWOK nothing runs the container: there the objects the platform made are read instead.
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use reqwest::Method as M;
use sbx::shared::models::sandbox::CreateSandboxRequest;

use super::{Env, Platform};
use crate::common::{self, call_at, cluster};

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The names a list with `selector` gives in the scenario's namespace.
async fn selected(env: &Env, selector: &str) -> Vec<String> {
    let mut names: Vec<String> = env
        .client
        .list_sandboxes_selected(Some(&env.namespace), Some(selector))
        .await
        .unwrap_or_else(|e| panic!("list -l {selector}: {e}"))
        .into_iter()
        .map(|s| s.name)
        .collect();
    names.sort();
    names
}

pub(super) async fn fields(platform: Platform) {
    let env = Env::new(platform, "fields").await;
    let secret = format!("s3cret-{}", std::process::id());
    let app = CreateSandboxRequest {
        env: Some(map(&[("GREETING", "hello"), ("SECRET", &secret)])),
        entrypoint: Some(vec!["/bin/sh".into(), "-c".into()]),
        cmd: Some(vec!["echo booted-$GREETING; exec sleep 3600".into()]),
        labels: Some(map(&[("team", "ml"), ("example.com/tier", "gpu")])),
        ..env.request("app")
    };
    env.client.create_sandbox(&app).await.expect("create app");
    let web = CreateSandboxRequest {
        labels: Some(map(&[("team", "web")])),
        ..env.request("web")
    };
    env.client.create_sandbox(&web).await.expect("create web");
    let record = env.running("app").await;
    env.running("web").await;
    assert_eq!(
        record.labels,
        map(&[("team", "ml"), ("example.com/tier", "gpu")])
    );

    // The values never come back: not in get, not in the list.
    for path in [
        format!("/api/v1/sandboxes/app?namespace={}", env.namespace),
        format!("/api/v1/sandboxes?namespace={}", env.namespace),
    ] {
        let (status, body) = call_at(&env.url, &env.token, M::GET, &path, None).await;
        assert_eq!(status, 200, "{body}");
        assert!(!body.to_string().contains(&secret), "{path}: {body}");
    }

    // Labels select.
    assert_eq!(selected(&env, "team=ml").await, ["app"]);
    assert_eq!(selected(&env, "team!=ml").await, ["web"]);
    assert_eq!(selected(&env, "example.com/tier").await, ["app"]);
    assert_eq!(selected(&env, "!example.com/tier").await, ["web"]);
    assert!(
        selected(&env, "team=ml,example.com/tier=cpu")
            .await
            .is_empty()
    );
    let (status, body) = call_at(
        &env.url,
        &env.token,
        M::GET,
        &format!(
            "/api/v1/sandboxes?namespace={}&label_selector=bad%20key",
            env.namespace
        ),
        None,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let out = std::process::Command::new(common::sbx_bin())
        .args(["sandbox", "ls", "-n", &env.namespace, "-l", "team=ml"])
        .env("SBX_SERVER", &env.url)
        .env("SBX_API_KEY", &env.token)
        .env(
            "SBX_CONFIG_DIR",
            std::env::temp_dir().join("sbx-fields-cli-none"),
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("app") && !text.contains("web"),
        "{text}"
    );

    // What runs: the entrypoint and cmd, with the variables.
    match platform {
        Platform::Local | Platform::InCluster | Platform::InClusterSbxd => {
            let r = env
                .exec("app", "echo \"$SECRET\"; tr '\\0' ' ' < /proc/1/cmdline")
                .await;
            assert_eq!(r.exit_code, 0, "{r:?}");
            assert!(
                r.stdout.starts_with(&format!("{secret}\nsleep 3600")),
                "{r:?}"
            );
            let started = std::time::Instant::now();
            loop {
                let logs = env
                    .client
                    .sandbox_logs(
                        "app",
                        &sbx::shared::models::sandbox::LogsQuery {
                            namespace: Some(env.namespace.clone()),
                            container: "sandbox".into(),
                            tail: 200,
                            since: 0,
                            follow: false,
                        },
                    )
                    .await
                    .unwrap();
                if logs.logs.contains("booted-hello") {
                    break;
                }
                assert!(started.elapsed().as_secs() < 30, "no boot line: {logs:?}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
        // KWOK runs no container: the Deployment says what the kubelet would run.
        Platform::Kubernetes => {}
    }
    if matches!(platform, Platform::Kubernetes | Platform::InCluster) {
        let kube = cluster().await;
        let deployments: kube::Api<Deployment> =
            kube::Api::namespaced(kube.clone(), &env.namespace);
        let d = deployments.get("app").await.unwrap();
        let labels = d.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("team").map(String::as_str), Some("ml"));
        let container = &d.spec.template.spec.as_ref().unwrap().containers[0];
        assert_eq!(container.command, app.entrypoint);
        assert_eq!(container.args, app.cmd);
        let json = serde_json::to_string(&d).unwrap();
        assert!(
            !json.contains(&secret),
            "the Deployment holds the value: {json}"
        );
        let secrets: kube::Api<Secret> = kube::Api::namespaced(kube, &env.namespace);
        let s = secrets.get("app-env").await.unwrap();
        let value = s
            .data
            .unwrap_or_default()
            .get("SECRET")
            .map(|v| v.0.clone());
        assert_eq!(value, Some(secret.clone().into_bytes()));
    }

    // Refusals name the field, never a value.
    let refuse = |request: CreateSandboxRequest, wanted: &'static str| {
        let client = env.client.clone();
        let secret = secret.clone();
        async move {
            match client.create_sandbox(&request).await {
                Err(sbx::cli::client::ClientError::Api(e)) => {
                    assert_eq!((e.status, e.code.as_str()), (400, "BadRequest"), "{e:?}");
                    assert!(e.message.contains(wanted), "{wanted}: {}", e.message);
                    assert!(!e.message.contains(&secret), "{}", e.message);
                }
                other => panic!("{wanted}: expected a 400, got {other:?}"),
            }
        }
    };
    refuse(
        CreateSandboxRequest {
            env: Some(map(&[("1BAD", &secret)])),
            ..env.request("bad")
        },
        "1BAD",
    )
    .await;
    refuse(
        CreateSandboxRequest {
            labels: Some(map(&[("sbx.io/sandbox", "x")])),
            ..env.request("bad")
        },
        "reserved",
    )
    .await;
    refuse(
        CreateSandboxRequest {
            labels: Some(map(&[("team", "-x-")])),
            ..env.request("bad")
        },
        "label 'team'",
    )
    .await;
    refuse(
        CreateSandboxRequest {
            entrypoint: Some(vec![]),
            ..env.request("bad")
        },
        "entrypoint",
    )
    .await;
    assert!(super::api_status(env.get("bad").await).0 == 404);
    // Nor did any reach the service's log (the daemons of this test's own).
    if let Some(daemon) = &env._daemon {
        assert!(
            !daemon.log_text().contains(&secret),
            "a value reached the log"
        );
    }
    env.cleanup().await;
}
