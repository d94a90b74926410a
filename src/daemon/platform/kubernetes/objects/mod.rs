//! Pure mappers between sbx's records and the cluster's objects — Deployments, Pods, PVCs,
//! Secrets, NetworkPolicies (`sandboxes`, `network`) and VolumeSnapshots (`snapshots`) — with
//! the labels and annotations they carry. No API calls here: what is written and read is built
//! and parsed here, and tested without a cluster.
mod kept;
pub mod names;
pub mod network;
pub mod sandboxes;
pub mod sbxd;
pub mod snapshots;
pub mod tenants;
