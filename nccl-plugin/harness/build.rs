//! NCCL's logger is a C variadic function, which stable Rust cannot define: a few lines of C format the
//! message and hand it to the harness.
fn main() {
    println!("cargo:rerun-if-changed=c/logger.c");
    cc::Build::new()
        .file("c/logger.c")
        .warnings(true)
        .compile("mrc_harness_logger");
}
