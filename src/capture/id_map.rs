//! Hash maps keyed by the integer ids capture looks up for every region on every resolved-ts
//! round (request ids, region ids, store ids).
//!
//! The standard library's SipHash resists flooding by chosen keys; these ids are allocated by
//! this process or by the cluster, never by a client, and with 100,000 regions resolving once a
//! second SipHash alone was a tenth of the idle CPU. [`IdHasher`] mixes each integer with one
//! multiplication by an odd 64-bit constant and a rotation, so that the high bits (which the
//! table's control bytes use) and the low bits (which pick the bucket) both depend on every bit
//! of the key.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// An odd constant with bits spread evenly (⌊2^64 / φ⌋ rounded to odd).
const K: u64 = 0x9e37_79b9_7f4a_7c15;

/// A fast, non-keyed hasher for integer ids. Byte strings are hashed eight bytes at a time.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl IdHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for IdHasher {
    #[inline]
    fn finish(&self) -> u64 {
        // The product's high bits depend on every key bit, its low bits only on the low ones:
        // rotate the well-mixed half down to where the bucket index is taken.
        self.0.rotate_left(26)
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_i64(&mut self, n: i64) {
        self.add(n as u64);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

/// A `HashMap` keyed by integer ids, hashed with [`IdHasher`].
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// A `HashSet` of integer ids, hashed with [`IdHasher`].
pub type IdSet<K> = std::collections::HashSet<K, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn hash<T: Hash>(v: T) -> u64 {
        BuildHasherDefault::<IdHasher>::default().hash_one(v)
    }

    #[test]
    fn sequential_ids_spread_over_buckets_and_control_bytes() {
        // 2^16 buckets, 2^16 sequential ids (region and request ids are allocated in order):
        // the low bits pick the bucket, the top 7 bits are the control byte.
        let n = 1u64 << 16;
        let mut buckets = vec![0u32; n as usize];
        let mut tags = [0u32; 128];
        for id in 1..=n {
            let h = hash(id);
            buckets[(h & (n - 1)) as usize] += 1;
            tags[(h >> 57) as usize] += 1;
        }
        let worst = *buckets.iter().max().expect("buckets");
        assert!(worst <= 12, "a bucket holds {worst} of {n} sequential ids");
        let (lo, hi) = (
            tags.iter().min().expect("tags"),
            tags.iter().max().expect("tags"),
        );
        assert!(
            *lo as f64 > 0.8 * (n / 128) as f64 && (*hi as f64) < 1.2 * (n / 128) as f64,
            "control bytes uneven: {lo}..{hi} per tag"
        );
    }

    #[test]
    fn strided_ids_do_not_collide() {
        // Ids with equal low bits (a stride of 2^20) must still differ in the bucket bits.
        let mut seen = IdSet::default();
        for i in 0..4096u64 {
            seen.insert(hash(i << 20) & 0xffff);
        }
        assert!(seen.len() > 3000, "{} distinct buckets of 4096", seen.len());
    }

    #[test]
    fn tuples_and_bytes_hash_every_part() {
        assert_ne!(hash((1u64, 2u64)), hash((2u64, 1u64)));
        assert_ne!(hash(&b"abcdefgh1"[..]), hash(&b"abcdefgh2"[..]));
        assert_ne!(hash(&b"ab"[..]), hash(&b"ab\0"[..]));
        let mut m: IdMap<(u64, u64), u32> = IdMap::default();
        for a in 0..100u64 {
            for b in 0..100u64 {
                m.insert((a, b), (a * 100 + b) as u32);
            }
        }
        assert_eq!(m.len(), 10_000);
        assert_eq!(m[&(42, 7)], 4207);
    }
}
