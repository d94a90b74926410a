//! Unit tests of `sandboxes`.
use super::*;

#[test]
fn events_are_read_only_for_a_pod_that_is_slow_to_start() {
    let pod = |scheduled: Option<&str>, running: bool| {
        let mut status = json!({});
        if let Some(at) = scheduled {
            status["conditions"] = json!([{
                "type": "PodScheduled", "status": "True", "lastTransitionTime": at,
            }]);
        }
        if running {
            status["containerStatuses"] = json!([{
                "name": "sandbox", "image": "i", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"running": {}},
            }]);
        }
        serde_json::from_value::<Pod>(json!({"metadata": {"name": "p"}, "status": status})).unwrap()
    };
    // 2026-11-26T10:00:00Z
    let at = 1_795_687_200;
    let scheduled = Some("2026-11-26T10:00:00Z");
    assert!(!starting_too_long(&pod(None, false), at + 60));
    assert!(!starting_too_long(&pod(scheduled, false), at + 1));
    assert!(starting_too_long(
        &pod(scheduled, false),
        at + STARTING_GRACE
    ));
    assert!(!starting_too_long(&pod(scheduled, true), at + 60));
}

#[test]
fn the_newest_warning_says_why_a_pod_waits() {
    let event = |type_: &str, reason: &str, message: &str, at: &str| {
        serde_json::from_value::<k8s_openapi::api::core::v1::Event>(json!({
            "metadata": {"name": reason},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "type": type_, "reason": reason, "message": message, "lastTimestamp": at,
        }))
        .unwrap()
    };
    assert_eq!(pending_reason(&[]), None);
    let events = [
        event("Normal", "Scheduled", "assigned", "2026-11-26T10:00:00Z"),
        event("Warning", "FailedMount", "not yet", "2026-11-26T10:00:01Z"),
        event(
            "Warning",
            "FailedCreatePodSandBox",
            "no runtime for \"kata-fc\" is configured",
            "2026-11-26T10:00:05Z",
        ),
        event("Normal", "Pulling", "pulling", "2026-11-26T10:00:09Z"),
    ];
    assert_eq!(
        pending_reason(&events).as_deref(),
        Some("FailedCreatePodSandBox: no runtime for \"kata-fc\" is configured")
    );
}

#[test]
fn placement_settings_reach_the_pod() {
    let template = SandboxTemplate {
        image: "busybox".into(),
        backend: "kata-firecracker-devmapper".into(),
        ..Default::default()
    };
    let mut settings = KubernetesSettings::default();
    let plain = deployment("ns", "s", &template, None, None, &settings, false);
    let pod = &plain["spec"]["template"]["spec"];
    assert!(pod.get("nodeSelector").is_none() && pod.get("tolerations").is_none());

    settings
        .sandbox_node_selector
        .insert("sbx.io/sandboxes".into(), "true".into());
    settings.sandbox_tolerations = vec![
        serde_json::from_value(json!({
            "key": "sbx.io/sandboxes", "operator": "Exists", "effect": "NoSchedule",
        }))
        .unwrap(),
    ];
    let placed = deployment("ns", "s", &template, Some("acme"), None, &settings, false);
    let pod = &placed["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"], json!({"sbx.io/sandboxes": "true"}));
    assert_eq!(
        pod["tolerations"],
        json!([
            {"key": TENANT_LABEL, "operator": "Equal", "value": "acme", "effect": "NoSchedule"},
            {"key": "sbx.io/sandboxes", "operator": "Exists", "effect": "NoSchedule"},
        ])
    );
}

#[test]
fn a_deployment_reserves_its_limits_and_its_recorded_root_disk() {
    let template = SandboxTemplate {
        image: "busybox".into(),
        backend: crate::daemon::platform::kubernetes::KQL_BACKEND.into(),
        cpu_millis: Some(250),
        memory_bytes: Some(256 << 20),
        ephemeral_bytes: Some(1 << 30),
        root_disk_bytes: Some(5 << 30),
        capabilities: vec!["CAP_CHOWN".into()],
        labels: [("team".to_string(), "a".to_string())].into(),
        ..Default::default()
    };
    let settings = KubernetesSettings::default();
    let object = deployment("ns", "s", &template, None, None, &settings, false);
    let d: Deployment = serde_json::from_value(object).unwrap();
    let size = size(&d);
    assert_eq!(
        (size.sandboxes, size.cpu_millis, size.memory_bytes),
        (1, 250, 256 << 20)
    );
    assert_eq!(size.root_disk_bytes, 5 << 30);
    assert_eq!(size.disk_bytes, (1 << 30) + (5 << 30));
    assert_eq!(
        SandboxTemplate::recorded(&d).unwrap().root_disk_bytes,
        Some(size.root_disk_bytes)
    );
}
