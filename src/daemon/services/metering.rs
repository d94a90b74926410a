//! Usage metering and the service's own metrics, exported on `/metrics` in the Prometheus
//! text format; showback (`GET /api/v1/usage`) reads them back from the metrics server that
//! scrapes them. The daemon keeps no usage database: it accrues counters (sandbox-seconds,
//! vCPU-seconds, GiB-seconds, egress bytes) and Prometheus stores them.
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
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

/// The usage counters of one sandbox series, in the order of [`SANDBOX_SERIES`].
type Amounts = [f64; 5];

/// The sandbox usage counters: the name under `sbx_usage_` and its help (as `/metrics`
/// prints it: a collector's help gets no added full stop).
const SANDBOX_SERIES: [(&str, &str); 5] = [
    ("sandbox_seconds", "Seconds each sandbox existed, by state."),
    ("vcpu_seconds", "vCPU-seconds reserved (CPU limit x time)."),
    (
        "memory_gib_seconds",
        "Memory GiB-seconds reserved (memory limit x time).",
    ),
    (
        "disk_gib_seconds",
        "Disk GiB-seconds reserved (ephemeral-storage limit x time).",
    ),
    ("egress_bytes", "Bytes sent out of each sandbox (its veth)."),
];

/// One exported counter series.
#[derive(Debug, Clone, Copy)]
struct Series<T> {
    total: T,
    /// Whether a scrape has seen the series. A counter must be seen at zero before it grows,
    /// or Prometheus's `increase()` takes its first value as the baseline and loses it: a new
    /// series is exported at zero until one scrape has read it.
    exposed: bool,
    /// When it was last accrued (a sandbox's series are dropped a while after it is gone).
    seen: Instant,
}

impl<T: Default + Copy> Series<T> {
    fn new(now: Instant) -> Series<T> {
        Series {
            total: T::default(),
            exposed: false,
            seen: now,
        }
    }

    /// What a scrape reads now (and from now on, the total).
    fn read(&mut self) -> T {
        let value = if self.exposed {
            self.total
        } else {
            T::default()
        };
        self.exposed = true;
        value
    }
}

/// Every usage series this replica exports. One map holds a sandbox's five counters (not one
/// map per counter), and it gives its memory back once the series of deleted sandboxes are
/// dropped: after 1,000 sandboxes came and went, the idle daemon does not keep tables sized
/// for them.
#[derive(Debug, Default)]
struct UsageSeries {
    sandboxes: HashMap<SandboxLabels, Series<Amounts>>,
    snapshots: HashMap<SnapshotLabels, Series<f64>>,
}

/// Encodes [`UsageSeries`] on each scrape, marking what it encoded as seen.
#[derive(Debug, Clone, Default)]
struct UsageCollector(Arc<StdMutex<UsageSeries>>);

