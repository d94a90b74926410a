//! sbx: the sandbox management service — shared wire types, the API daemon, the CLI, sbxd (the
//! local sandbox runtime) and the per-node agent (docs/architecture.md has the rooms).
pub mod agent;
pub mod cli;
pub mod daemon;
pub mod runtime;
pub mod shared;
