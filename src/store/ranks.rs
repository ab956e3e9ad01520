//! Order statistics for the memory store's line: "how many are ahead of me" in O(log n).
//!
//! The line's keys are sparse: arrival numbers, and with a drawn pre-queue the registrants'
//! draw keys, spread over 2^40 values above them (`src/event/draw.rs`). So the keys are kept
//! sorted in blocks of at most [`BLOCK`] with a Fenwick tree over the blocks' sizes: a rank is
//! a prefix sum of whole blocks plus a search in one. The common case, arrivals at the end and
//! admissions at the front, touches only the last and the first block.

#[derive(Debug, Default)]
pub struct Ranks {
    /// Sorted, non-empty blocks in key order.
    blocks: Vec<Vec<u64>>,
    /// 1-indexed Fenwick tree of the blocks' sizes; `tree[0]` is unused.
    tree: Vec<i64>,
    len: u64,
}

/// Most keys in one block: a search in it and a shift of its tail stay cheap.
const BLOCK: usize = 512;

impl Ranks {
    fn rebuild(&mut self) {
        let n = self.blocks.len();
        self.tree = vec![0; n + 1];
        for (i, b) in self.blocks.iter().enumerate() {
            let mut j = i + 1;
            while j <= n {
                self.tree[j] += b.len() as i64;
                j += j & j.wrapping_neg();
            }
        }
    }

    fn add(&mut self, block: usize, delta: i64) {
        let mut j = block + 1;
        while j < self.tree.len() {
            self.tree[j] += delta;
            j += j & j.wrapping_neg();
        }
    }

    /// Keys in blocks before `block`.
    fn before(&self, block: usize) -> u64 {
        let mut j = block.min(self.tree.len().saturating_sub(1));
        let mut sum = 0i64;
        while j > 0 {
            sum += self.tree[j];
            j -= j & j.wrapping_neg();
        }
        sum.max(0) as u64
    }

    /// The block `key` is in or would go in: the last whose first key is at or below it.
    fn block_of(&self, key: u64) -> usize {
        self.blocks
            .partition_point(|b| b.first().is_some_and(|&f| f <= key))
            .saturating_sub(1)
    }

    /// Marks `key` present (a key already present is left as it is).
    pub fn insert(&mut self, key: u64) {
        if self.blocks.is_empty() {
            self.blocks.push(vec![key]);
            self.len = 1;
            self.rebuild();
            return;
        }
        let b = self.block_of(key);
        let block = &mut self.blocks[b];
        let Err(at) = block.binary_search(&key) else {
            return;
        };
        block.insert(at, key);
        self.len += 1;
        if block.len() > 2 * BLOCK {
            let tail = block.split_off(BLOCK);
            self.blocks.insert(b + 1, tail);
            self.rebuild();
        } else {
            self.add(b, 1);
        }
    }

    pub fn remove(&mut self, key: u64) {
        if self.blocks.is_empty() {
            return;
        }
        let b = self.block_of(key);
        let block = &mut self.blocks[b];
        let Ok(at) = block.binary_search(&key) else {
            return;
        };
        block.remove(at);
        self.len -= 1;
        if block.is_empty() {
            self.blocks.remove(b);
            self.rebuild();
        } else {
            self.add(b, -1);
        }
    }

    /// How many present keys are at or below `key`.
    pub fn rank(&self, key: u64) -> u64 {
        if self.blocks.is_empty() || self.blocks[0][0] > key {
            return 0;
        }
        let b = self.block_of(key);
        self.before(b) + self.blocks[b].partition_point(|&k| k <= key) as u64
    }

    /// The key at 0-based rank `k` (the `k`+1-th smallest present), in O(log n).
    pub fn select(&self, k: u64) -> Option<u64> {
        if k >= self.len {
            return None;
        }
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
        // Block `pos` (0-based) holds it, `left` - 1 keys into it.
        self.blocks
            .get(pos)?
            .get(usize::try_from(left - 1).ok()?)
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn ranks_follow_inserts_and_removals() {
        let mut r = Ranks::default();
        let mut live = BTreeSet::new();
        for seq in 0..5000u64 {
            live.insert(seq);
            r.insert(seq);
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
        assert_eq!(r.len, live.len() as u64);
    }

    proptest! {
        /// Any mix of sparse keys (a FIFO line, a drawn block 2^40 wide above it, arrivals
        /// after it) ranks as a sorted set does.
        #[test]
        fn sparse_keys_rank_as_a_sorted_set_does(
            ops in prop::collection::vec((0u8..4, 0u64..3000, 0u64..(1 << 40)), 1..3000)
        ) {
            let mut r = Ranks::default();
            let mut live = BTreeSet::new();
            for (op, small, big) in ops {
                let key = match op {
                    0 => small,
                    1 => 1_000_000 + big,
                    2 => (1 << 41) + small,
                    _ => {
                        if let Some(&k) = live.iter().nth(small as usize % live.len().max(1)) {
                            live.remove(&k);
                            r.remove(k);
                        }
                        continue;
                    }
                };
                live.insert(key);
                r.insert(key);
            }
            prop_assert_eq!(r.len, live.len() as u64);
            for (i, k) in live.iter().enumerate() {
                prop_assert_eq!(r.rank(*k), i as u64 + 1);
                prop_assert_eq!(r.select(i as u64), Some(*k));
                if *k > 0 {
                    prop_assert_eq!(r.rank(k - 1), i as u64, "keys below {}", k);
                }
            }
        }
    }
}
