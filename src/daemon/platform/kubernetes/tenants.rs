//! The Kubernetes platform's tenancy seam: Tenant objects, namespaces labelled by tenant, Node
//! labels and taints for dedications, quota Leases, usage read from the API server.
use async_trait::async_trait;

use super::*;
use crate::daemon::platform::{TenantStore, Usage};

#[async_trait]
impl TenantStore for KubernetesPlatform {
    fn namespace_refused(&self, namespace: &str, for_tenant: bool) -> Option<String> {
        super::namespaces::refused(namespace, for_tenant)
    }

    /// The daemon's RBAC reaches only the namespaces it bound itself in; production mode
    /// binds it only in tenants' namespaces.
    fn tenant_namespaces_only(&self) -> bool {
        true
    }

    async fn tenant_exists(&self, name: &str) -> PlatformResult<bool> {
        Ok(self
            .tenants()
            .get_opt(name)
            .await
            .map_err(|e| kube_error(&format!("tenant {name}"), e))?
            .is_some())
    }

    async fn list_tenants(&self) -> PlatformResult<Vec<StoredTenant>> {
        let list = self
            .tenants()
            .list(&ListParams::default())
            .await
            .map_err(|e| kube_error("list tenants", e))?;
        let mut tenants: Vec<StoredTenant> = list
            .items
            .iter()
            .map(objects::tenants::record)
            .collect::<PlatformResult<_>>()?;
        tenants.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(tenants)
    }

    async fn insert_tenant(&self, tenant: &StoredTenant) -> PlatformResult<()> {
        self.tenants()
            .create(&PostParams::default(), &objects::tenants::object(tenant))
            .await
            .map_err(
                |e| match kube_error(&format!("tenant {}", tenant.name), e) {
                    PlatformError::AlreadyExists(_) => PlatformError::AlreadyExists(format!(
                        "tenant '{}' already exists",
                        tenant.name
                    )),
                    other => other,
                },
            )?;
        self.claim_namespaces(tenant).await?;
        self.backstop_quota(tenant).await
    }

    /// The new spec; namespaces it gains are labelled, namespaces it gives up lose the label
    /// and the backstop quota.
    async fn update_tenant(&self, tenant: &StoredTenant) -> PlatformResult<()> {
        let mut before: Vec<String> = Vec::new();
        replace_with_retry(
            &self.tenants(),
            &tenant.name,
            &format!("tenant '{}'", tenant.name),
            |object| {
                before = object.spec.0.namespaces.clone();
                object.spec = objects::tenants::TenantObjectSpec(tenant.spec.clone());
                object.metadata.labels =
                    Some(tenant.labels.clone()).filter(|labels| !labels.is_empty());
            },
        )
        .await?;
        let given_up: Vec<String> = before
            .into_iter()
            .filter(|ns| !tenant.spec.namespaces.contains(ns))
            .collect();
        self.drop_backstop_quotas(&given_up).await?;
        self.release_namespaces(&tenant.name, &given_up).await?;
        self.claim_namespaces(tenant).await?;
        self.backstop_quota(tenant).await
    }

    /// The Tenant object, then its backstop ResourceQuota and its label on its namespaces
    /// (the namespaces themselves and what else is in them stay).
    async fn delete_tenant(&self, name: &str) -> PlatformResult<()> {
        let not_found = |e| match kube_error(&format!("tenant {name}"), e) {
            PlatformError::NotFound(_) => {
                PlatformError::NotFound(format!("tenant '{name}' not found"))
            }
            other => other,
        };
        let object = self.tenants().get(name).await.map_err(not_found)?;
        self.tenants()
            .delete(name, &Default::default())
            .await
            .map_err(not_found)?;
        let namespaces = &object.spec.0.namespaces;
        self.drop_backstop_quotas(namespaces).await?;
        self.release_namespaces(name, namespaces).await
    }

