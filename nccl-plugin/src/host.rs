//! The seam to `mrc-host` (issue 11): every transport call the plugin makes goes through this file, which
//! holds no transport logic of its own. The host layer owns progress, registered memory, peers, the
//! bootstrap and QP bring-up; what the plugin asks of it is in `/work/wt/notes/nccl-needs-from-host.md`.
//!
//! Stage 1: mrc-host has no published API yet, so [`Host::open`] reports that and the types a host would
//! hand out cannot be built (they hold [`Never`]). Everything above this file is written against these
//! signatures.

use std::sync::Arc;

use crate::config::Settings;
use crate::ffi::Error;
use crate::proto::{Done, Op};

/// A value that cannot exist: stands for the host objects until mrc-host is linked.
#[derive(Debug)]
pub(crate) enum Never {}

/// One host instance per process, shared by every NCCL communicator.
#[derive(Debug)]
pub(crate) struct Host(Never);

/// A registration: the keys work requests and peers name it by.
#[derive(Debug)]
pub(crate) struct Mr {
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    _host: Never,
}

/// Waits for connection requests.
#[derive(Debug)]
pub(crate) struct Listener(Never);

/// A connection being set up by `connect`.
#[derive(Debug)]
pub(crate) struct Connecting(Never);

/// A connected set of QPs toward one peer.
#[derive(Debug)]
pub(crate) struct Link(Never);

impl Host {
    /// Opens the host layer with the plugin's settings.
    pub(crate) fn open(_s: &Settings) -> Result<Arc<Self>, Error> {
        Err(Error::system(
            "this build has no transport yet: mrc-host (issue 11) is not linked into the plugin",
        ))
    }

    /// Starts listening; the blob (at most `handle::BLOB_MAX` bytes) tells a peer how to connect.
    pub(crate) fn listen(&self) -> Result<Listener, Error> {
        match self.0 {}
    }

    /// Starts connecting `qps` QPs to the listener described by `blob`, sending `app` with the request.
    pub(crate) fn connect(
        &self,
        _blob: &[u8],
        _qps: usize,
        _app: &[u8],
    ) -> Result<Connecting, Error> {
        match self.0 {}
    }

    /// Registers `len` bytes at `addr` of this process's memory; `remote_write` lets peers WRITE there.
    pub(crate) fn reg_mr(&self, _addr: u64, _len: usize, _remote_write: bool) -> Result<Mr, Error> {
        match self.0 {}
    }

    /// Drops a registration.
    pub(crate) fn dereg_mr(&self, mr: &Mr) {
        match mr._host {}
    }
}

impl Listener {
    /// What a connector needs to reach this listener.
    pub(crate) fn blob(&self) -> Vec<u8> {
        match self.0 {}
    }

    /// A connection request accepted, answered with `reply`: the link and the connector's app data.
    pub(crate) fn poll_accept(&mut self, _reply: &[u8]) -> Result<Option<(Link, Vec<u8>)>, Error> {
        match self.0 {}
    }
}

impl Connecting {
    /// The link and the listener's reply once the peer answered.
    pub(crate) fn poll(&mut self) -> Result<Option<(Link, Vec<u8>)>, Error> {
        match self.0 {}
    }
}

impl Link {
    /// QPs in this link.
    pub(crate) fn qps(&self) -> usize {
        match self.0 {}
    }

    /// Posts one work request; `Ok(false)` when the QP's queue is full (try again later).
    pub(crate) fn post(&self, _op: &Op) -> Result<bool, Error> {
        match self.0 {}
    }

    /// Appends the completions that arrived since the last call.
    pub(crate) fn poll(&self, _out: &mut Vec<Done>) -> Result<(), Error> {
        match self.0 {}
    }
}
