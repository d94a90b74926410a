//! Unit tests of `tenants`.
use super::*;

/// Tenant writes while reloads run back to back (the timer's, another replica's view):
/// a list read before a write must never replace the cache the write left, or the new
/// tenant's namespaces are briefly without an owner (another tenant could claim them).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reload_begun_before_a_write_never_hides_it() {
    use crate::daemon::platform::local::LocalPlatform;
    use crate::shared::models::tenant::TenantSpecPatch;
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let platform = Arc::new(LocalPlatform::open(dir.path(), vec![]).unwrap());
    let service = Arc::new(TenantService::new(platform, Mode::Development));
    let stop = Arc::new(AtomicBool::new(false));
    let reloaders: Vec<_> = (0..3)
        .map(|_| {
            let (service, stop) = (service.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    service.reload().await.unwrap();
                }
            })
        })
        .collect();
    let spec = |ns: &str| TenantSpec {
        namespaces: vec![ns.to_string()],
        ..Default::default()
    };
    for i in 0..150 {
        let (name, ns, added) = (format!("t{i}"), format!("ns{i}"), format!("more{i}"));
        let request = CreateTenantRequest {
            name: Some(name.clone()),
            spec: Some(spec(&ns)),
            labels: None,
        };
        service.create(&request).await.unwrap();
        let owner = service.owner(&ns).await.unwrap().map(|o| o.name);
        assert_eq!(owner.as_deref(), Some(name.as_str()), "after create {i}");
        let claim = CreateTenantRequest {
            name: Some(format!("other{i}")),
            spec: Some(spec(&ns)),
            labels: None,
        };
        let error = service.create(&claim).await.unwrap_err();
        assert!(
            error.message.contains("already belongs"),
            "{}",
            error.message
        );
        let patch = PatchTenantRequest {
            spec: TenantSpecPatch {
                namespaces: Some(Some(vec![ns.clone(), added.clone()])),
                ..Default::default()
            },
            labels: None,
        };
        service.update(&name, &patch).await.unwrap();
        let owner = service.owner(&added).await.unwrap().map(|o| o.name);
        assert_eq!(owner.as_deref(), Some(name.as_str()), "after patch {i}");
    }
    stop.store(true, Ordering::Relaxed);
    for r in reloaders {
        r.await.unwrap();
    }
}

#[test]
fn access_takes_the_highest_role_per_namespace() {
    let mut access = Access::default();
    access.namespaces.insert("a".into(), Role::ReadOnly);
    assert_eq!(access.role_in("a"), Some(Role::ReadOnly));
    assert_eq!(access.role_in("b"), None);
    assert!(!access.everywhere());
    access.everywhere = Some(Role::Operator);
    assert_eq!(access.role_in("a"), Some(Role::Operator));
    assert!(access.sees("b"));
}

#[test]
fn status_reads_as_quantities() {
    let status = status_of(
        Reservation {
            sandboxes: 2,
            cpu_millis: 1500,
            memory_bytes: 3 << 30,
            disk_bytes: 0,
            root_disk_bytes: 0,
            snapshot_bytes: 512 << 20,
        },
        4,
    );
    assert_eq!(status.usage.sandboxes, "2");
    assert_eq!(status.usage.vcpu, "1500m");
    assert_eq!(status.usage.memory, "3Gi");
    assert_eq!(status.usage.disk, "0");
    assert_eq!(status.usage.snapshot_storage, "512Mi");
    assert_eq!(status.observed_generation, 4);
}
