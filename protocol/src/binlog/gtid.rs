//! MySQL GTIDs: the server UUID ([`Sid`]), GTID sets ([`GtidSet`]) in text form
//! (`uuid:1-5:7-9,uuid2:3`) and in the binary "SID block" that PREVIOUS_GTIDS and
//! COM_BINLOG_DUMP_GTID carry (MySQL `Gtid_set::encode` / `add_gtid_encoding`).
//!
//! # SID block
//! ```text
//! +----------+ per SID: +----------+-------------+ per interval: +--------+--------+
//! | n_sids 8 |          | uuid 16  | n_intervals 8|               | start 8| end 8  |
//! +----------+          +----------+-------------+               +--------+--------+
//! ```
//! All integers little-endian; `end` is exclusive (last GNO + 1); SIDs in ascending byte order,
//! intervals sorted and non-overlapping. An empty set is 8 zero bytes.
//!
//! Internally intervals are half-open too: `[start, end)`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::codec::Reader;
use super::error::{BinlogError, Result};

/// Largest GNO MySQL accepts (`GNO_END - 1`, i.e. `i64::MAX - 1`).
pub const MAX_GNO: u64 = (i64::MAX as u64) - 1;

/// A source server UUID, stored as its 16 raw bytes in textual order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Sid(pub [u8; 16]);

impl Sid {
    /// The all-zero UUID used by ANONYMOUS_GTID events.
    pub const ZERO: Sid = Sid([0; 16]);

    /// Parses `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (hex of either case), also without hyphens.
    pub fn parse(s: &str) -> Result<Self> {
        Self::parse_at(s, 0)
    }

    fn parse_at(s: &str, base: usize) -> Result<Self> {
        let b = s.as_bytes();
        let hyphens = b.len() == 36;
        if !(hyphens || b.len() == 32) {
            return Err(BinlogError::GtidText {
                offset: base,
                reason: "UUID must be 32 hex digits",
            });
        }
        let mut out = [0u8; 16];
        let mut n = 0;
        let mut i = 0;
        while i < b.len() {
            if hyphens && matches!(i, 8 | 13 | 18 | 23) {
                if b[i] != b'-' {
                    return Err(BinlogError::GtidText {
                        offset: base + i,
                        reason: "expected '-'",
                    });
                }
                i += 1;
                continue;
            }
            let hi = hex_val(b[i]);
            let lo = b.get(i + 1).copied().and_then(hex_val);
            match (hi, lo) {
                (Some(h), Some(l)) if n < 16 => out[n] = (h << 4) | l,
                _ => {
                    return Err(BinlogError::GtidText {
                        offset: base + i,
                        reason: "bad hex digit",
                    })
                }
            }
            n += 1;
            i += 2;
        }
        Ok(Sid(out))
    }
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl fmt::Display for Sid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl FromStr for Sid {
    type Err = BinlogError;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// A set of GTIDs: per SID a sorted list of disjoint, non-adjacent half-open intervals.
///
/// Invariant: every interval has `1 <= start < end`, intervals of one SID are sorted, disjoint
/// and not adjacent (they are merged), and no SID maps to an empty list.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct GtidSet {
    sets: BTreeMap<Sid, Vec<(u64, u64)>>,
}

impl GtidSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when the set holds no GTID.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// Iterates SIDs with their half-open intervals.
    pub fn iter(&self) -> impl Iterator<Item = (&Sid, &[(u64, u64)])> {
        self.sets.iter().map(|(s, v)| (s, v.as_slice()))
    }

    /// Adds one GTID. Returns false when it was already present.
    pub fn add(&mut self, sid: Sid, gno: u64) -> bool {
        if gno == 0 || self.contains(&sid, gno) {
            return false;
        }
        self.add_interval(sid, gno, gno + 1);
        true
    }

    /// Adds the half-open interval `[start, end)`; empty intervals and GNO 0 are ignored.
    pub fn add_interval(&mut self, sid: Sid, start: u64, end: u64) {
        let start = start.max(1);
        if start >= end {
            return;
        }
        let v = self.sets.entry(sid).or_default();
        // First interval whose end reaches `start` (adjacent counts: merge).
        let i = v.partition_point(|&(_, e)| e < start);
        let mut j = i;
        let (mut s, mut e) = (start, end);
        while j < v.len() && v[j].0 <= e {
            s = s.min(v[j].0);
            e = e.max(v[j].1);
            j += 1;
        }
        v.splice(i..j, std::iter::once((s, e)));
    }

