//! Benchmarks of the `mrc` engine live in `benches/benches/`; this library is empty.
