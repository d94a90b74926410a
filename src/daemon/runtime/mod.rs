//! sbxd, the local sandbox runtime: OCI bundles run by a runc-compatible CLI over overlayfs,
//! with cgroup limits, a network namespace per sandbox and a per-sandbox shim for stdio/logs.
pub mod images;
pub mod network;
