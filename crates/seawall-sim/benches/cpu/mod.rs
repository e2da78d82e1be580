//! The calling thread's CPU time, for benches timed on a shared machine.
//!
//! Wall time on a loaded two-core box samples whatever else runs at that moment: a 0.1 s run and
//! a 20 s run (seawall-sim against SimPy) see different moments, and their ratio wanders by 2×.
//! The CPU time a thread was given is much less sensitive to the load (it still includes cache
//! and frequency effects, but not the time spent waiting for a core), so `benches/run.sh`
//! compares CPU time with CPU time: `time.thread_time()` on the Python side.

/// Seconds of CPU time this thread has used (`CLOCK_THREAD_CPUTIME_ID`); on other systems, wall
/// seconds since the first call, so the benches still run there.
pub(crate) fn thread_cpu_s() -> f64 {
    #[cfg(target_os = "linux")]
    {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
    }
    #[cfg(not(target_os = "linux"))]
    {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64()
    }
}
