//! The min-ts tick: it turns the TSO into per-region resolved ts and sends them to
//! Normal downstreams, batched as the client's version allows.

use std::collections::HashMap;

use tibinlog_proto::cdcpb::{self, event};

use super::events::out_events;
use super::resolved::batch_groups;
use super::state::{CdcEndpoint, ConnId, DownstreamId, DownstreamState, Output};
use crate::sim::ts::{SimRng, Ts};

impl CdcEndpoint {
    /// A min-ts tick with `min_ts` fetched from PD (the caller has already raised the store's
    /// max_ts to it). Computes each captured region's resolved ts and sends it to Normal
    /// downstreams, batched per connection (or per request_id with multiplexing), or as
    /// per-region events for clients older than 4.0.8.
    ///
    /// Invariant: the value sent to a downstream never decreases.
    pub fn on_min_ts(&mut self, min_ts: Ts, rng: &mut SimRng) -> Vec<Output> {
        let mut per_region: Vec<(u64, Ts)> = Vec::with_capacity(self.delegates.len());
        let mut region_ids: Vec<u64> = self.delegates.keys().copied().collect();
        region_ids.sort_unstable();
        for region_id in region_ids {
            let f = self.faults.get(&region_id).cloned().unwrap_or_default();
            let Some(del) = self.delegates.get_mut(&region_id) else {
                continue;
            };
            let resolved = if f.stall_resolved_ts {
                del.tracker.resolved_ts()
            } else {
                let lagged = Ts::compose(
                    min_ts.physical_ms().saturating_sub(f.resolved_ts_lag_ms),
                    min_ts.logical(),
                );
                del.tracker.resolve(if f.resolved_ts_lag_ms > 0 {
                    lagged
                } else {
                    min_ts
                })
            };
            if rng.chance(f.drop_resolved_ts) || resolved.is_zero() {
                continue;
            }
            per_region.push((region_id, resolved));
        }
        // Group Normal downstreams: (conn, group request id) -> [(region, ts)].
        let mut groups: HashMap<(ConnId, u64), Vec<(u64, Ts)>> = HashMap::new();
        let mut compat: Vec<(DownstreamId, Ts)> = Vec::new();
        for (region_id, resolved) in per_region {
            let Some(del) = self.delegates.get(&region_id) else {
                continue;
            };
            for id in &del.downstreams {
                let Some(d) = self.downstreams.get(id) else {
                    continue;
                };
                let DownstreamState::Normal { last_resolved } = d.state else {
                    continue;
                };
                let ts = resolved.max(last_resolved);
                let c = self.conns.get(&id.conn).copied().unwrap_or_default();
                if c.multiplexing {
                    groups
                        .entry((id.conn, id.request_id))
                        .or_default()
                        .push((id.region_id, ts));
                } else if c.batch_resolved_ts() {
                    groups
                        .entry((id.conn, 0))
                        .or_default()
                        .push((id.region_id, ts));
                } else {
                    compat.push((*id, ts));
                }
            }
        }
        let mut out = Vec::new();
        let mut keys: Vec<(ConnId, u64)> = groups.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            let (conn, request_id) = key;
            let items = groups.remove(&key).unwrap_or_default();
            for (regions, ts) in batch_groups(items) {
                // Skip regions whose last sent value is above the group minimum: sending the
                // minimum would move their resolved ts backwards on the wire.
                let mut sent = Vec::with_capacity(regions.len());
                for region_id in regions {
                    // The region's downstreams, from its delegate (a scan that started put
                    // them there; only Normal ones are updated below).
                    let ids: Vec<DownstreamId> = self
                        .delegates
                        .get(&region_id)
                        .map(|del| {
                            del.downstreams
                                .iter()
                                .filter(|d| {
                                    d.conn == conn
                                        && (request_id == 0 || d.request_id == request_id)
                                })
                                .copied()
                                .collect()
                        })
                        .unwrap_or_default();
                    let mut ok = false;
                    for id in ids {
                        if let Some(DownstreamState::Normal { last_resolved }) =
                            self.downstreams.get_mut(&id).map(|d| &mut d.state)
                        {
                            if *last_resolved <= ts {
                                *last_resolved = ts;
                                ok = true;
                            }
                        }
                    }
                    if ok {
                        sent.push(region_id);
                    }
                }
                if !sent.is_empty() {
                    out.push(Output {
                        conn,
                        event: cdcpb::ChangeDataEvent {
                            events: Vec::new(),
                            resolved_ts: Some(cdcpb::ResolvedTs {
                                regions: sent,
                                ts: ts.0,
                                request_id,
                            }),
                        },
                    });
                }
            }
        }
        compat.sort_unstable_by_key(|(id, _)| *id);
        for (id, ts) in compat {
            if let Some(DownstreamState::Normal { last_resolved }) =
                self.downstreams.get_mut(&id).map(|d| &mut d.state)
            {
                *last_resolved = ts;
            }
            out.push(out_events(
                id.conn,
                vec![cdcpb::Event {
                    region_id: id.region_id,
                    request_id: id.request_id,
                    event: Some(event::Event::ResolvedTs(ts.0)),
                    ..Default::default()
                }],
            ));
        }
        out
    }
}