    /// The highest GNO of `sid` in the set, 0 if it has none: the MariaDB sequence number a
    /// set of our own GTIDs stands for (`0-<server_id>-<gno>`).
    pub fn last_gno(&self, sid: &Sid) -> u64 {
        self.iter()
            .find(|(s, _)| *s == sid)
            .and_then(|(_, ivs)| ivs.last().map(|&(_, end)| end - 1))
            .unwrap_or(0)
    }

    /// True when `sid:gno` is in the set.
    pub fn contains(&self, sid: &Sid, gno: u64) -> bool {
        self.sets.get(sid).is_some_and(|v| {
            let i = v.partition_point(|&(_, e)| e <= gno);
            i < v.len() && v[i].0 <= gno
        })
    }

    /// Adds every GTID of `other`.
    pub fn union_with(&mut self, other: &GtidSet) {
        for (sid, v) in &other.sets {
            for &(s, e) in v {
                self.add_interval(*sid, s, e);
            }
        }
    }

    /// The union of two sets.
    pub fn union(&self, other: &GtidSet) -> GtidSet {
        let mut out = self.clone();
        out.union_with(other);
        out
    }

    /// True when every GTID of `self` is in `other` (MySQL `GTID_SUBSET`).
    pub fn is_subset_of(&self, other: &GtidSet) -> bool {
        self.sets.iter().all(|(sid, v)| {
            let Some(o) = other.sets.get(sid) else {
                return false;
            };
            v.iter().all(|&(s, e)| {
                let i = o.partition_point(|&(_, oe)| oe <= s);
                i < o.len() && o[i].0 <= s && e <= o[i].1
            })
        })
    }

    /// The GTIDs of `self` not in `other` (MySQL `GTID_SUBTRACT`).
    pub fn subtract(&self, other: &GtidSet) -> GtidSet {
        let mut out = GtidSet::new();
        for (sid, v) in &self.sets {
            let empty = Vec::new();
            let o = other.sets.get(sid).unwrap_or(&empty);
            for &(s, e) in v {
                let mut cur = s;
                for &(os, oe) in o {
                    if oe <= cur || os >= e {
                        continue;
                    }
                    if os > cur {
                        out.add_interval(*sid, cur, os);
                    }
                    cur = cur.max(oe);
                    if cur >= e {
                        break;
                    }
                }
                if cur < e {
                    out.add_interval(*sid, cur, e);
                }
            }
        }
        out
    }

    /// Parses MySQL's text form: `uuid:1-5:7,uuid2:3-9`. Whitespace (including the newlines MySQL
    /// prints after commas) is ignored; the empty string is the empty set.
    pub fn parse(text: &str) -> Result<Self> {
        let mut set = GtidSet::new();
        let mut pos = 0;
        for part in text.split(',') {
            let base = pos;
            pos += part.len() + 1;
            let trimmed_start = part.len() - part.trim_start().len();
            let part_t = part.trim();
            if part_t.is_empty() {
                if text.trim().is_empty() {
                    break;
                }
                return Err(BinlogError::GtidText {
                    offset: base,
                    reason: "empty element",
                });
            }
            let mut items = part_t.split(':');
            let uuid = items.next().unwrap_or("").trim();
            let sid = Sid::parse_at(uuid, base + trimmed_start)?;
            let mut any = false;
            for iv in items {
                any = true;
                let iv = iv.trim();
                let (a, b) = match iv.split_once('-') {
                    Some((a, b)) => (a.trim(), b.trim()),
                    None => (iv, iv),
                };
                let parse = |t: &str| -> Result<u64> {
                    t.parse::<u64>()
                        .ok()
                        .filter(|&g| (1..=MAX_GNO).contains(&g))
                        .ok_or(BinlogError::GtidText {
                            offset: base,
                            reason: "bad GNO",
                        })
                };
                let (a, b) = (parse(a)?, parse(b)?);
                if b < a {
                    return Err(BinlogError::GtidText {
                        offset: base,
                        reason: "interval end < start",
                    });
                }
                set.add_interval(sid, a, b + 1);
            }
            if !any {
                return Err(BinlogError::GtidText {
                    offset: base,
                    reason: "UUID without intervals",
                });
            }
        }
        Ok(set)
    }

    /// Appends the SID-block encoding.
    pub fn encode_into(&self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(&(self.sets.len() as u64).to_le_bytes());
        for (sid, v) in &self.sets {
            buf.extend_from_slice(&sid.0);
            buf.extend_from_slice(&(v.len() as u64).to_le_bytes());
            for &(s, e) in v {
                buf.extend_from_slice(&s.to_le_bytes());
                buf.extend_from_slice(&e.to_le_bytes());
            }
        }
    }

