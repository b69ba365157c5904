//! Gives the shared library the SONAME it is installed under (`libmrc.so.1`, API major 1), so programs linked
//! against the installed `libmrc.so` look for `libmrc.so.1` at run time (install.sh creates both names).
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmrc.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
