//! Every label and annotation name sbx writes on or reads from cluster objects, in one place.

// Labels.
/// Label (and taint key) naming a namespace's or a node's tenant.
pub const TENANT_LABEL: &str = "sbx.io/tenant";
/// Label every sandbox Deployment (and its Pods) carries: the sandbox's name.
pub const SANDBOX_LABEL: &str = "sbx.io/sandbox";
/// Label marking objects sbx manages.
pub const MANAGED_LABEL: &str = "app.kubernetes.io/managed-by";
/// Label of an SbxdSandbox record: the node whose agent runs it (agents list theirs by it).
pub const NODE_LABEL: &str = "sbx.io/node";

// Annotations of sandbox Deployments and their Pods.
/// Annotation recording the backend.
pub const BACKEND_ANNOTATION: &str = "sbx.io/backend";
/// Annotation on a sandbox's Deployment: what it was created with (a [`super::sandboxes::SandboxTemplate`] as
/// JSON), so that its snapshots and forks can carry it on.
pub const TEMPLATE_ANNOTATION: &str = "sbx.io/template";
/// Annotation of a sandbox (its Deployment or SbxdSandbox record): when the leader deletes
/// it, unix seconds.
pub const EXPIRES_ANNOTATION: &str = "sbx.io/expires-at";
/// Annotation of a sandbox: seconds without activity before the leader pauses it.
pub const IDLE_ANNOTATION: &str = "sbx.io/idle-timeout-seconds";
/// Annotation of a sandbox: its last activity, unix seconds (written at most every few
/// seconds by the replica that saw it).
pub const ACTIVITY_ANNOTATION: &str = "sbx.io/last-activity";
/// Egress bandwidth limit of a Pod (the CNI bandwidth plugin).
pub const EGRESS_BANDWIDTH: &str = "kubernetes.io/egress-bandwidth";
/// Ingress bandwidth limit of a Pod.
pub const INGRESS_BANDWIDTH: &str = "kubernetes.io/ingress-bandwidth";
/// The well-known label of a Node's host name (placement on named nodes).
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

// Annotations of VolumeSnapshots: the snapshot's kind and what its sandbox was made of.
/// What created the snapshot (`pause`, `fork`, `named`).
pub const KIND: &str = "sbx.io/kind";
/// The sandbox it was taken from.
pub const SOURCE_SANDBOX: &str = "sbx.io/source-sandbox";
/// The source sandbox's image.
pub const SOURCE_IMAGE: &str = "sbx.io/source-image";
/// The source sandbox's backend.
pub const SOURCE_BACKEND: &str = "sbx.io/source-backend";
pub const SOURCE_CPU: &str = "sbx.io/source-cpu";
pub const SOURCE_MEMORY: &str = "sbx.io/source-memory";
pub const SOURCE_EPHEMERAL: &str = "sbx.io/source-ephemeral-storage";
pub const SOURCE_ROOT_DISK: &str = "sbx.io/source-root-disk-size";
pub const SOURCE_BEFORE_SCRIPT: &str = "sbx.io/source-before-script";
pub const SOURCE_ENTRYPOINT: &str = "sbx.io/source-entrypoint";
pub const SOURCE_CMD: &str = "sbx.io/source-cmd";
pub const SOURCE_EGRESS: &str = "sbx.io/source-egress";
pub const SOURCE_RUN_AS: &str = "sbx.io/source-run-as";
pub const SOURCE_FS_GROUPS: &str = "sbx.io/source-fs-groups";
pub const SOURCE_CAPABILITIES: &str = "sbx.io/source-capabilities";
pub const SOURCE_SIDECAR: &str = "sbx.io/source-sidecar";
pub const SOURCE_ENV: &str = "sbx.io/source-env";
pub const SOURCE_NODES: &str = "sbx.io/source-nodes";
