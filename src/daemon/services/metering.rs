//! Usage metering and the service's own metrics, exported on `/metrics` in the Prometheus
//! text format; showback (`GET /api/v1/usage`) reads them back from the metrics server that
//! scrapes them. The daemon keeps no usage database: it accrues counters (sandbox-seconds,
//! vCPU-seconds, GiB-seconds, egress bytes) and Prometheus stores them.
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::platform::TenantStore;
use crate::daemon::services::tenants::TenantService;
use crate::shared::envelope::ErrorCode;
use crate::shared::models::usage::{GroupKey, UsageRow};

/// The configuration key naming the metrics server.
pub const METRICS_URL_KEY: &str = "metering.metricsUrl";
/// How often usage is accrued between scrapes.
pub const ACCRUE_EVERY: Duration = Duration::from_secs(5);
/// How long the series of a sandbox that is gone stay exported (so that a scrape sees
/// its last increments).
const KEEP_GONE: Duration = Duration::from_secs(300);
const GIB: f64 = (1u64 << 30) as f64;

/// Labels of a sandbox's usage series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SandboxLabels {
    tenant: String,
    namespace: String,
    backend: String,
    state: String,
    sandbox: String,
}

/// Labels of a namespace's snapshot storage series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SnapshotLabels {
    tenant: String,
    namespace: String,
    backend: String,
    state: String,
}

/// Labels of the HTTP request metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    method: String,
    route: String,
    status: String,
}

/// Labels of the HTTP latency histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    method: String,
    route: String,
}

type FloatCounter = Counter<f64, AtomicU64>;

/// Amounts accrued for a series not yet exported at zero (see [`Metering::accrue`]).
#[derive(Debug, Clone, Copy, Default)]
struct Held {
    seconds: f64,
    vcpu: f64,
    memory: f64,
    disk: f64,
    egress: f64,
}

struct Accrual {
    at: Instant,
    /// Series a scrape has seen (at zero, at least): their increments go straight in.
    exposed: std::collections::HashSet<SandboxLabels>,
    /// Increments of series no scrape has seen yet.
    held: HashMap<SandboxLabels, Held>,
    exposed_snapshots: std::collections::HashSet<SnapshotLabels>,
    held_snapshots: HashMap<SnapshotLabels, f64>,
    /// Last egress counter per (namespace, sandbox), to turn it into increments.
    egress: HashMap<(String, String), u64>,
    /// When each sandbox's series were last accrued (to drop them once it is gone).
    seen: HashMap<SandboxLabels, Instant>,
}

/// The usage names exported, and the row field each feeds.
pub const USAGE_SERIES: [&str; 6] = [
    "sandbox_seconds",
    "vcpu_seconds",
    "memory_gib_seconds",
    "egress_bytes",
    "disk_gib_seconds",
    "snapshot_gib_seconds",
];

/// The metering service.
pub struct Metering {
    tenancy: Arc<dyn TenantStore>,
    tenants: Arc<TenantService>,
    registry: Registry,
    sandbox_seconds: Family<SandboxLabels, FloatCounter>,
    vcpu_seconds: Family<SandboxLabels, FloatCounter>,
    memory_gib_seconds: Family<SandboxLabels, FloatCounter>,
    disk_gib_seconds: Family<SandboxLabels, FloatCounter>,
    egress_bytes: Family<SandboxLabels, FloatCounter>,
    snapshot_gib_seconds: Family<SnapshotLabels, FloatCounter>,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram>,
    accrual: tokio::sync::Mutex<Accrual>,
    http: reqwest::Client,
    metrics_url: Option<String>,
}