    /// The status subresource, by merge patch: the spec (and so the generation) is untouched.
    async fn write_tenant_status(&self, name: &str, status: &TenantStatus) -> PlatformResult<()> {
        let patch = serde_json::json!({ "status": status });
        match self
            .tenants()
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(kube_error(&format!("the status of tenant {name}"), e)),
        }
    }

    async fn node_names(&self) -> PlatformResult<Vec<String>> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let list = nodes
            .list(&ListParams::default())
            .await
            .map_err(|e| kube_error("list nodes", e))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect())
    }

    async fn node_storage(&self) -> PlatformResult<NodeStorage> {
        let nodes = self.node_names().await?;
        self.agents.storage(&self.client, nodes).await
    }

    async fn node_dedications(&self) -> PlatformResult<BTreeMap<String, String>> {
        if let Some(cached) = self.dedications.get_fresh(DEDICATIONS_TTL) {
            return Ok(cached);
        }
        let ticket = self.dedications.ticket();
        let nodes: Api<Node> = Api::all(self.client.clone());
        let list = nodes
            .list(&ListParams::default().labels(TENANT_LABEL))
            .await
            .map_err(|e| kube_error("list nodes", e))?;
        let dedications: BTreeMap<String, String> = list
            .items
            .into_iter()
            .filter_map(|n| {
                let tenant = n.metadata.labels.as_ref()?.get(TENANT_LABEL)?.clone();
                Some((n.metadata.name?, tenant))
            })
            .collect();
        self.dedications.install(ticket, dedications.clone());
        Ok(dedications)
    }

    async fn set_node_dedication(&self, node: &str, tenant: Option<&str>) -> PlatformResult<()> {
        let api: Api<Node> = Api::all(self.client.clone());
        let written = replace_with_retry(&api, node, &format!("node '{node}'"), |object| {
            let labels = object.metadata.labels.get_or_insert_with(Default::default);
            match tenant {
                Some(t) => {
                    labels.insert(TENANT_LABEL.into(), t.into());
                }
                None => {
                    labels.remove(TENANT_LABEL);
                }
            }
            let spec = object.spec.get_or_insert_with(Default::default);
            let taints = spec.taints.get_or_insert_with(Vec::new);
            taints.retain(|t| t.key != TENANT_LABEL);
            if let Some(t) = tenant {
                taints.push(Taint {
                    key: TENANT_LABEL.into(),
                    value: Some(t.into()),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                });
            }
        })
        .await;
        // After the write, so that no list begun before it can be reused.
        self.dedications.invalidate();
        written
    }

    /// Every sandbox's size and state, the bytes its Pod sent (from its node's kubelet), and
    /// what the snapshots of each namespace hold by their source's backend.
    async fn metering(&self) -> PlatformResult<Metering> {
        let mut out = Metering::default();
        let deployments = self.sandbox_deployments(None).await?;
        let pods = self.sandbox_pods(None, None).await?;
        let nodes: std::collections::BTreeSet<String> = pods
            .values()
            .flatten()
            .filter_map(|p| p.status.as_ref()?.host_ip.clone())
            .collect();
        let sent = self
            .kubelets
            .tx_bytes(&nodes.into_iter().collect::<Vec<_>>())
            .await;
        // The state alone of each sandbox (not its whole record: 10,000 every 5 s at scale).
        for d in &deployments {
            let key = (
                d.metadata.namespace.clone().unwrap_or_default(),
                d.metadata.name.clone().unwrap_or_default(),
            );
            let own = pods.get(&key).map(Vec::as_slice).unwrap_or_default();
            let view =
                objects::sandboxes::pod_view(&own.iter().map(|p| p.as_ref()).collect::<Vec<_>>());
            let (state, _, _) = objects::sandboxes::state(d, &view);
            let egress_bytes = own
                .iter()
                .filter_map(|p| {
                    let name = p.metadata.name.clone()?;
                    sent.get(&(key.0.clone(), name)).copied()
                })
                .reduce(|a, b| a + b);
            let size = objects::sandboxes::size(d);
            out.sandboxes.push(MeterSample {
                namespace: key.0,
                name: key.1,
                backend: objects::sandboxes::backend_of(d),
                state: state.to_string().to_ascii_lowercase(),
                cpu_millis: size.cpu_millis,
                memory_bytes: size.memory_bytes,
                disk_bytes: size.disk_bytes,
                egress_bytes,
            });
        }
        for r in self.sbxd_records(None).await? {
            let size = objects::sbxd::size(&r);
            let record = Self::sbxd_sandbox(&r);
            out.sandboxes.push(MeterSample {
                namespace: record.namespace,
                name: record.name,
                backend: record.backend,
                state: record.status.to_string().to_ascii_lowercase(),
                cpu_millis: size.cpu_millis,
                memory_bytes: size.memory_bytes,
                disk_bytes: size.disk_bytes,
                egress_bytes: None,
            });
        }
        for r in self.sbxd_snapshots(None).await? {
            let namespace = r.metadata.namespace.clone().unwrap_or_default();
            *out.snapshot_bytes
                .entry((namespace, SBXD_BACKEND.to_string()))
                .or_default() += u64::try_from(r.spec.size_bytes).unwrap_or(0);
        }
        for s in self.cached_snapshot_objects().await? {
            if objects::snapshots::kind_of(&s).is_none() {
                continue;
            }
            let namespace = s.metadata.namespace.clone().unwrap_or_default();
            let backend = objects::snapshots::source_backend(&s);
            *out.snapshot_bytes.entry((namespace, backend)).or_default() +=
                objects::snapshots::restore_size(&s);
        }
        Ok(out)
    }

    async fn reservation(&self, namespaces: &[String]) -> PlatformResult<Reservation> {
        Ok(self.read_reservation(namespaces).await?.0)
    }

    async fn reservation_seen(&self, namespaces: &[String]) -> PlatformResult<Reservation> {
        match self.cached_total(namespaces) {
            Some(total) => Ok(total),
            None => self.reservation(namespaces).await,
        }
    }

    /// From the watch caches when the tenant's Lease says how far they must be to hold every
    /// write made under it (`writes`), and they get there within [`CATCH_UP`]; else read from
    /// the API server. The basis passed on is what the read covered (see [`Revisions`]).
    async fn reservation_under(
        &self,
        writes: Option<&str>,
        namespaces: &[String],
    ) -> PlatformResult<Usage> {
        if let Some(held) = self.cached_reservation(writes, namespaces).await {
            return Ok(Usage {
                held,
                exact: false,
                basis: writes.map(str::to_string),
            });
        }
        let (held, covered) = self.read_reservation(namespaces).await?;
        Ok(Usage {
            held,
            exact: true,
            basis: Some(covered.to_string()),
        })
    }

    async fn sandbox_size(&self, namespace: &str, name: &str) -> PlatformResult<Reservation> {
        if let Some(record) = self.sbxd_record(namespace, name).await? {
            return Ok(objects::sbxd::size(&record));
        }
        Ok(objects::sandboxes::size(
            &*self.sandbox_deployment(namespace, name).await?,
        ))
    }

    async fn snapshot_size(&self, namespace: &str, name: &str) -> PlatformResult<Reservation> {
        if let Some(record) = self.sbxd_snapshot(namespace, name).await? {
            let source = self
                .sbxd_snapshot_source(namespace, name, &record.spec.node)
                .await?;
            return Ok(Reservation {
                sandboxes: 1,
                cpu_millis: source.cpu_millis.unwrap_or(0),
                memory_bytes: source.memory_bytes.unwrap_or(0),
                disk_bytes: source.ephemeral_bytes.unwrap_or(0),
                root_disk_bytes: 0,
                snapshot_bytes: 0,
            });
        }
        let t = self.snapshot_template(namespace, name).await?;
        let root = t.root_disk_bytes.unwrap_or(0);
        Ok(Reservation {
            sandboxes: 1,
            cpu_millis: t.cpu_millis.unwrap_or(0),
            memory_bytes: t.memory_bytes.unwrap_or(0),
            disk_bytes: t.ephemeral_bytes.unwrap_or(0) + root,
            root_disk_bytes: root,
            snapshot_bytes: 0,
        })
    }

    /// The tenant's quota Lease; on release it records what its check covered and this
    /// replica's writes since (see [`Revisions`]), unless one of those did not show in its
    /// caches in time.
    async fn lock_tenant(&self, tenant: &str, pass: bool) -> PlatformResult<HeldLock> {
        let marks = self.quota_marks();
        let misses: u64 = marks.iter().map(cache::Mark::misses).sum();
        let stamp: lease::Stamp = Box::new(move |basis| {
            let now: u64 = marks.iter().map(cache::Mark::misses).sum();
            let Revisions(basis) = basis.parse().ok()?;
            let written = marks.each_ref().map(cache::Mark::written);
            (now == misses)
                .then(|| Revisions(std::array::from_fn(|i| basis[i].max(written[i]))).to_string())
        });
        lease::lock_tenant(
            &self.client,
            &self.leases,
            tenant,
            self.identity.clone(),
            stamp,
            pass,
        )
        .await
    }

    fn tenant_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.tenant_changes.receiver())
    }

    fn is_leader(&self) -> bool {
        self.leader.leading()
    }
}