    /// Length of [`Self::encode_into`]'s output.
    pub fn encoded_len(&self) -> usize {
        8 + self
            .sets
            .values()
            .map(|v| 16 + 8 + 16 * v.len())
            .sum::<usize>()
    }

    /// Decodes a SID block; the whole input must be consumed. Overlapping or unsorted intervals
    /// are accepted and normalised; empty intervals and GNO 0 are rejected.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        let mut r = Reader::new(buf, "GTID set");
        let n = r.u64_le()?;
        let mut set = GtidSet::new();
        for _ in 0..n {
            let mut sid = [0u8; 16];
            sid.copy_from_slice(r.bytes(16)?);
            let k = r.u64_le()?;
            // Each interval is 16 bytes: refuse counts the input cannot hold before looping.
            if k > (r.remaining() / 16) as u64 {
                return Err(r.malformed());
            }
            for _ in 0..k {
                let at = r.position();
                let s = r.u64_le()?;
                let e = r.u64_le()?;
                if s == 0 || e <= s {
                    return Err(BinlogError::Malformed {
                        what: "GTID set",
                        offset: at,
                    });
                }
                set.add_interval(Sid(sid), s, e);
            }
        }
        if r.remaining() != 0 {
            return Err(r.malformed());
        }
        Ok(set)
    }
}

impl fmt::Display for GtidSet {
    /// MySQL's text form without the newlines MySQL puts after commas.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (sid, v)) in self.sets.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{sid}")?;
            for &(s, e) in v {
                if e - 1 == s {
                    write!(f, ":{s}")?;
                } else {
                    write!(f, ":{s}-{}", e - 1)?;
                }
            }
        }
        Ok(())
    }
}

impl FromStr for GtidSet {
    type Err = BinlogError;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const U1: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

    #[test]
    fn last_gno_is_the_end_of_the_sid_s_last_interval() {
        let set = GtidSet::parse(&format!("{U1}:1-5:8-10")).expect("set");
        let sid = Sid::parse(U1).expect("sid");
        assert_eq!(set.last_gno(&sid), 10);
        assert_eq!(set.last_gno(&Sid::ZERO), 0);
        assert_eq!(GtidSet::new().last_gno(&sid), 0);
    }

    #[test]
    fn parse_print_merge() {
        let s = GtidSet::parse(&format!("{}:1-5:6:9-10, \n{U1}:3", U1.to_uppercase())).unwrap();
        assert_eq!(s.to_string(), format!("{U1}:1-6:9-10"));
        assert!(s.contains(&Sid::parse(U1).unwrap(), 6));
        assert!(!s.contains(&Sid::parse(U1).unwrap(), 7));
        assert_eq!(GtidSet::parse("").unwrap(), GtidSet::new());
        assert!(GtidSet::parse(&format!("{U1}:0")).is_err());
        assert!(GtidSet::parse(&format!("{U1}:5-3")).is_err());
        assert!(GtidSet::parse(U1).is_err());
        assert!(GtidSet::parse("zz:1").is_err());
        assert!(GtidSet::parse(&format!("{U1}:1,,{U1}:2")).is_err());
    }

    #[test]
    fn sid_block_of_mysql_example() {
        // MySQL's documentation example of the PREVIOUS_GTIDS encoding of
        // `3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5`: one SID, one interval [1, 6).
        let s = GtidSet::parse(&format!("{U1}:1-5")).unwrap();
        let mut b = Vec::new();
        s.encode_into(&mut b);
        let mut want = vec![1, 0, 0, 0, 0, 0, 0, 0];
        want.extend_from_slice(&Sid::parse(U1).unwrap().0);
        want.extend_from_slice(&[
            1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0,
        ]);
        assert_eq!(b, want);
        assert_eq!(b.len(), s.encoded_len());
        assert_eq!(GtidSet::decode(&b).unwrap(), s);
        assert!(GtidSet::decode(&b[..b.len() - 1]).is_err());
        // A huge interval count in a short buffer is an error, not an allocation.
        let mut bad = b.clone();
        bad[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(GtidSet::decode(&bad).is_err());
    }

    #[test]
    fn subtract_and_subset() {
        let a = GtidSet::parse(&format!("{U1}:1-10")).unwrap();
        let b = GtidSet::parse(&format!("{U1}:3-4:8")).unwrap();
        assert_eq!(a.subtract(&b).to_string(), format!("{U1}:1-2:5-7:9-10"));
        assert!(b.is_subset_of(&a));
        assert!(!a.is_subset_of(&b));
        assert!(GtidSet::new().is_subset_of(&b));
    }
}
