//! Order statistics for the memory store's line: "how many are ahead of me" in O(log n).
//!
//! A Fenwick tree over join sequence numbers. Sequence numbers only grow, so the tree covers a
//! window `[base, base + capacity)` and is rebuilt from the live entries when a new number
//! falls outside it; the rebuild moves the window to the oldest live entry.

#[derive(Debug, Default)]
pub struct Ranks {
    base: u64,
    /// 1-indexed Fenwick tree; `tree[0]` is unused.
    tree: Vec<i64>,
}

const MIN_CAPACITY: usize = 1024;

impl Ranks {
    fn capacity(&self) -> u64 {
        self.tree.len().saturating_sub(1) as u64
    }

    fn add(&mut self, seq: u64, delta: i64) {
        let mut i = (seq - self.base + 1) as usize;
        while i < self.tree.len() {
            self.tree[i] += delta;
            i += i & i.wrapping_neg();
        }
    }

    /// Marks `seq` present; `live` lists every present sequence number (used on a rebuild).
    pub fn insert(&mut self, seq: u64, live: impl Iterator<Item = u64> + Clone) {
        if self.tree.is_empty() || seq < self.base || seq - self.base >= self.capacity() {
            let base = live.clone().next().unwrap_or(seq).min(seq);
            let span = (seq - base + 1) as usize;
            let cap = (span * 2).max(MIN_CAPACITY);
            self.base = base;
            self.tree = vec![0; cap + 1];
            for s in live {
                if s != seq {
                    self.add(s, 1);
                }
            }
        }
        self.add(seq, 1);
    }

    pub fn remove(&mut self, seq: u64) {
        if seq >= self.base && seq - self.base < self.capacity() {
            self.add(seq, -1);
        }
    }

    /// How many present entries have a sequence number at or below `seq`.
    pub fn rank(&self, seq: u64) -> u64 {
        if seq < self.base {
            return 0;
        }
        let mut i = ((seq - self.base + 1) as usize).min(self.tree.len().saturating_sub(1));
        let mut sum = 0i64;
        while i > 0 {
            sum += self.tree[i];
            i -= i & i.wrapping_neg();
        }
        sum.max(0) as u64
    }

    /// The sequence number at 0-based rank `k` (the `k`+1-th smallest present), in O(log n).
    pub fn select(&self, k: u64) -> Option<u64> {
        let n = self.tree.len().saturating_sub(1);
        let mut pos = 0usize;
        let mut left = i64::try_from(k).ok()? + 1;
        let mut step = n.checked_next_power_of_two().unwrap_or(0);
        if step > n {
            step /= 2;
        }
        while step > 0 {
            let next = pos + step;
            if next <= n && self.tree[next] < left {
                pos = next;
                left -= self.tree[next];
            }
            step /= 2;
        }
        // pos is the largest index whose prefix sum is below k + 1: the entry is the next one.
        (pos < n).then(|| self.base + pos as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn ranks_follow_inserts_removals_and_rebuilds() {
        let mut r = Ranks::default();
        let mut live = BTreeSet::new();
        for seq in 0..5000u64 {
            live.insert(seq);
            r.insert(seq, live.iter().copied());
            if seq % 3 == 0 {
                let first = *live.iter().next().unwrap();
                live.remove(&first);
                r.remove(first);
            }
            if seq % 7 == 0 && live.len() > 2 {
                let mid = *live.iter().nth(live.len() / 2).unwrap();
                live.remove(&mid);
                r.remove(mid);
            }
        }
        for (i, s) in live.iter().enumerate() {
            assert_eq!(r.rank(*s), i as u64 + 1);
            assert_eq!(r.select(i as u64), Some(*s));
        }
        assert_eq!(r.select(live.len() as u64), None);
    }
}
