//! Wire types and value formats shared by the daemon and the CLI; imports neither side.
pub mod agent;
pub mod capabilities;
pub mod duration;
pub mod egress;
pub mod envelope;
pub mod exec_stream;
pub mod files;
pub mod image_ref;
pub mod io;
pub mod labels;
pub mod models;
pub mod names;
pub mod paths;
pub mod quantity;
pub mod signals;
pub mod tar_guard;
pub mod timestamp;
