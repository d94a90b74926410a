//! Wire types and value formats shared by the daemon and the CLI; imports neither side.
pub mod duration;
pub mod envelope;
pub mod models;
pub mod names;
pub mod paths;
pub mod quantity;
pub mod shell;
pub mod timestamp;
