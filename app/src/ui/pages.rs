pub mod compare;
pub mod run_detail;
pub mod runs;
pub mod traces;
