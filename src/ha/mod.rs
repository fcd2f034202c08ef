//! High availability: the instances of a group share one etcd (PD's embedded etcd in a real
//! cluster) and elect an owner; the owner captures and writes the binlog, the others follow it.
//!
//! What makes a group safe is that the binlog's bytes are a function of the upstream history and
//! of the point capture starts from (docs/ha.md): an instance that takes over
//! regenerates, byte for byte, whatever the old owner wrote that it had not received. The
//! election only has to guarantee that **an owner stops writing before another may start**.
//!
//! # Keys (under the configured prefix, one group per TiDB cluster)
//! ```text
//! <prefix>/owner/<lease id hex>   etcd's election (v3election): the oldest key is the owner;
//!                                 its value is the member's JSON ({instance_id, mysql})
//! <prefix>/end                    the owner's durable binlog end, written only while the owner
//!                                 key still has the create revision it won with
//! ```
//!
//! # The fence
//! A member that wins holds a lease of `lease_ttl`. etcd drops the owner key when the lease
//! expires there, which is no earlier than `ttl` after etcd received the last keep-alive, so no
//! earlier than `ttl` after the member **sent** it. The member therefore counts its lease valid
//! until `sent + granted ttl` (less a drift allowance) of the last answered keep-alive and
//! refuses to write from then on ([`Fence::check`]), whatever the network or a pause did: a
//! process stopped past its lease finds the deadline passed when it resumes. A keep-alive
//! answered with TTL 0 (the lease is gone), a deleted owner key, or a failed conditional write
//! of the end (the owner key's revision changed) lose the fence at once. A lost fence is never
//! regained: the member campaigns again with a new lease.

pub mod election;
pub mod follow;
pub mod gate;

pub use election::{
    Candidate, ElectionConfig, ElectionError, Fence, Fenced, MemberInfo, Ownership,
    DEFAULT_LEASE_TTL,
};
