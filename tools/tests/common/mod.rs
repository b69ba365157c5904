//! Helpers shared by the integration tests that touch network namespaces.

use std::fs::File;
use std::os::fd::AsRawFd;

/// Namespaces, nft and tc need root.
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `f` on a helper thread that has entered namespace `ns`; sockets it opens stay in that namespace.
pub(crate) fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let h = File::open(format!("/run/netns/{ns}")).expect("open netns");
    std::thread::spawn(move || {
        // SAFETY: setns(2) on a descriptor owned by `h`, alive for the call; it moves only this helper thread.
        let r = unsafe { libc::setns(h.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("netns thread")
}
