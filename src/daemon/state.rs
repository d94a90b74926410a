//! The application state every route shares: configuration and services (routes reach the
//! platform only through the services).
use std::sync::Arc;

use crate::daemon::audit::Audit;
use crate::daemon::config::Config;
use crate::daemon::oidc::OidcVerifier;
use crate::daemon::platform::{IdentityStore, Platform, TenantStore};
use crate::daemon::ratelimit::RateLimits;
use crate::daemon::services::bindings::BindingService;
use crate::daemon::services::images::{ImageService, RegistryPolicy};
use crate::daemon::services::install::InstallService;
use crate::daemon::services::keys::KeyService;
use crate::daemon::services::metering::Metering;
use crate::daemon::services::sandboxes::SandboxService;
use crate::daemon::services::snapshots::SnapshotService;
use crate::daemon::services::tenants::TenantService;

/// Cheap to clone: every field is shared.
#[derive(Clone)]
pub struct AppState {
    /// The resolved configuration.
    pub config: Arc<Config>,
    /// Where state and sandboxes live (for the daemon's start and stop only).
    platform: Arc<dyn Platform>,
    /// API keys: minting, revocation, authentication.
    pub keys: Arc<KeyService>,
    /// Sandbox rules over the platform.
    pub sandboxes: Arc<SandboxService>,
    /// Snapshot rules over the platform.
    pub snapshots: Arc<SnapshotService>,
    /// Tenants, access to namespaces, quotas.
    pub tenants: Arc<TenantService>,
    /// Role bindings for OIDC principals.
    pub bindings: Arc<BindingService>,
    /// Usage metering, request metrics and showback.
    pub metering: Arc<Metering>,
    /// Bearer-JWT verification, when `[oidc]` is configured.
    pub oidc: Option<Arc<OidcVerifier>>,
    /// Images: the host's store (local platform only).
    pub images: Arc<ImageService>,
    /// Remote install of other nodes (Kubernetes, when turned on).
    pub install: Arc<InstallService>,
    /// Requests per principal and client address, concurrent streams per tenant.
    pub rate_limits: Arc<RateLimits>,
    /// The audit trail of writes (none when its file cannot be opened).
    pub audit: Option<Audit>,
}

impl AppState {
    /// The platform's name (`local`, `kubernetes`).
    pub fn platform_name(&self) -> &'static str {
        self.platform.name()
    }

    /// Whether this replica can serve requests now (`GET /readyz`); the reason when not.
    pub async fn readiness(&self) -> Result<(), String> {
        self.platform.ready().await
    }

    /// Tells the platform where the API listens (other replicas may pass it requests).
    pub fn listening(&self, local: std::net::SocketAddr) {
        self.platform.listening(local)
    }

    /// The platform's internal TLS certificates, when it has them.
    pub fn internal_tls(&self) -> Option<crate::shared::tls::Generated> {
        self.platform.internal_tls()
    }

    /// Stops the platform's background work (at daemon shutdown).
    pub async fn shutdown_platform(&self) {
        self.platform.shutdown().await
    }

    /// Builds the state and its services over a platform.
    pub fn new(config: Config, platform: Arc<dyn Platform>) -> AppState {
        let config = Arc::new(config);
        // Each service holds the seams it uses.
        let identity: Arc<dyn IdentityStore> = platform.clone();
        let tenancy: Arc<dyn TenantStore> = platform.clone();
        let keys = Arc::new(KeyService::new(
            identity.clone(),
            tenancy.clone(),
            config.mode,
        ));
        let tenants = Arc::new(TenantService::new(platform.clone(), config.mode));
        let registries = Arc::new(RegistryPolicy::new(config.images.allowed_registries()));
        let sandboxes = Arc::new(SandboxService::new(
            platform.clone(),
            tenancy.clone(),
            tenants.clone(),
            registries.clone(),
            config.mode,
            config.sandbox_defaults,
        ));
        let images = Arc::new(ImageService::new(platform.images(), registries.clone()));
        let install = Arc::new(InstallService::new(platform.installer(), tenancy.clone()));
        let bindings = Arc::new(BindingService::new(identity));
        let metering = Arc::new(Metering::new(
            tenancy.clone(),
            tenants.clone(),
            config.metering.metrics_url.clone(),
            |registry| platform.register_metrics(registry),
        ));
        let oidc = config.oidc.clone().map(|c| Arc::new(OidcVerifier::new(c)));
        let rate_limits = Arc::new(RateLimits::new(&config.rate_limit));
        let audit_path = config
            .audit
            .path
            .clone()
            .unwrap_or_else(|| crate::daemon::audit::default_path(&config));
        let interval = config
            .audit
            .auth_failure_interval()
            .unwrap_or(std::time::Duration::from_secs(60));
        let audit = match Audit::open(&audit_path, interval) {
            Ok(audit) => Some(audit),
            Err(e) => {
                tracing::error!(file = %audit_path.display(), error = %e, "cannot open the audit log: writes are not audited");
                None
            }
        };
        let snapshots = Arc::new(SnapshotService::new(
            platform.clone(),
            platform.clone(),
            tenancy,
            tenants.clone(),
            registries,
            config.mode,
            config.sandbox_defaults,
        ));
        AppState {
            config,
            platform,
            keys,
            sandboxes,
            snapshots,
            tenants,
            bindings,
            metering,
            oidc,
            images,
            install,
            rate_limits,
            audit,
        }
    }
}
