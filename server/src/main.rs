fn main() -> std::process::ExitCode {
    treeline_server::cli::main()
}