/// How long a quota check waits for the watch caches to reach the writes its Lease records
/// before it reads the API server instead.
const CATCH_UP: std::time::Duration = std::time::Duration::from_secs(1);

/// What sandboxes and snapshots of one namespace reserve.
fn reserved(
    deployments: &[Arc<Deployment>],
    records: &[Arc<objects::sbxd::SbxdSandboxObject>],
    sbxd_snapshots: &[Arc<objects::sbxd::SbxdSnapshotObject>],
    snapshots: &[Arc<DynamicObject>],
) -> Reservation {
    let mut total = Reservation::default();
    for d in deployments {
        total += objects::sandboxes::size(d);
    }
    for r in records {
        total += objects::sbxd::size(r);
    }
    for r in sbxd_snapshots {
        total.snapshot_bytes += u64::try_from(r.spec.size_bytes).unwrap_or(0);
    }
    for s in snapshots {
        if objects::snapshots::kind_of(s).is_some() {
            total.snapshot_bytes += objects::snapshots::restore_size(s);
        }
    }
    total
}

/// Revisions (etcd's, from resourceVersions) of the four kinds a quota check reads, in a
/// quota Lease's [`lease::WRITES_ANNOTATION`]: sandbox Deployments, sbxd sandbox records,
/// sbxd snapshot records, VolumeSnapshots. A holder records, per kind, the highest of what
/// its check covered (the record it found, or the objects it listed) and of the writes this
/// replica made and saw in its caches (a create's answer, a write it waited for); so the
/// record covers every write made under the Lease, through every holder. The next holder's
/// caches hold them all once each has applied an object of that revision or later (a watch
/// delivers its kind's events in order) — usually at once: it waits neither for the other
/// replicas' nor the controllers' writes (a Deployment's status) made since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Revisions([u64; 4]);

