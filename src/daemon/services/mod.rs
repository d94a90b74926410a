//! The service layer: validation and policy over the platform seam, independent of HTTP
//! details and of which platform runs underneath.
pub mod admission;
pub mod bindings;
pub mod files;
pub mod images;
pub mod install;
pub mod keys;
pub mod lifetimes;
pub mod metering;
pub mod process;
pub mod quotas;
pub mod sandboxes;
pub mod snapshots;
pub mod tenant_policy;
pub mod tenants;
