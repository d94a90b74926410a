//! The `sbx` binary: daemon, CLI and node agent in one. Everything lives in the library.

/// jemalloc, not glibc's malloc, for Rust and C (SQLite) alike: after a burst of work (1,000
/// sandboxes created and deleted) glibc keeps its per-thread arenas fragmented and the idle
/// daemon 1.8–2.1× its fresh size; jemalloc with one arena, no thread caches and immediate
/// page return stays far closer (docs/performance.md, "Memory after churn").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read when it starts.
#[allow(non_upper_case_globals)]
#[unsafe(export_name = "malloc_conf")]
pub static malloc_conf: &[u8] = b"narenas:1,tcache:false,dirty_decay_ms:0,muzzy_decay_ms:0\0";

fn main() -> std::process::ExitCode {
    sbx::cli::main()
}
