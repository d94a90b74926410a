//! sbx: the sandbox management service — shared wire types, the API daemon, the CLI and sbxd,
//! the local sandbox runtime (docs/architecture.md has the rooms).
pub mod cli;
pub mod daemon;
pub mod runtime;
pub mod shared;
