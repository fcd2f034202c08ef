//! The merge of a partitioned table's ordered scans into one ordered stream.
//!
//! Every partition is its own physical table: each one's record keys come in clustered-key
//! order (and each one's index entries in the index's order), and an `ORDER BY` the key over
//! the whole table is the k-way merge of them. Record keys are `t{physical id}_r{handle}`,
//! index keys `t{physical id}_i{index id}{datums}`; the bytes after that prefix compare the
//! same way in every partition (memcomparable), except that an `UNSIGNED` integer handle is
//! stored as the signed number with the same bits, so its top bit is flipped to compare by
//! value.
//!
//! Pure: pages go in ([`Merge::push_page`], [`Merge::finish`]), pairs come out in order
//! ([`Merge::pop`]), and the merge says which partition's next page it waits for.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// Bytes of a record key before the handle: `t`, the 8-byte table id and `_r`.
pub const RECORD_PREFIX_LEN: usize = 11;
/// Bytes of an index key before the datums: a record prefix and the 8-byte index id.
pub const INDEX_PREFIX_LEN: usize = 19;

/// A stored pair: raw key and value.
pub type Pair = (bytes::Bytes, bytes::Bytes);

/// What [`Merge::pop`] gives.
#[derive(Debug, PartialEq, Eq)]
pub enum Pop {
    /// The next pair in order.
    Pair(Pair),
    /// The next pair cannot be known before this input's next page (or its end) is in.
    Need(usize),
    /// Every input is finished and drained.
    Done,
}

/// How handles compare.
#[derive(Debug, Clone, Copy)]
struct KeyOrder {
    desc: bool,
    unsigned: bool,
    /// Bytes of the keys' prefix (table and index ids), skipped.
    prefix: usize,
}

impl KeyOrder {
    fn cmp(self, a: &[u8], b: &[u8]) -> Ordering {
        let (a, b) = (suffix(a, self.prefix), suffix(b, self.prefix));
        let o = if self.unsigned && !a.is_empty() && !b.is_empty() {
            (a[0] ^ 0x80, &a[1..]).cmp(&(b[0] ^ 0x80, &b[1..]))
        } else {
            a.cmp(b)
        };
        if self.desc {
            o.reverse()
        } else {
            o
        }
    }
}

/// What follows a key's `prefix` bytes.
fn suffix(k: &[u8], prefix: usize) -> &[u8] {
    k.get(prefix..).unwrap_or(k)
}

/// The smallest pending pair of one input.
struct Head {
    pair: Pair,
    input: usize,
    order: KeyOrder,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Head {
    /// The heap pops its greatest: the first pair in the merge's order.
    fn cmp(&self, other: &Self) -> Ordering {
        self.order
            .cmp(&other.pair.0, &self.pair.0)
            .then(other.input.cmp(&self.input))
    }
}

/// The k-way merge of ordered inputs.
pub struct Merge {
    order: KeyOrder,
    heads: BinaryHeap<Head>,
    /// Each input's pairs after its head.
    queued: Vec<VecDeque<Pair>>,
    /// Inputs whose last page is in.
    finished: Vec<bool>,
    /// Inputs with neither a head nor a finished mark: their next page is awaited.
    waiting: Vec<usize>,
}

impl Merge {
    /// A merge of `inputs` streams of keys with a `prefix` of that many bytes, each in
    /// ascending (or, `desc`, descending) order of what follows; `unsigned`: an integer handle
    /// compared as unsigned.
    pub fn new(inputs: usize, desc: bool, unsigned: bool, prefix: usize) -> Self {
        Merge {
            order: KeyOrder {
                desc,
                unsigned,
                prefix,
            },
            heads: BinaryHeap::with_capacity(inputs),
            queued: (0..inputs).map(|_| VecDeque::new()).collect(),
            finished: vec![false; inputs],
            waiting: (0..inputs).rev().collect(),
        }
    }

    /// The next page of input `i` (empty pages are allowed).
    pub fn push_page(&mut self, i: usize, pairs: Vec<Pair>) {
        self.queued[i].extend(pairs);
        self.refill(i);
    }

