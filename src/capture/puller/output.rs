//! The actor's output: events of the store streams passed on in order (a region that fails
//! is retried or fails the subscription), and resolved timestamps emitted as the frontier
//! moves, within the output quota.

use super::*;

impl Actor {
    /// Returns false if the output receiver is gone.
    pub(super) async fn on_store_output(&mut self, o: StoreOutput) -> Result<bool, PullerError> {
        // The output's bytes count against the store actors' quota until its rows are passed
        // on (a row sent on holds the output channel's own quota).
        let cost = self.store_out.cost(&o);
        let r = self.pass_on(o).await;
        self.store_out.release(cost);
        r
    }

    pub(super) async fn pass_on(&mut self, o: StoreOutput) -> Result<bool, PullerError> {
        match o {
            StoreOutput::Rows(rows) => {
                for row in rows {
                    if row.commit_ts <= self.emitted {
                        tracing::debug!(
                            start_ts = row.start_ts.0,
                            commit_ts = row.commit_ts.0,
                            emitted = self.emitted.0,
                            "row at or below the watermark dropped as a duplicate"
                        );
                        self.duplicates += 1;
                        continue;
                    }
                    self.run_hook(&row)?;
                    if !self.send(RawKvEvent::Row(row)).await {
                        return Ok(false);
                    }
                }
            }
            StoreOutput::Resolved(v) => {
                for (request_id, ts) in v {
                    // A request ended meanwhile no longer speaks for its span.
                    if let Some(l) = self.live.get(request_id) {
                        self.frontier.advance(&l.span, ts);
                    }
                }
                return Ok(self.maybe_emit().await);
            }
            StoreOutput::RegionFailed { ended, error } => {
                self.live.remove(&ended.req.request_id);
                self.on_region_failed(*ended, *error)?;
            }
            StoreOutput::StreamFailed {
                store_id,
                generation,
                ended,
                error,
            } => {
                if error.retry().is_none() {
                    return Err((*error).into());
                }
                tracing::info!(store_id, regions = ended.len(), error = %error,
                    "store stream failed, re-subscribing its regions");
                self.drop_store(store_id, generation);
                for e in ended {
                    self.live.remove(&e.req.request_id);
                    let attempt = if e.initialized { 0 } else { e.req.attempt + 1 };
                    self.cache.invalidate(e.req.region.id);
                    // At least one backoff step: the store may be restarting.
                    self.retry_range(e.req.sub, e.req.span, attempt.max(1));
                }
                // A registration that reached the actor's channel after it drained it on the
                // way out is in no report: left live, it would hold its piece back for good
                // (a retry of the piece finds it covered).
                let lost: Vec<u64> = self
                    .live
                    .iter()
                    .filter(|(_, l)| l.store_id == store_id && l.generation == generation)
                    .map(|(id, _)| *id)
                    .collect();
                for id in lost {
                    if let Some(l) = self.live.remove(&id) {
                        tracing::debug!(
                            request_id = id,
                            region_id = l.region.0,
                            store_id,
                            "registration lost with its store stream, re-subscribing"
                        );
                        self.cache.invalidate(l.region);
                        self.retry_range(l.sub, l.span, 1);
                    }
                }
            }
        }
        Ok(true)
    }

    pub(super) fn on_region_failed(&mut self, ended: Ended, error: CaptureError) -> Step {
        self.stream_cfg.metrics.region_errors.inc();
        let Some(retry) = error.retry() else {
            return Err(error.into());
        };
        if !self.subs.contains_key(&ended.req.sub) {
            return Ok(());
        }
        let mut req = ended.req;
        req.attempt = if ended.initialized {
            0
        } else {
            req.attempt + 1
        };
        tracing::debug!(region_id = req.region.id.0, ts = ended.resolved_ts.0, error = %error,
            "region subscription ended");
        match retry {
            Retry::Region {
                after,
                leader_store,
            } => {
                if let Some(store) = leader_store {
                    if !req.region.set_leader_store(store) {
                        self.cache.invalidate(req.region.id);
                        self.retry_range(req.sub, req.span, req.attempt);
                        return Ok(());
                    }
                    self.cache.update_leader(req.region.id, store);
                }
                let after = after.max(self.backoff(req.attempt));
                self.schedule(after, Task::Region(Box::new(req)));
            }
            Retry::Range | Retry::Store => {
                self.cache.invalidate(req.region.id);
                self.retry_range(req.sub, req.span, req.attempt);
            }
        }
        Ok(())
    }

    pub(super) async fn send(&mut self, ev: RawKvEvent) -> bool {
        tokio::select! {
            _ = self.cancel.cancelled() => false,
            ok = self.out.send(ev) => ok,
        }
    }

    /// Sends the watermark if it rose; false if the receiver is gone.
    pub(super) async fn maybe_emit(&mut self) -> bool {
        let f = self.frontier.frontier();
        if f <= self.emitted {
            return true;
        }
        debug_assert!(f > self.emitted, "watermark only rises");
        self.emitted = f;
        self.resolved_tx.send_replace(f);
        self.stream_cfg
            .metrics
            .resolved_ts_ms
            .set(i64::try_from(f.physical_ms()).unwrap_or(i64::MAX));
        tracing::trace!(ts = f.0, duplicates = self.duplicates, "watermark advanced");
        self.send(RawKvEvent::Resolved(ResolvedTs(f))).await
    }
}
