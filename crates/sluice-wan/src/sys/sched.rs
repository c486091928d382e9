//! Scheduling class of the wire: `sched_setscheduler(2)`.

use std::io;

/// Moves the calling process to SCHED_FIFO at `priority` (1-99). The kernel's real-time
/// throttling (`/proc/sys/kernel/sched_rt_runtime_us`, 95% by default) still leaves other
/// tasks CPU if the wire is flooded.
pub fn set_fifo(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 is the caller; `param` is a live, initialised sched_param that the kernel
    // only reads during the call.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
