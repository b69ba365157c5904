//! What MRC's C front ends share. Each front end is a shared library inside someone else's process (the verbs
//! shim under `LD_PRELOAD`, libmrc under a program written to the OCP headers), so none installs a global
//! logger: each has its own [`log::Log`], named by its prefix and its environment variable. Each runs every
//! entry point inside a [`boundary::Boundary`] (panics and errors become its C convention) and checks the
//! pointers C callers hand back against its own [`registry::Registry`]. The verbs front ends (the shim, libmrc)
//! share one copy of the libibverbs ABI types, [`verbs_abi`], and the addressing rules for `ibv_qp_attr`
//! values, [`verbs_attr`].

pub mod boundary;
pub mod eventfd;
pub mod log;
pub mod registry;
pub mod verbs_abi;
pub mod verbs_attr;