const REVISION_NAMES: [&str; 4] = ["deployments", "sbxd", "sbxdSnapshots", "volumeSnapshots"];

impl std::fmt::Display for Revisions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = REVISION_NAMES
            .iter()
            .zip(self.0)
            .map(|(name, revision)| format!("{name}={revision}"))
            .collect();
        f.write_str(&parts.join(","))
    }
}

impl std::str::FromStr for Revisions {
    type Err = ();

    fn from_str(text: &str) -> Result<Revisions, ()> {
        let mut out = [0u64; 4];
        let parts: Vec<&str> = text.split(',').collect();
        if parts.len() != out.len() {
            return Err(());
        }
        for ((part, name), slot) in parts.iter().zip(REVISION_NAMES).zip(out.iter_mut()) {
            let (key, value) = part.split_once('=').ok_or(())?;
            if key != name {
                return Err(());
            }
            *slot = value.parse().map_err(|_| ())?;
        }
        Ok(Revisions(out))
    }
}

/// The highest resourceVersion among `objects` (0 for none).
fn newest<K: kube::Resource>(objects: &[Arc<K>]) -> u64 {
    objects
        .iter()
        .filter_map(|o| o.meta().resource_version.as_deref()?.parse().ok())
        .max()
        .unwrap_or(0)
}

