//! Remote install (spec, Remote install): the body rules, and the leader's upkeep of open
//! operations, over the platform's installer where it has one and it is turned on (404 for
//! both routes otherwise).
use std::sync::Arc;

use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::platform::TenantStore;
use crate::daemon::platform::install::InstallBackend;
use crate::shared::models::install::{InstallRequest, InstallStartResponse, InstallStatusResponse};

/// How often the leader brings open operations up to date, so that a node whose install
/// finished gets its agent even when nobody asks.
const RECONCILE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// The install service.
pub struct InstallService {
    backend: Option<Arc<dyn InstallBackend>>,
    tenancy: Arc<dyn TenantStore>,
}

impl InstallService {
    /// A service over the platform's installer, if it has one turned on.
    pub fn new(
        backend: Option<Arc<dyn InstallBackend>>,
        tenancy: Arc<dyn TenantStore>,
    ) -> InstallService {
        InstallService { backend, tenancy }
    }

    /// 404 while remote install is off: checked before the caller's role, so that a service
    /// with it off answers every caller alike.
    pub fn enabled(&self) -> ServiceResult<()> {
        self.backend().map(|_| ())
    }

    fn backend(&self) -> ServiceResult<&Arc<dyn InstallBackend>> {
        self.backend.as_ref().ok_or_else(|| {
            ServiceError::not_found(
                "remote install is not enabled on this service ([kubernetes.install] enabled \
                 = true turns it on)",
            )
        })
    }

    /// `POST /install`: the body is exactly `{nodes: [...]}`.
    pub async fn start(&self, request: &InstallRequest) -> ServiceResult<InstallStartResponse> {
        let backend = self.backend()?;
        let nodes = request.validate().map_err(ServiceError::bad_request)?;
        Ok(backend.start_install(nodes).await?)
    }

    /// `GET /install/{operation}`.
    pub async fn status(&self, operation: &str) -> ServiceResult<InstallStatusResponse> {
        Ok(self.backend()?.install_status(operation).await?)
    }

    /// On the leader, brings open operations up to date every few seconds (forever).
    pub async fn reconcile_loop(self: Arc<Self>) {
        let Some(backend) = self.backend.clone() else {
            return;
        };
        let mut tick = tokio::time::interval(RECONCILE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if !self.tenancy.is_leader() {
                continue;
            }
            if let Err(e) = backend.reconcile_installs().await {
                tracing::warn!(error = %e, "bringing install operations up to date");
            }
        }
    }
}
