//! A store stream's incoming messages: each ChangeDataEvent's region events routed to their
//! subscription by request id and region (events of a region no longer subscribed are
//! dropped), errors and ends of regions reported to the puller.

use super::*;

impl StoreActor {
    /// Sets this store's region gauges.
    pub(super) fn report_regions(&self) {
        self.region_gauges.set(
            self.pending.len(),
            self.scanning,
            self.feeds.len().saturating_sub(self.scanning),
        );
    }

    pub(super) fn unindex(&mut self, region: RegionId, request_id: u64) {
        if let Some(v) = self.by_region.get_mut(&region) {
            v.retain(|r| *r != request_id);
            if v.is_empty() {
                self.by_region.remove(&region);
            }
        }
    }

    /// The subscription an event is for: exact `(request_id, region_id)`, or on a
    /// non-multiplexed stream the region's only subscription.
    pub(super) fn route(&self, request_id: u64, region: RegionId) -> Option<(u64, RegionId)> {
        if self.feeds.contains_key(&(request_id, region)) {
            return Some((request_id, region));
        }
        if self.multiplexed {
            return None;
        }
        match self.by_region.get(&region).map(Vec::as_slice) {
            Some([only]) => Some((*only, region)),
            _ => None,
        }
    }

    pub(super) async fn on_message(
        &mut self,
        msg: cdcpb::ChangeDataEvent,
        req_tx: &mpsc::Sender<cdcpb::ChangeDataRequest>,
        cancel: &CancellationToken,
    ) -> Result<(), CaptureError> {
        let mut resolved: Vec<(u64, Ts)> = Vec::new();
        let mut failed: Vec<StoreOutput> = Vec::new();
        let mut tokens_freed = false;
        // (rows, bytes) received, and of those from scans; counted once per message.
        let (mut rows_in, mut bytes_in, mut scan_rows, mut scan_bytes) = (0u64, 0u64, 0u64, 0u64);
        for ev in msg.events {
            if self.rows_bytes >= ROWS_FLUSH_BYTES {
                // What earlier messages left queued goes first, so these rows go out in order;
                // each send waits for the puller.
                self.rows_bytes = 0;
                let rows = StoreOutput::Rows(std::mem::take(&mut self.rows));
                let queued = std::mem::take(&mut self.outq);
                self.outq_bytes = 0;
                for o in queued.into_iter().chain(std::iter::once(rows)) {
                    let sent = tokio::select! {
                        _ = cancel.cancelled() => false,
                        sent = self.out.send(o) => sent,
                    };
                    if !sent {
                        return Ok(()); // stopped, or the puller is gone
                    }
                }
            }
            let Some(key) = self.route(ev.request_id, RegionId(ev.region_id)) else {
                continue; // a subscription we no longer track (e.g. one we deregistered)
            };
            let Some(sub) = self.feeds.get_mut(&key) else {
                continue;
            };
            let was_init = sub.feed.is_initialized();
            let had = self.rows.len();
            let stepped = sub.feed.on_cdcpb_event(ev, &mut self.rows);
            let added = self.rows[had..]
                .iter()
                .map(RawRow::payload_len)
                .sum::<usize>();
            self.rows_bytes += added;
            let n = (self.rows.len() - had) as u64;
            rows_in += n;
            bytes_in += added as u64;
            if !was_init {
                scan_rows += n;
                scan_bytes += added as u64;
            }
            match stepped {
                Ok(Some(ts)) => resolved.push((sub.req.request_id, ts)),
                Ok(None) => {}
                Err(error) => {
                    if let Some(sub) = self.feeds.remove(&key) {
                        self.unindex(key.1, key.0);
                        if !was_init {
                            self.scanning = self.scanning.saturating_sub(1);
                            tokens_freed = true;
                        }
                        failed.push(StoreOutput::RegionFailed {
                            ended: Box::new(Ended {
                                resolved_ts: sub.feed.resolved_ts(),
                                initialized: was_init,
                                req: sub.req,
                            }),
                            error: Box::new(error),
                        });
                    }
                    continue;
                }
            }
            if !was_init && sub.feed.is_initialized() {
                tracing::trace!(
                    store_id = self.store_id,
                    region_id = key.1 .0,
                    "initialized"
                );
                self.scanning = self.scanning.saturating_sub(1);
                tokens_freed = true;
            }
        }
        if let Some(r) = msg.resolved_ts {
            let ts = Ts(r.ts);
            for region in r.regions {
                let region = RegionId(region);
                let one = [r.request_id];
                let ids: &[u64] = if self.multiplexed || r.request_id != 0 {
                    &one
                } else {
                    self.by_region.get(&region).map_or(&[], Vec::as_slice)
                };
                for &id in ids {
                    if let Some(sub) = self.feeds.get_mut(&(id, region)) {
                        if let Ok(Some(ts)) = sub
                            .feed
                            .on_event(RegionEvent::ResolvedTs(ts), &mut self.rows)
                        {
                            resolved.push((sub.req.request_id, ts));
                        }
                    }
                }
            }
        }
        if !self.rows.is_empty() {
            self.rows_bytes = 0;
            let rows = StoreOutput::Rows(std::mem::take(&mut self.rows));
            self.queue_out(rows);
        }
        for f in failed {
            self.queue_out(f);
        }
        if !resolved.is_empty() {
            self.queue_out(StoreOutput::Resolved(resolved));
        }
        let m = &self.cfg.metrics;
        if rows_in > 0 {
            m.rows.inc_by(rows_in);
            m.row_bytes.inc_by(bytes_in);
        }
        if scan_rows > 0 {
            m.scan_rows.inc_by(scan_rows);
            m.scan_bytes.inc_by(scan_bytes);
        }
        if tokens_freed {
            self.start_pending(req_tx).await?;
        } else {
            self.report_regions();
        }
        Ok(())
    }
}
