//! What `stack_third_party.rs` starts: the third-party proxies (`procs`), the in-test servers
//! and closed-loop load (`servers`), and the capacity-limited dependency and open-loop load
//! (`load`).

pub(crate) mod load;
pub(crate) mod procs;
pub(crate) mod servers;