impl Metering {
    /// A meter over the platform; `metrics_url` is `metering.metricsUrl`.
    pub fn new(
        tenancy: Arc<dyn TenantStore>,
        tenants: Arc<TenantService>,
        metrics_url: Option<String>,
    ) -> Metering {
        let mut registry = Registry::with_prefix("sbx");
        let sandbox_seconds = Family::<SandboxLabels, FloatCounter>::default();
        let vcpu_seconds = Family::<SandboxLabels, FloatCounter>::default();
        let memory_gib_seconds = Family::<SandboxLabels, FloatCounter>::default();
        let disk_gib_seconds = Family::<SandboxLabels, FloatCounter>::default();
        let egress_bytes = Family::<SandboxLabels, FloatCounter>::default();
        let snapshot_gib_seconds = Family::<SnapshotLabels, FloatCounter>::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        let usage = registry.sub_registry_with_prefix("usage");
        usage.register(
            "sandbox_seconds",
            "Seconds each sandbox existed, by state",
            sandbox_seconds.clone(),
        );
        usage.register(
            "vcpu_seconds",
            "vCPU-seconds reserved (CPU limit x time)",
            vcpu_seconds.clone(),
        );
        usage.register(
            "memory_gib_seconds",
            "Memory GiB-seconds reserved (memory limit x time)",
            memory_gib_seconds.clone(),
        );
        usage.register(
            "disk_gib_seconds",
            "Disk GiB-seconds reserved (ephemeral-storage limit x time)",
            disk_gib_seconds.clone(),
        );
        usage.register(
            "egress_bytes",
            "Bytes sent out of each sandbox (its veth)",
            egress_bytes.clone(),
        );
        usage.register(
            "snapshot_gib_seconds",
            "Snapshot storage GiB-seconds per namespace",
            snapshot_gib_seconds.clone(),
        );
        let http = registry.sub_registry_with_prefix("http");
        http.register(
            "requests",
            "API requests by route and status",
            requests.clone(),
        );
        http.register(
            "request_duration_seconds",
            "API request latency by route",
            latency.clone(),
        );
        Metering {
            tenancy,
            tenants,
            registry,
            sandbox_seconds,
            vcpu_seconds,
            memory_gib_seconds,
            disk_gib_seconds,
            egress_bytes,
            snapshot_gib_seconds,
            requests,
            latency,
            accrual: tokio::sync::Mutex::new(Accrual {
                at: Instant::now(),
                exposed: Default::default(),
                held: HashMap::new(),
                exposed_snapshots: Default::default(),
                held_snapshots: HashMap::new(),
                egress: HashMap::new(),
                seen: HashMap::new(),
            }),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(20))
                .build()
                .unwrap_or_default(),
            metrics_url,
        }
    }

    /// Records one API request.
    pub fn observe_request(&self, method: &str, route: &str, status: u16, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                method: method.to_string(),
                route: route.to_string(),
                status: status.to_string(),
            })
            .inc();
        self.latency
            .get_or_create(&RouteLabels {
                method: method.to_string(),
                route: route.to_string(),
            })
            .observe(seconds);
    }

    /// Adds what every sandbox and snapshot held since the last accrual. Only the leader
    /// replica accrues (the usage query sums the series of every replica): a follower's
    /// clock restarts at each accrual, so a replica that becomes the leader counts from then.
    pub async fn accrue(&self) {
        let mut accrual = self.accrual.lock().await;
        let now = Instant::now();
        let dt = now.duration_since(accrual.at).as_secs_f64();
        accrual.at = now;
        if !self.tenancy.is_leader() {
            self.drop_gone(&mut accrual, now);
            return;
        }
        let Ok(metering) = self.tenancy.metering().await else {
            return;
        };
        let owners: BTreeMap<String, String> = self
            .tenants
            .all()
            .await
            .unwrap_or_default()
            .into_iter()
            .flat_map(|t| {
                let name = t.name.clone();
                t.spec
                    .namespaces
                    .into_iter()
                    .map(move |ns| (ns, name.clone()))
            })
            .collect();
        let tenant_of = |ns: &str| owners.get(ns).cloned().unwrap_or_default();
        let mut egress_now = HashMap::new();
        for s in &metering.sandboxes {
            let labels = SandboxLabels {
                tenant: tenant_of(&s.namespace),
                namespace: s.namespace.clone(),
                backend: s.backend.clone(),
                state: s.state.clone(),
                sandbox: s.name.clone(),
            };
            let key = (s.namespace.clone(), s.name.clone());
            let mut egress = 0.0;
            if let Some(bytes) = s.egress_bytes {
                let before = accrual.egress.get(&key).copied().unwrap_or(0);
                // A counter that went down was reset (a new network for the sandbox).
                egress = if bytes >= before {
                    bytes - before
                } else {
                    bytes
                } as f64;
                egress_now.insert(key, bytes);
            }
            let mut amounts = Held {
                seconds: dt,
                vcpu: s.cpu_millis as f64 / 1000.0 * dt,
                memory: s.memory_bytes as f64 / GIB * dt,
                disk: s.disk_bytes as f64 / GIB * dt,
                egress,
            };
            // A counter must be seen at zero before it grows, or Prometheus's increase()
            // takes its first value as the baseline and loses it: a new series is exported
            // at zero and its increments are held until a scrape has seen it.
            let counters = [
                &self.sandbox_seconds,
                &self.vcpu_seconds,
                &self.memory_gib_seconds,
                &self.disk_gib_seconds,
                &self.egress_bytes,
            ];
            if !accrual.exposed.contains(&labels) {
                for family in counters {
                    let _ = family.get_or_create(&labels);
                }
                let held = accrual.held.entry(labels.clone()).or_default();
                held.seconds += amounts.seconds;
                held.vcpu += amounts.vcpu;
                held.memory += amounts.memory;
                held.disk += amounts.disk;
                held.egress += amounts.egress;
            } else {
                if let Some(held) = accrual.held.remove(&labels) {
                    amounts.seconds += held.seconds;
                    amounts.vcpu += held.vcpu;
                    amounts.memory += held.memory;
                    amounts.disk += held.disk;
                    amounts.egress += held.egress;
                }
                let values = [
                    amounts.seconds,
                    amounts.vcpu,
                    amounts.memory,
                    amounts.disk,
                    amounts.egress,
                ];
                for (family, value) in counters.into_iter().zip(values) {
                    family.get_or_create(&labels).inc_by(value);
                }
            }
            accrual.seen.insert(labels, now);
        }
        accrual.egress = egress_now;
        for ((namespace, backend), bytes) in &metering.snapshot_bytes {
            let labels = SnapshotLabels {
                tenant: tenant_of(namespace),
                namespace: namespace.clone(),
                backend: backend.clone(),
                state: "stored".to_string(),
            };
            let amount = *bytes as f64 / GIB * dt;
            let counter = self.snapshot_gib_seconds.get_or_create(&labels);
            if accrual.exposed_snapshots.contains(&labels) {
                let held = accrual.held_snapshots.remove(&labels).unwrap_or(0.0);
                counter.inc_by(amount + held);
            } else {
                *accrual.held_snapshots.entry(labels).or_default() += amount;
            }
        }
        self.drop_gone(&mut accrual, now);
    }

    /// Series of sandboxes (or states) not accrued for a while stop being exported: gone, or
    /// this replica no longer leads.
    fn drop_gone(&self, accrual: &mut Accrual, now: Instant) {
        let gone: Vec<SandboxLabels> = accrual
            .seen
            .iter()
            .filter(|(_, at)| now.duration_since(**at) > KEEP_GONE)
            .map(|(l, _)| l.clone())
            .collect();
        for labels in gone {
            accrual.seen.remove(&labels);
            accrual.exposed.remove(&labels);
            accrual.held.remove(&labels);
            for family in [
                &self.sandbox_seconds,
                &self.vcpu_seconds,
                &self.memory_gib_seconds,
                &self.disk_gib_seconds,
                &self.egress_bytes,
            ] {
                family.remove(&labels);
            }
        }
    }

    /// Accrues every [`ACCRUE_EVERY`].
    pub async fn accrue_loop(self: Arc<Self>) {
        let mut tick = tokio::time::interval(ACCRUE_EVERY);
        loop {
            tick.tick().await;
            self.accrue().await;
        }
    }

    /// The `/metrics` body: usage brought up to date, then every series.
    pub async fn render(&self) -> String {
        self.accrue().await;
        let mut accrual = self.accrual.lock().await;
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "encoding metrics");
        }
        // Every series in this answer has now been seen (new ones at zero).
        let seen: Vec<SandboxLabels> = accrual.seen.keys().cloned().collect();
        accrual.exposed.extend(seen);
        let snapshots: Vec<SnapshotLabels> = accrual.held_snapshots.keys().cloned().collect();
        accrual.exposed_snapshots.extend(snapshots);
        out
    }

    /// Usage over `[from, to]` for `tenant` (all when `None`), grouped by `group`: each
    /// series' increase over the window, read from the metrics server.
    pub async fn usage(
        &self,
        from: i64,
        to: i64,
        tenant: Option<&str>,
        group: &[GroupKey],
    ) -> ServiceResult<Vec<UsageRow>> {
        let Some(base) = &self.metrics_url else {
            return Err(ServiceError::bad_request(format!(
                "usage showback is not configured: set {} to the metrics server's URL",
                METRICS_URL_KEY
            )));
        };
        // Nothing is used before 1970 or after now: the window shrinks to what can hold usage
        // (and stays within the durations the metrics server takes).
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let (from, to) = (from.max(0), to.min(now));
        if from > to {
            return Ok(Vec::new());
        }
        let window = (to - from).max(1);
        let by: Vec<&str> = group.iter().map(|g| g.as_str()).collect();
        let selector = match tenant {
            Some(t) => format!("{{tenant=\"{}\"}}", t.replace(['"', '\\'], "")),
            None => String::new(),
        };
        let mut rows: BTreeMap<Vec<String>, UsageRow> = BTreeMap::new();
        for series in USAGE_SERIES {
            let query = format!(
                "sum by ({}) (increase(sbx_usage_{series}_total{selector}[{window}s] @ {to}))",
                by.join(",")
            );
            let url = format!("{}/api/v1/query", base.trim_end_matches('/'));
            let unavailable = |e: String| {
                ServiceError::new(
                    ErrorCode::MetricsUnavailable,
                    format!("the metrics server at {base} is unavailable: {e}"),
                )
            };
            let response = self
                .http
                .get(&url)
                .query(&[("query", query.as_str()), ("time", &to.to_string())])
                .send()
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            let status = response.status();
            let body: serde_json::Value = response
                .json()
                .await
                .map_err(|e| unavailable(format!("HTTP {status}: {e}")))?;
            if body["status"] != "success" {
                return Err(unavailable(format!(
                    "query failed: {}",
                    body["error"].as_str().unwrap_or("no reason given")
                )));
            }
            for result in body["data"]["result"].as_array().into_iter().flatten() {
                let key: Vec<String> = by
                    .iter()
                    .map(|k| {
                        result["metric"][*k]
                            .as_str()
                            .unwrap_or_default()
                            .to_string()
                    })
                    .collect();
                let value: f64 = result["value"][1]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0.0);
                let row = rows.entry(key.clone()).or_insert_with(|| {
                    let mut row = UsageRow::default();
                    for (k, v) in group.iter().zip(&key) {
                        let v = Some(v.clone());
                        match k {
                            GroupKey::Tenant => row.tenant = v,
                            GroupKey::Namespace => row.namespace = v,
                            GroupKey::Backend => row.backend = v,
                            GroupKey::State => row.state = v,
                        }
                    }
                    row
                });
                match series {
                    "sandbox_seconds" => row.sandbox_seconds += value,
                    "vcpu_seconds" => row.vcpu_seconds += value,
                    "memory_gib_seconds" => row.memory_gib_seconds += value,
                    "egress_bytes" => row.egress_bytes += value,
                    "disk_gib_seconds" => row.disk_gib_seconds += value,
                    _ => row.snapshot_gib_seconds += value,
                }
            }
        }
        Ok(rows.into_values().collect())
    }
}