    /// Input `i` has no more pages.
    pub fn finish(&mut self, i: usize) {
        self.finished[i] = true;
        self.waiting.retain(|&w| w != i);
    }

    fn refill(&mut self, i: usize) {
        if let Some(pair) = self.queued[i].pop_front() {
            self.waiting.retain(|&w| w != i);
            self.heads.push(Head {
                pair,
                input: i,
                order: self.order,
            });
        } else if !self.finished[i] && !self.waiting.contains(&i) {
            self.waiting.push(i);
        }
    }

    /// The next pair, or what the merge waits for.
    pub fn pop(&mut self) -> Pop {
        // An input without a head might hold the smallest pair: its page comes first.
        if let Some(&i) = self.waiting.last() {
            return Pop::Need(i);
        }
        match self.heads.pop() {
            None => Pop::Done,
            Some(h) => {
                self.refill(h.input);
                Pop::Pair(h.pair)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tidb::key::{encode_record_key, Handle};

    fn key(table: i64, h: i64) -> Vec<u8> {
        let mut k = Vec::new();
        encode_record_key(&mut k, table, &Handle::Int(h));
        k
    }

    /// Feeds the merge pages of `parts` (each a list of pages of handles) as it asks, and
    /// returns the handles in the order it gives them.
    fn run(parts: &[Vec<Vec<i64>>], desc: bool, unsigned: bool) -> Vec<i64> {
        let mut next_page = vec![0usize; parts.len()];
        let mut m = Merge::new(parts.len(), desc, unsigned, RECORD_PREFIX_LEN);
        let mut out = Vec::new();
        loop {
            match m.pop() {
                Pop::Pair((k, _)) => {
                    let (_, h) = crate::tidb::key::decode_record_key(&k).expect("key");
                    let Handle::Int(h) = h else {
                        panic!("int handle")
                    };
                    out.push(h);
                }
                Pop::Need(i) => match parts[i].get(next_page[i]) {
                    Some(page) => {
                        next_page[i] += 1;
                        let table = 100 + i as i64;
                        let pairs = page
                            .iter()
                            .map(|&h| (key(table, h).into(), Default::default()));
                        m.push_page(i, pairs.collect());
                    }
                    None => m.finish(i),
                },
                Pop::Done => return out,
            }
        }
    }

    #[test]
    fn partitions_merge_into_key_order_across_page_boundaries() {
        let parts = vec![
            vec![vec![1, 4], vec![], vec![9, 12]],
            vec![vec![2, 3, 5, 6, 7]],
            vec![],
            vec![vec![8], vec![10, 11]],
        ];
        assert_eq!(run(&parts, false, false), (1..=12).collect::<Vec<_>>());
        let rev: Vec<Vec<Vec<i64>>> = parts
            .iter()
            .map(|p| {
                let mut pages: Vec<Vec<i64>> = p
                    .iter()
                    .map(|pg| pg.iter().rev().copied().collect())
                    .collect();
                pages.reverse();
                pages
            })
            .collect();
        assert_eq!(run(&rev, true, false), (1..=12).rev().collect::<Vec<_>>());
    }

    #[test]
    fn unsigned_handles_merge_by_value() {
        // As u64: 5 < 2^63 (i64::MIN) < u64::MAX (-1); each input in that order.
        let parts = vec![vec![vec![5, i64::MIN]], vec![vec![7, -1]]];
        assert_eq!(run(&parts, false, true), vec![5, 7, i64::MIN, -1]);
        let signed = vec![vec![vec![i64::MIN, 5]], vec![vec![-1, 7]]];
        assert_eq!(run(&signed, false, false), vec![i64::MIN, -1, 5, 7]);
    }

    #[test]
    fn no_inputs_and_empty_inputs_are_done() {
        assert_eq!(run(&[], false, false), Vec::<i64>::new());
        assert_eq!(run(&[vec![], vec![vec![]]], true, false), Vec::<i64>::new());
    }
}
