//! Semaphore eventfds: how the C front ends make a descriptor readable once per event (completion channels,
//! the asynchronous-event fd, the threads' stop signals), so applications may poll it or make it non-blocking.
#![allow(unsafe_code, reason = "eventfd system calls")]

use std::ffi::c_int;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::boundary::Error;

/// A new semaphore eventfd (close-on-exec, with `flags` such as `EFD_NONBLOCK`).
pub fn new(flags: c_int) -> Result<OwnedFd, Error> {
    // SAFETY: plain syscall; the result is checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE | flags) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(Error::new(
            e.raw_os_error().unwrap_or(libc::EMFILE),
            format!("eventfd: {e}"),
        ));
    }
    // SAFETY: `fd` is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes the eventfd readable once more.
pub fn signal(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an eventfd we own; a full counter (2^64-2) cannot happen.
    let _ = unsafe { libc::write(fd.as_raw_fd(), (&raw const one).cast(), 8) };
}

/// Takes one signal without blocking (the fd must be non-blocking); `false` when there was none.
pub fn take(fd: c_int) -> bool {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64.
    unsafe { libc::read(fd, (&raw mut v).cast(), 8) == 8 }
}

/// Takes one signal, blocking unless the application made the fd non-blocking (then `EAGAIN`, not logged);
/// `what` names the descriptor in the error.
pub fn wait(fd: c_int, what: &str) -> Result<(), Error> {
    let mut v: u64 = 0;
    loop {
        // SAFETY: reads 8 bytes into a live u64.
        let n = unsafe { libc::read(fd, (&raw mut v).cast(), 8) };
        if n == 8 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        match e {
            libc::EINTR => continue,
            libc::EAGAIN => return Err(Error::quiet(libc::EAGAIN)),
            _ => return Err(Error::new(e, format!("reading {what} failed"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn one_read_per_signal() {
        let fd = new(libc::EFD_NONBLOCK).unwrap();
        assert!(!take(fd.as_raw_fd()));
        signal(&fd);
        signal(&fd);
        assert!(take(fd.as_raw_fd()));
        assert!(wait(fd.as_raw_fd(), "the test's fd").is_ok());
        let e = wait(fd.as_raw_fd(), "the test's fd").unwrap_err();
        assert_eq!(e.errno, libc::EAGAIN);
    }
}
