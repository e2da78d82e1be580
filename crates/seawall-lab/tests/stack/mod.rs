//! What `stack_third_party.rs` starts: the third-party proxies (`procs`) and the in-test
//! servers and load (`servers`).

pub(crate) mod procs;
pub(crate) mod servers;