impl UsageCollector {
    fn lock(&self) -> std::sync::MutexGuard<'_, UsageSeries> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Collector for UsageCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut usage = self.lock();
        let UsageSeries {
            sandboxes,
            snapshots,
        } = &mut *usage;
        let sandboxes: Vec<(&SandboxLabels, Amounts)> = sandboxes
            .iter_mut()
            .map(|(labels, series)| (labels, series.read()))
            .collect();
        for (i, (name, help)) in SANDBOX_SERIES.into_iter().enumerate() {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (labels, amounts) in &sandboxes {
                ConstCounter::new(amounts[i]).encode(family.encode_family(*labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "snapshot_gib_seconds",
            "Snapshot storage GiB-seconds per namespace.",
            None,
            MetricType::Counter,
        )?;
        for (labels, series) in snapshots.iter_mut() {
            ConstCounter::new(series.read()).encode(family.encode_family(labels)?)?;
        }
        Ok(())
    }
}

struct Accrual {
    at: Instant,
    /// Last egress counter per (namespace, sandbox), to turn it into increments.
    egress: HashMap<(String, String), u64>,
    /// Whether the last read of the usage failed (logged when it starts and stops failing).
    failing: bool,
}

/// The bytes a sandbox sent since the last accrual, from the counter sampled then (`before`)
/// and now, and the baseline for the next one. A counter that went down was reset (a new
/// network for the sandbox): all of it is new. Without a sample now (its node did not answer)
/// nothing is added and the last sample stays the baseline, so that the next one adds only
/// what is new.
fn egress_increment(before: Option<u64>, now: Option<u64>) -> (f64, Option<u64>) {
    match (before, now) {
        (_, None) => (0.0, before),
        (Some(b), Some(n)) if n >= b => ((n - b) as f64, Some(n)),
        (_, Some(n)) => (n as f64, Some(n)),
    }
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
    usage: UsageCollector,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram>,
    accrual: tokio::sync::Mutex<Accrual>,
    http: reqwest::Client,
    metrics_url: Option<String>,
}

impl Metering {
    /// A meter over the platform; `metrics_url` is `metering.metricsUrl`; `platform_series`
    /// adds the platform's own series.
    pub fn new(
        tenancy: Arc<dyn TenantStore>,
        tenants: Arc<TenantService>,
        metrics_url: Option<String>,
        platform_series: impl FnOnce(&mut Registry),
    ) -> Metering {
        let mut registry = Registry::with_prefix("sbx");
        platform_series(&mut registry);
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        let usage = UsageCollector::default();
        registry
            .sub_registry_with_prefix("usage")
            .register_collector(Box::new(usage.clone()));
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
            usage,
            requests,
            latency,
            accrual: tokio::sync::Mutex::new(Accrual {
                at: Instant::now(),
                egress: HashMap::new(),
                failing: false,
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
            self.drop_gone(now);
            return;
        }
        let metering = match self.tenancy.metering().await {
            Ok(metering) => {
                if std::mem::take(&mut accrual.failing) {
                    tracing::info!("usage is read again: metering goes on");
                }
                metering
            }
            Err(e) => {
                if !std::mem::replace(&mut accrual.failing, true) {
                    tracing::warn!(error = %e, "cannot read what the sandboxes hold: usage is not accrued until it can");
                }
                return;
            }
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
        let mut usage = self.usage.lock();
        for s in &metering.sandboxes {
            let labels = SandboxLabels {
                tenant: tenant_of(&s.namespace),
                namespace: s.namespace.clone(),
                backend: s.backend.clone(),
                state: s.state.clone(),
                sandbox: s.name.clone(),
            };
            let key = (s.namespace.clone(), s.name.clone());
            let (egress, baseline) =
                egress_increment(accrual.egress.get(&key).copied(), s.egress_bytes);
            if let Some(baseline) = baseline {
                egress_now.insert(key, baseline);
            }
            let amounts: Amounts = [
                dt,
                s.cpu_millis as f64 / 1000.0 * dt,
                s.memory_bytes as f64 / GIB * dt,
                s.disk_bytes as f64 / GIB * dt,
                egress,
            ];
            let series = usage
                .sandboxes
                .entry(labels)
                .or_insert_with(|| Series::new(now));
            for (total, amount) in series.total.iter_mut().zip(amounts) {
                *total += amount;
            }
            series.seen = now;
        }
        accrual.egress = egress_now;
        for ((namespace, backend), bytes) in &metering.snapshot_bytes {
            let labels = SnapshotLabels {
                tenant: tenant_of(namespace),
                namespace: namespace.clone(),
                backend: backend.clone(),
                state: "stored".to_string(),
            };
            let series = usage
                .snapshots
                .entry(labels)
                .or_insert_with(|| Series::new(now));
            series.total += *bytes as f64 / GIB * dt;
            series.seen = now;
        }
        drop(usage);
        self.drop_gone(now);
    }

    /// Series of sandboxes (or states) not accrued for a while stop being exported: gone, or
    /// this replica no longer leads. The maps shrink when far below their capacity.
    fn drop_gone(&self, now: Instant) {
        let mut usage = self.usage.lock();
        usage
            .sandboxes
            .retain(|_, series| now.duration_since(series.seen) <= KEEP_GONE);
        if usage.sandboxes.capacity() > 4 * usage.sandboxes.len().max(16) {
            usage.sandboxes.shrink_to_fit();
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

    /// The `/metrics` body: usage brought up to date, then every series (new ones at zero).
    pub async fn render(&self) -> String {
        self.accrue().await;
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "encoding metrics");
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(sandbox: &str) -> SandboxLabels {
        SandboxLabels {
            tenant: "acme".into(),
            namespace: "team-a".into(),
            backend: "local".into(),
            state: "running".into(),
            sandbox: sandbox.into(),
        }
    }

    fn scrape(registry: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
        out
    }

    #[test]
    fn egress_adds_what_is_new_across_a_missed_sample() {
        // First sample: all of it; then increments; a missed sample adds nothing and keeps the
        // baseline; a reset counter counts from zero.
        assert_eq!(egress_increment(None, Some(4096)), (4096.0, Some(4096)));
        assert_eq!(
            egress_increment(Some(4096), Some(5000)),
            (904.0, Some(5000))
        );
        assert_eq!(egress_increment(Some(5000), None), (0.0, Some(5000)));
        assert_eq!(
            egress_increment(Some(5000), Some(5100)),
            (100.0, Some(5100))
        );
        assert_eq!(egress_increment(Some(5100), Some(10)), (10.0, Some(10)));
        assert_eq!(egress_increment(None, None), (0.0, None));
    }

    #[test]
    fn usage_series_are_counters_first_seen_at_zero() {
        let usage = UsageCollector::default();
        let mut registry = Registry::with_prefix("sbx");
        registry
            .sub_registry_with_prefix("usage")
            .register_collector(Box::new(usage.clone()));
        let now = Instant::now();
        let mut series = Series::new(now);
        series.total = [10.0, 5.0, 2.5, 1.0, 4096.0];
        usage.lock().sandboxes.insert(labels("web"), series);
        let mut snapshot = Series::new(now);
        snapshot.total = 0.5;
        usage.lock().snapshots.insert(
            SnapshotLabels {
                tenant: "acme".into(),
                namespace: "team-a".into(),
                backend: "local".into(),
                state: "stored".into(),
            },
            snapshot,
        );

        let first = scrape(&registry);
        let second = scrape(&registry);
        let sel =
            r#"{tenant="acme",namespace="team-a",backend="local",state="running",sandbox="web"}"#;
        for (name, help) in SANDBOX_SERIES {
            assert!(
                first.contains(&format!("# HELP sbx_usage_{name} {help}\n")),
                "{first}"
            );
            assert!(
                first.contains(&format!("# TYPE sbx_usage_{name} counter\n")),
                "{first}"
            );
            assert!(
                first.contains(&format!("sbx_usage_{name}_total{sel} 0.0\n")),
                "{first}"
            );
        }
        assert!(
            second.contains(&format!("sbx_usage_sandbox_seconds_total{sel} 10.0\n")),
            "{second}"
        );
        assert!(
            second.contains(&format!("sbx_usage_egress_bytes_total{sel} 4096.0\n")),
            "{second}"
        );
        assert!(second.contains(
            r#"sbx_usage_snapshot_gib_seconds_total{tenant="acme",namespace="team-a",backend="local",state="stored"} 0.5"#
        ), "{second}");
    }
}