impl KubernetesPlatform {
    /// What `namespaces` hold, read from the API server (the four lists of every namespace
    /// at once: this runs under the tenant's Lease, and every create of the tenant waits for
    /// it), and the newest object of each kind the lists held.
    async fn read_reservation(
        &self,
        namespaces: &[String],
    ) -> PlatformResult<(Reservation, Revisions)> {
        let reads = namespaces.iter().map(|ns| async move {
            futures_util::try_join!(
                self.read_sandbox_deployments(Some(ns)),
                self.read_sbxd_records(Some(ns)),
                self.read_sbxd_snapshots(Some(ns)),
                self.read_snapshot_objects(Some(ns)),
            )
        });
        let mut total = Reservation::default();
        let mut covered = [0u64; 4];
        for (deployments, records, sbxd_snapshots, snapshots) in
            futures_util::future::try_join_all(reads).await?
        {
            total += reserved(&deployments, &records, &sbxd_snapshots, &snapshots);
            let newest = [
                newest(&deployments),
                newest(&records),
                newest(&sbxd_snapshots),
                newest(&snapshots),
            ];
            for (c, n) in covered.iter_mut().zip(newest) {
                *c = (*c).max(n);
            }
        }
        Ok((total, Revisions(covered)))
    }

    /// This replica's writes in the four caches of a quota check, in [`Revisions`]' order.
    fn quota_marks(&self) -> [cache::Mark; 4] {
        [
            self.deployment_cache.mark(),
            self.sbxd_cache.mark(),
            self.sbxd_snapshot_cache.mark(),
            self.snapshot_cache.mark(),
        ]
    }

    /// What `namespaces` hold, from the watch caches, if the tenant's Lease recorded how far
    /// they must be (`writes`) and they get there in time; `None`: read the API server.
    async fn cached_reservation(
        &self,
        writes: Option<&str>,
        namespaces: &[String],
    ) -> Option<Reservation> {
        let Revisions(wanted) = writes?.parse().ok()?;
        let (deployments, sbxd, sbxd_snapshots, snapshots) = tokio::join!(
            self.deployment_cache.reached(wanted[0], CATCH_UP),
            self.sbxd_cache.reached(wanted[1], CATCH_UP),
            self.sbxd_snapshot_cache.reached(wanted[2], CATCH_UP),
            self.snapshot_cache.reached(wanted[3], CATCH_UP),
        );
        if !(deployments && sbxd && sbxd_snapshots && snapshots) {
            tracing::debug!(
                ?writes,
                "the watch caches did not reach a quota Lease's writes in time: reading the API server"
            );
            return None;
        }
        self.cached_total(namespaces)
    }

    /// What `namespaces` hold in the watch caches (`None` while one is not in step).
    fn cached_total(&self, namespaces: &[String]) -> Option<Reservation> {
        let mut total = Reservation::default();
        for ns in namespaces {
            total += reserved(
                &self.deployment_cache.list(Some(ns))?,
                &self.sbxd_cache.list(Some(ns))?,
                &self.sbxd_snapshot_cache.list(Some(ns))?,
                &self.snapshot_cache.list(Some(ns))?,
            );
        }
        Some(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_read_back_what_they_wrote_and_nothing_else() {
        let r = Revisions([12, 0, 7, 40]);
        let text = r.to_string();
        assert_eq!(
            text,
            "deployments=12,sbxd=0,sbxdSnapshots=7,volumeSnapshots=40"
        );
        assert_eq!(text.parse::<Revisions>(), Ok(r));
        for bad in [
            "",
            "deployments=12,sbxd=0,sbxdSnapshots=7",
            "sbxd=0,deployments=12,sbxdSnapshots=7,volumeSnapshots=40",
            "deployments=x,sbxd=0,sbxdSnapshots=7,volumeSnapshots=40",
        ] {
            assert!(bad.parse::<Revisions>().is_err(), "{bad}");
        }
    }
}
