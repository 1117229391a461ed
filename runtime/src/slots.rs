//! Instance slots divided between plugins: each reserves a share, and its calls wait for one of its own.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// The runtime's instance slots and how many of them plugins have reserved.
#[derive(Debug)]
pub(super) struct SlotLedger {
    total: usize,
    reserved: Mutex<usize>,
}

/// Why a share was refused: only `left` of the `total` slots are not reserved by others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shortfall {
    pub left: usize,
    pub total: usize,
}

impl SlotLedger {
    pub(super) fn new(total: usize) -> Arc<Self> {
        Arc::new(SlotLedger {
            total,
            reserved: Mutex::new(0),
        })
    }

    /// A new share of `share` slots, if that many are left.
    pub(super) fn reserve(self: &Arc<Self>, share: usize) -> Result<CallSlots, Shortfall> {
        self.take(0, share)?;
        Ok(CallSlots {
            ledger: self.clone(),
            state: Mutex::new(ShareState {
                share,
                in_use: 0,
                reserved: share,
            }),
            freed: Condvar::new(),
        })
    }

    /// Slots reserved by nobody.
    pub(super) fn left(&self) -> usize {
        self.total - *lock(&self.reserved)
    }

    /// Replaces a reservation of `old` slots by one of `new`.
    fn take(&self, old: usize, new: usize) -> Result<(), Shortfall> {
        let mut reserved = lock(&self.reserved);
        let left = self.total - (*reserved - old);
        if new > left {
            return Err(Shortfall {
                left,
                total: self.total,
            });
        }
        *reserved = *reserved - old + new;
        Ok(())
    }
}

/// One plugin's share: at most `share` of its calls hold an instance at once, the others
/// wait. Shared by all clones and both tiers of a loaded plugin; dropping the last returns
/// the share to the ledger.
#[derive(Debug)]
pub(super) struct CallSlots {
    ledger: Arc<SlotLedger>,
    state: Mutex<ShareState>,
    freed: Condvar,
}

#[derive(Debug)]
struct ShareState {
    share: usize,
    in_use: usize,
    /// What this share holds in the ledger: `max(share, in_use)`, so that shrinking a share
    /// returns the slots of calls still running only when they end.
    reserved: usize,
}

impl ShareState {
    fn settle(&mut self, ledger: &SlotLedger) {
        let needed = self.share.max(self.in_use);
        if needed < self.reserved {
            let _ = ledger.take(self.reserved, needed); // shrinking always fits
            self.reserved = needed;
        }
    }
}

impl CallSlots {
    pub(super) fn share(&self) -> usize {
        lock(&self.state).share
    }

    /// Makes the share `share` slots; refused (the share unchanged) if more are asked
    /// than the ledger has left.
    pub(super) fn resize(&self, share: usize) -> Result<(), Shortfall> {
        let mut state = lock(&self.state);
        let needed = share.max(state.in_use);
        if needed > state.reserved {
            self.ledger.take(state.reserved, needed)?;
            state.reserved = needed;
        }
        state.share = share;
        state.settle(&self.ledger);
        self.freed.notify_all();
        Ok(())
    }

    /// Waits until one of the share's slots is free, and holds it until the guard drops.
    pub(super) fn acquire(&self) -> SlotGuard<'_> {
        let mut state = lock(&self.state);
        while state.in_use >= state.share {
            state = self.freed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.in_use += 1;
        SlotGuard { slots: self }
    }
}

impl Drop for CallSlots {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = self.ledger.take(state.reserved, 0);
    }
}

/// A held slot of a [`CallSlots`] share.
#[derive(Debug)]
pub(super) struct SlotGuard<'a> {
    slots: &'a CallSlots,
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        let mut state = lock(&self.slots.state);
        state.in_use -= 1;
        state.settle(&self.slots.ledger);
        self.slots.freed.notify_one();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn shares_are_refused_past_the_total_and_returned_on_drop() {
        let ledger = SlotLedger::new(5);
        let first = ledger.reserve(3).unwrap();
        assert_eq!(
            ledger.reserve(3).unwrap_err(),
            Shortfall { left: 2, total: 5 }
        );
        let second = ledger.reserve(2).unwrap();
        assert_eq!(ledger.left(), 0);
        drop(first);
        assert_eq!(ledger.left(), 3);
        assert_eq!(
            second.resize(6).unwrap_err(),
            Shortfall { left: 5, total: 5 }
        );
        second.resize(5).unwrap();
        assert_eq!(ledger.left(), 0);
    }

    #[test]
    fn a_shrunk_share_returns_busy_slots_only_when_their_calls_end() {
        let ledger = SlotLedger::new(4);
        let slots = ledger.reserve(3).unwrap();
        let (a, b) = (slots.acquire(), slots.acquire());
        slots.resize(1).unwrap();
        assert_eq!(ledger.left(), 2, "two calls still hold their instances");
        drop(a);
        assert_eq!(ledger.left(), 3);
        drop(b);
        assert_eq!(ledger.left(), 3);
    }

    #[test]
    fn calls_past_the_share_wait_for_a_slot() {
        let ledger = SlotLedger::new(1);
        let slots = Arc::new(ledger.reserve(1).unwrap());
        let held = slots.acquire();
        let waiter = {
            let slots = slots.clone();
            std::thread::spawn(move || drop(slots.acquire()))
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "the second call waits");
        drop(held);
        waiter.join().unwrap();
    }
}
