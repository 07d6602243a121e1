pub mod compare;
pub mod compare_runs;
pub mod run_detail;
pub mod runs;
pub mod traces;
