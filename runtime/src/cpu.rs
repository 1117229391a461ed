//! CPU-time deadlines: what a call has used of its budget, read on the thread that runs it.
//!
//! The epoch ticker only says that wall-clock time passed; a call on a loaded machine (or on
//! a demoted, `SCHED_IDLE` thread) may have had a fraction of that as CPU. So each time the
//! epoch deadline is reached the call's thread reads its own CPU clock: a call that has not
//! used its budget runs on, and only one that has is stopped. A wall-clock bound
//! [`WALL_CLOCK_ALLOWANCE`] times the budget still stops a call the host starves of CPU, so
//! it cannot hold its instance slot and worker forever.

use std::time::{Duration, Instant};

/// How many times its CPU deadline a call may take in wall-clock time before it is stopped
/// as stalled (the host too busy to run it), whatever CPU it has used.
pub const WALL_CLOCK_ALLOWANCE: u32 = 10;

/// CPU time the calling thread has used since it started.
#[allow(unsafe_code)]
pub fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to write, and the clock exists on every
    // platform the host supports.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// A call's CPU budget, started on the thread that runs the call (the epoch callback runs on
/// that thread too, so it reads the same clock).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuDeadline {
    limit: Duration,
    cpu_at_start: Duration,
    wall_at_start: Instant,
}

/// What a [`CpuDeadline::check`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The call may use this much more CPU.
    Left(Duration),
    /// The call used its whole budget.
    Spent,
    /// The call ran past the wall-clock bound with only `cpu_used` of CPU.
    Stalled { cpu_used: Duration },
}

impl CpuDeadline {
    /// A budget of `limit` of CPU time from now, for the calling thread.
    pub(crate) fn start(limit: Duration) -> Self {
        CpuDeadline {
            limit,
            cpu_at_start: thread_cpu_time(),
            wall_at_start: Instant::now(),
        }
    }

    /// Where the call stands; must run on the thread that called [`CpuDeadline::start`].
    pub(crate) fn check(&self) -> Verdict {
        let cpu_used = self.cpu_used();
        if cpu_used >= self.limit {
            Verdict::Spent
        } else if self.wall_at_start.elapsed() >= self.wall_clock_bound() {
            Verdict::Stalled { cpu_used }
        } else {
            Verdict::Left(self.limit - cpu_used)
        }
    }

    /// The CPU time used since the start; must run on the thread that started it.
    pub(crate) fn cpu_used(&self) -> Duration {
        thread_cpu_time().saturating_sub(self.cpu_at_start)
    }

    /// The most wall-clock time the call may take.
    pub(crate) fn wall_clock_bound(&self) -> Duration {
        self.limit * WALL_CLOCK_ALLOWANCE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin_for_cpu(amount: Duration) {
        let start = thread_cpu_time();
        while thread_cpu_time() - start < amount {
            std::hint::black_box(0u64);
        }
    }

    #[test]
    fn sleeping_uses_no_budget_and_spinning_does() {
        let deadline = CpuDeadline::start(Duration::from_millis(40));
        std::thread::sleep(Duration::from_millis(60));
        assert!(
            matches!(deadline.check(), Verdict::Left(left) if left > Duration::from_millis(30)),
            "{:?}",
            deadline.check()
        );
        spin_for_cpu(Duration::from_millis(40));
        assert_eq!(deadline.check(), Verdict::Spent);
    }

    #[test]
    fn a_call_past_the_wall_clock_bound_is_stalled() {
        let deadline = CpuDeadline::start(Duration::from_millis(5));
        std::thread::sleep(deadline.wall_clock_bound());
        assert!(
            matches!(deadline.check(), Verdict::Stalled { cpu_used } if cpu_used < Duration::from_millis(5)),
            "{:?}",
            deadline.check()
        );
    }
}
