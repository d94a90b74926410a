//! The API daemon (`sbx serve`): configuration, state, routes, services and platforms.
pub mod audit;
pub mod auth;
pub mod config;
pub mod error;
pub mod extract;
pub mod forward;
pub mod listener;
pub mod mirror;
pub mod oidc;
pub mod openapi;
pub mod platform;
pub mod ratelimit;
pub mod routes;
pub mod services;
pub mod state;

use std::sync::Arc;

use tokio::net::TcpListener;

use crate::daemon::config::{Config, PlatformKind};
use crate::daemon::platform::local::{LocalPlatform, RuntimeSettings};
use crate::daemon::platform::{Platform, PlatformError};
use crate::daemon::state::AppState;

pub use routes::app;

/// Why `sbx serve` could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The platform could not be opened.
    #[error(transparent)]
    Platform(#[from] PlatformError),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Start-up work failed (e.g. minting the first admin key).
    #[error("start-up failed: {0}")]
    Startup(String),
    /// The server loop failed.
    #[error("server error: {0}")]
    Io(#[from] std::io::Error),
}

/// Opens the configured platform and starts its runtime.
pub async fn open_platform(config: &Config) -> Result<Arc<dyn Platform>, ServeError> {
    match config.platform {
        PlatformKind::Local => {
            let mut platform =
                LocalPlatform::open(&config.data_dir, config.images.insecure_registries.clone())?;
            if let Some(path) = &config.nodes.disk_pool_path {
                platform.set_disk_pool(path.clone());
            }
            // Checked when the config was resolved: an error here is the defaults' (none).
            if let Ok(limits) = config.images.limits() {
                platform.image_store().set_limits(limits);
            }
            platform
                .image_store()
                .set_private_registries(config.images.private_registries.clone());
            for archive in &config.images.preload {
                let images = platform
                    .image_store()
                    .import_archive(archive)
                    .await
                    .map_err(|e| {
                        ServeError::Startup(format!("cannot import {}: {e}", archive.display()))
                    })?;
                for image in images {
                    tracing::info!(reference = %image.reference, archive = %archive.display(), "image imported");
                }
            }
            config
                .network
                .deny_list()
                .map_err(|e| ServeError::Startup(e.to_string()))?;
            platform
                .start_runtime(RuntimeSettings {
                    runtime: config.runtime.clone(),
                    network: config.network.clone(),
                })
                .await;
            Ok(Arc::new(platform))
        }
        PlatformKind::Kubernetes => {
            let platform =
                platform::kubernetes::KubernetesPlatform::connect(config.kubernetes.clone())
                    .await
                    .map_err(|e| ServeError::Startup(e.to_string()))?;
            let platform = Arc::new(platform);
            // The daemon's tenant rules in the namespaces that hold tenants or sandboxes
            // already (made by a version that did not bind them per namespace).
            let binding = platform.clone();
            tokio::spawn(async move { binding.bind_known_namespaces().await });
            Ok(platform)
        }
    }
}

/// Prepares the state (platform, key mirror, first admin key) for a configuration.
pub async fn prepare(config: Config) -> Result<AppState, ServeError> {
    let platform = open_platform(&config).await?;
    let state = AppState::new(config, platform);
    let startup = |e: error::ServiceError| ServeError::Startup(e.internal.unwrap_or(e.message));
    state.keys.reload().await.map_err(startup)?;
    let admin_binding = state.bindings.has_admin_binding().await.map_err(startup)?;
    state
        .keys
        .ensure_admin(admin_binding)
        .await
        .map_err(startup)?;
    warn_unscoped_keys(&state).await;
    Ok(state)
}

/// Issue 43 point 20: new unscoped tenant-role keys are refused once a tenant exists, but keys
/// minted before the first tenant still reach every namespace; say so at every start.
async fn warn_unscoped_keys(state: &AppState) {
    let Ok(tenants) = state.tenants.all().await else {
        return;
    };
    if tenants.is_empty() {
        return;
    }
    let unscoped: Vec<String> = state
        .keys
        .list()
        .await
        .into_iter()
        .filter(|k| k.role.is_tenant_scoped() && k.tenant.is_none())
        .map(|k| format!("{} ({})", k.name, k.id))
        .collect();
    if !unscoped.is_empty() {
        tracing::warn!(keys = %unscoped.join(", "), tenants = tenants.len(),
            "unscoped development-mode keys reach every tenant's namespaces: revoke them \
             (DELETE /api/v1/keys/NAME) and mint keys with a tenant");
    }
}

/// The replicas' internal listener (`[kubernetes] internalListen`): the same API, over TLS
/// that only a client with the replicas' certificate completes; other replicas pass
/// requests to it (the platform is told its address).
async fn internal_listener(
    state: &AppState,
    tls: &crate::shared::tls::Generated,
) -> Result<(TcpListener, Arc<rustls::ServerConfig>), ServeError> {
    let config = crate::shared::tls::server_config(&tls.replica, Some(&tls.ca_pem))
        .map_err(ServeError::Startup)?;
    forward::pass_over_tls(tls).map_err(ServeError::Startup)?;
    let addr = state.config.kubernetes.internal_listen;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let local = listener.local_addr()?;
    state.listening(local);
    tracing::info!("replicas pass requests to https://{local} (internal TLS)");
    Ok((listener, config))
}

/// Runs the daemon until SIGTERM or SIGINT, then drains in-flight requests.
pub async fn serve(config: Config) -> Result<(), ServeError> {
    // Sandboxes run as their own (unprivileged) root and read some of what the daemon writes
    // for them: bundles, layers, CRIU images. Like dockerd, the daemon fixes its umask so an
    // inherited one (0077 from a service manager, a CI runner) cannot break them; secrets
    // and private dirs get explicit modes where they are made.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    let addr = config.listen;
    let state = prepare(config).await?;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let local = listener.local_addr()?;
    let internal = match state.internal_tls() {
        Some(tls) => Some(internal_listener(&state, &tls).await?),
        None => {
            state.listening(local);
            None
        }
    };
    tracing::info!(
        platform = state.platform_name(),
        mode = %state.config.mode,
        data_dir = %state.config.data_dir.display(),
        "sbx serve listening on http://{local}"
    );
    let refresher = tokio::spawn(state.keys.clone().refresh_loop());
    let sweeper = tokio::spawn(state.snapshots.clone().sweep_loop());
    let tenant_status = tokio::spawn(state.tenants.clone().status_loop());
    let meter = tokio::spawn(state.metering.clone().accrue_loop());
    let installs = tokio::spawn(state.install.clone().reconcile_loop());
    let nodes = tokio::spawn(state.sandboxes.clone().nodes_loop());
    let lifetimes = tokio::spawn(state.sandboxes.clone().lifetimes_loop());
    let router = app(state.clone());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let internal = internal.map(|(listener, tls)| {
        let mut stopped = stopped.clone();
        tokio::spawn(listener::serve(
            listener,
            router.clone(),
            state.config.http.header_read_timeout,
            Some(tls),
            async move {
                let _ = stopped.wait_for(|s| *s).await;
            },
        ))
    });
    listener::serve(
        listener,
        router,
        state.config.http.header_read_timeout,
        None,
        async move {
            crate::shared::signals::terminated().await;
            let _ = stop.send(true);
        },
    )
    .await;
    if let Some(internal) = internal {
        let _ = internal.await;
    }
    // The failed authentications counted since the last record are recorded too.
    if let Some(audit) = &state.audit {
        audit.flush_failures(true);
    }
    refresher.abort();
    sweeper.abort();
    tenant_status.abort();
    meter.abort();
    installs.abort();
    nodes.abort();
    lifetimes.abort();
    state.shutdown_platform().await;
    tracing::info!("sbx serve stopped");
    Ok(())
}
