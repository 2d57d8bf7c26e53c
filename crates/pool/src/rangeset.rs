//! A set of disjoint, non-adjacent byte ranges with merge on insert and split on
//! remove. Used for free space and for the persistent allocated map.
//!
//! Invariant: ranges are non-empty, sorted, disjoint and never touch (touching
//! ranges are merged), so the set has one canonical form.

use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeSet {
    /// start -> length
    map: BTreeMap<u64, u64>,
    total: u64,
}

impl RangeSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sum of range lengths.
    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.map.iter().map(|(s, l)| (*s, *l))
    }

    /// True if any byte of [start, start+len) is in the set.
    pub fn intersects(&self, start: u64, len: u64) -> bool {
        let end = start + len;
        if let Some((s, l)) = self.map.range(..end).next_back() {
            return s + l > start;
        }
        false
    }

    /// True if all of [start, start+len) is in the set.
    pub fn contains(&self, start: u64, len: u64) -> bool {
        match self.map.range(..=start).next_back() {
            Some((s, l)) => start + len <= s + l,
            None => false,
        }
    }

    /// Insert a range that must not intersect the set. Returns false (and changes
    /// nothing) if it does.
    pub fn insert(&mut self, start: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        if self.intersects(start, len) {
            return false;
        }
        let mut s = start;
        let mut l = len;
        if let Some((&ps, &pl)) = self.map.range(..start).next_back() {
            if ps + pl == start {
                self.map.remove(&ps);
                s = ps;
                l += pl;
            }
        }
        if let Some(&nl) = self.map.get(&(start + len)) {
            self.map.remove(&(start + len));
            l += nl;
        }
        self.map.insert(s, l);
        self.total += len;
        true
    }

    /// Remove a range that must be wholly in the set. Returns false (and changes
    /// nothing) if it is not.
    pub fn remove(&mut self, start: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        let (s, l) = match self.map.range(..=start).next_back() {
            Some((&s, &l)) if start + len <= s + l => (s, l),
            _ => return false,
        };
        self.map.remove(&s);
        if start > s {
            self.map.insert(s, start - s);
        }
        let end = start + len;
        if end < s + l {
            self.map.insert(end, s + l - end);
        }
        self.total -= len;
        true
    }

    /// First range of at least `len` bytes at or after `cursor` (wrapping to the
    /// start once). Returns its start.
    pub fn find_fit(&self, len: u64, cursor: u64, align: u64) -> Option<u64> {
        let fits = |s: u64, l: u64, from: u64| {
            let a = s.max(from).next_multiple_of(align);
            (a + len <= s + l).then_some(a)
        };
        if let Some((&s, &l)) = self.map.range(..cursor).next_back() {
            if let Some(a) = fits(s, l, cursor) {
                return Some(a);
            }
        }
        for (&s, &l) in self.map.range(cursor..) {
            if let Some(a) = fits(s, l, s) {
                return Some(a);
            }
        }
        for (&s, &l) in self.map.range(..cursor) {
            if let Some(a) = fits(s, l, s) {
                return Some(a);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_and_split() {
        let mut r = RangeSet::new();
        assert!(r.insert(0, 10));
        assert!(r.insert(20, 10));
        assert!(r.insert(10, 10));
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![(0, 30)]);
        assert!(!r.insert(5, 1));
        assert!(r.remove(5, 5));
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![(0, 5), (10, 20)]);
        assert!(!r.remove(4, 2));
        assert_eq!(r.total(), 25);
        assert_eq!(r.find_fit(10, 0, 1), Some(10));
        assert_eq!(r.find_fit(4, 12, 4), Some(12));
        assert_eq!(r.find_fit(30, 0, 1), None);
        assert!(r.contains(10, 20));
        assert!(!r.contains(4, 2));
    }
}
