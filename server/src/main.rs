// Ingest allocates many small, short-lived values across threads; mimalloc handles
// that pattern with far less time in the allocator than the system one.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    treeline_server::cli::main()
}
