//! The actor's subscriptions: ranges split into regions by the region cache, one EventFeed
//! request per region on its leader's store stream, retries with backoff, and stores dropped
//! when their stream ends.

use super::*;

impl Actor {
    pub(super) fn schedule(&mut self, after: Duration, task: Task) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.retries.push(Reverse(Scheduled {
            at: Instant::now() + after,
            seq,
            task,
        }));
    }

    pub(super) fn backoff(&mut self, attempt: u32) -> Duration {
        backoff(
            self.cfg.backoff_base,
            self.cfg.backoff_max,
            attempt,
            &mut self.rng,
        )
    }

    pub(super) fn retry_range(&mut self, sub: u64, span: Span, attempt: u32) {
        let after = self.backoff(attempt);
        self.schedule(after, Task::Range { sub, span, attempt });
    }

    pub(super) async fn run_due(&mut self) -> Step {
        let now = Instant::now();
        while self.retries.peek().is_some_and(|r| r.0.at <= now) {
            let Some(Reverse(s)) = self.retries.pop() else {
                break;
            };
            match s.task {
                Task::Range { sub, span, attempt } => {
                    self.subscribe_range(sub, span, attempt).await?
                }
                Task::Region(req) => {
                    let req = *req;
                    self.subscribe_region(req.sub, req.region, req.span, req.attempt)
                        .await?
                }
            }
        }
        Ok(())
    }

    /// Loads the regions of `span` from PD and subscribes each piece.
    pub(super) async fn subscribe_range(&mut self, sub: u64, span: Span, attempt: u32) -> Step {
        let Some(info) = self.subs.get(&sub) else {
            return Ok(());
        };
        let Some(span) = intersect(&span, &info.span) else {
            return Ok(());
        };
        let regions = match self.pd.regions_in(&span).await {
            Ok(r) => r,
            Err(e) if e.is_retryable() => {
                tracing::warn!(error = %e, "loading regions failed, retrying");
                self.retry_range(sub, span, attempt + 1);
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let pieces: Vec<Span> = regions.iter().map(|r| r.span.clone()).collect();
        if first_gap(&span, &pieces).is_some() {
            // PD has not learned every region of a split yet.
            self.retry_range(sub, span, attempt + 1);
            return Ok(());
        }
        for r in regions {
            self.cache.insert(r.clone());
            if let Some(piece) = intersect(&span, &r.span) {
                self.subscribe_region(sub, r, piece, attempt).await?;
            }
        }
        Ok(())
    }

    pub(super) async fn store_handle(&mut self, store_id: u64) -> Result<StoreHandle, PdError> {
        if let Some(h) = self.stores.get(&store_id) {
            if !h.tx.is_closed() {
                return Ok(h.clone());
            }
        }
        let addr = match self.cache.store_addr(store_id) {
            Some(a) => a.to_string(),
            None => {
                let s = self.pd.get_store(store_id).await?;
                self.cache.set_store_addr(store_id, s.address.clone());
                s.address
            }
        };
        let generation = self.next_generation;
        self.next_generation += 1;
        let h = store_stream::spawn(
            store_id,
            generation,
            addr,
            self.stream_cfg.clone(),
            self.store_out.clone(),
            self.cancel.child_token(),
        );
        self.stores.insert(store_id, h.clone());
        Ok(h)
    }

    /// Subscribes `piece` of `region` from the piece's resolved ts.
    pub(super) async fn subscribe_region(
        &mut self,
        sub: u64,
        region: RegionInfo,
        piece: Span,
        attempt: u32,
    ) -> Step {
        let Some(info) = self.subs.get(&sub) else {
            return Ok(());
        };
        let start_ts = info.start_ts;
        let Some(checkpoint) = self.frontier.min_in(&piece) else {
            return Ok(());
        };
        let checkpoint_ts = checkpoint.max(start_ts);
        // A live subscription of this table on this region already covering the piece (two
        // failures reloading the same range) makes a second one pointless.
        let covered = self
            .live
            .of_sub_region(sub, region.id)
            .any(|l| intersect(&l.span, &piece).as_ref() == Some(&piece));
        if covered {
            return Ok(());
        }
        let Some(store_id) = region.leader_store() else {
            self.cache.invalidate(region.id);
            self.retry_range(sub, piece, attempt + 1);
            return Ok(());
        };
        let handle = match self.store_handle(store_id).await {
            Ok(h) => h,
            Err(e) if e.is_retryable() => {
                self.retry_range(sub, piece, attempt + 1);
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let request_id = self.next_request;
        self.next_request += 1;
        self.live.insert(
            request_id,
            Live {
                sub,
                region: region.id,
                span: piece.clone(),
                store_id,
                generation: handle.generation,
            },
        );
        let req = RegionRequest {
            request_id,
            sub,
            region,
            span: piece.clone(),
            start_ts,
            checkpoint_ts,
            attempt,
        };
        let sent = tokio::select! {
            _ = self.cancel.cancelled() => return Ok(()),
            r = handle.tx.send(StoreCommand::Register(Box::new(req))) => r.is_ok(),
        };
        if !sent {
            // The store actor is gone; its failure report does not hold this request.
            self.live.remove(&request_id);
            self.drop_store(store_id, handle.generation);
            self.retry_range(sub, piece, attempt + 1);
        }
        Ok(())
    }

    pub(super) fn drop_store(&mut self, store_id: u64, generation: u64) {
        if self
            .stores
            .get(&store_id)
            .is_some_and(|h| h.generation == generation)
        {
            self.stores.remove(&store_id);
            self.cache.invalidate_store(store_id);
        }
    }
}
