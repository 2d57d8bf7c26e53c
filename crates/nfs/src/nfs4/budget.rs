//! The memory of the NFSv4.1 reply cache (RFC 8881 section 2.10.6.1): every
//! slot of every session may hold one cached COMPOUND reply of up to the
//! session's ca_maxresponsesize_cached bytes, so a session costs
//! slots x that size. CREATE_SESSION reserves this from one server-wide
//! budget and gets fewer slots when the budget runs low, as knfsd does with
//! its DRC memory: a few clients asking for many slots cannot grow the server
//! past the budget, and a new client still gets a session with fewer slots.
//!
//! Invariants:
//! - The bytes reserved by live sessions never exceed the budget: a
//!   reservation is taken whole or not at all, under one lock.
//! - A reservation is returned exactly once, when its session is dropped (the
//!   last `Arc` of it: a COMPOUND still running on a destroyed session keeps
//!   its slot's memory until it finishes).

use parking_lot::Mutex;
use std::sync::Arc;

/// The server-wide budget of reply cache bytes.
pub struct Budget {
    left: Mutex<usize>,
    pub total: usize,
}

/// Bytes reserved for one session's slots; given back on drop.
pub struct Reservation {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Budget {
    pub fn new(total: usize) -> Arc<Budget> {
        Arc::new(Budget {
            left: Mutex::new(total),
            total,
        })
    }

    /// Reserve `per_slot` bytes for each of up to `want` slots: the most
    /// slots that fit (at least one), or None when not even one fits.
    pub fn reserve(self: &Arc<Self>, per_slot: usize, want: u32) -> Option<(Reservation, u32)> {
        let mut left = self.left.lock();
        let fit = (*left / per_slot.max(1)).min(want as usize) as u32;
        if fit == 0 {
            return None;
        }
        let bytes = fit as usize * per_slot;
        *left -= bytes;
        Some((
            Reservation {
                budget: self.clone(),
                bytes,
            },
            fit,
        ))
    }

    /// Bytes not reserved (tests and invariant checks).
    pub fn left(&self) -> usize {
        *self.left.lock()
    }
}

impl Reservation {
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        *self.budget.left.lock() += self.bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_fit_the_budget_and_come_back() {
        let b = Budget::new(10 * 4096);
        let (r1, n1) = b.reserve(4096, 8).unwrap();
        assert_eq!((n1, r1.bytes()), (8, 8 * 4096));
        let (r2, n2) = b.reserve(4096, 8).unwrap();
        assert_eq!(n2, 2, "fewer slots when the budget runs low");
        assert!(b.reserve(4096, 1).is_none(), "nothing left");
        drop(r1);
        assert_eq!(b.left(), 8 * 4096);
        drop(r2);
        assert_eq!(b.left(), b.total);
    }
}
