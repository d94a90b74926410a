//! sbx: the sandbox management service — shared wire types, the API daemon and the CLI.
pub mod cli;
pub mod daemon;
pub mod shared;
