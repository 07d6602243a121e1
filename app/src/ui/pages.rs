pub mod runs;
