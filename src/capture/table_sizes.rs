//! Size estimates of physical tables (a table's or a partition's records) from PD's region
//! statistics: the approximate keys and size of the regions holding `[t{id}_r, t{id}_s)`.
//!
//! They are estimates in the way TiKV's are: a region that also holds the table's index entries
//! (a small table's only region) counts those keys too, and deleted or overwritten versions count
//! until GC. An answer is kept for [`TTL`], a failed one as well (logged once), so that a
//! catalog query over thousands of tables neither waits on PD each time nor floods it; missing
//! answers are fetched [`CONCURRENCY`] at a time within [`DEADLINE`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};

use super::pd::PdClient;
use super::pd_http::RangeStats;
use crate::tidb::key::record_span;

/// How long an answer stands.
pub const TTL: Duration = Duration::from_secs(10);
/// Requests in flight at once.
pub const CONCURRENCY: usize = 16;
/// Longest a batch of requests may take; what is missing then stays unknown.
pub const DEADLINE: Duration = Duration::from_secs(3);

/// Cached region statistics by physical table id.
#[derive(Debug)]
pub struct TableSizes {
    pd: PdClient,
    /// Answers (`None`: PD could not say) and when they were fetched.
    cache: Mutex<HashMap<i64, (Instant, Option<RangeStats>)>>,
}

impl TableSizes {
    pub fn new(pd: PdClient) -> Self {
        TableSizes {
            pd,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Statistics of the physical tables `ids` (those PD could tell).
    pub async fn of(&self, ids: &[i64]) -> HashMap<i64, RangeStats> {
        let now = Instant::now();
        let mut out = HashMap::new();
        let mut missing = Vec::new();
        {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            cache.retain(|_, (at, _)| now.duration_since(*at) < TTL);
            for &id in ids {
                match cache.get(&id) {
                    Some((_, Some(s))) => {
                        out.insert(id, *s);
                    }
                    Some((_, None)) => {}
                    None if !missing.contains(&id) => missing.push(id),
                    None => {}
                }
            }
        }
        if missing.is_empty() {
            return out;
        }
        let fetch = stream::iter(missing.iter().copied())
            .map(|id| async move {
                let (start, end) = record_span(id);
                (id, self.pd.region_stats(&start, &end).await)
            })
            .buffer_unordered(CONCURRENCY)
            .collect::<Vec<_>>();
        let answers: HashMap<i64, _> = tokio::time::timeout(DEADLINE, fetch)
            .await
            .unwrap_or_default()
            .into_iter()
            .collect();
        let at = Instant::now();
        let mut failed = None;
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        for id in missing {
            let got = match answers.get(&id) {
                Some(Ok(s)) => Some(*s),
                Some(Err(e)) => {
                    failed = Some(e.to_string());
                    None
                }
                None => {
                    failed = Some(format!("no answer within {DEADLINE:?}"));
                    None
                }
            };
            if let Some(s) = got {
                out.insert(id, s);
            }
            cache.insert(id, (at, got));
        }
        drop(cache);
        if let Some(e) = failed {
            tracing::warn!(error = %e, "PD's region statistics: some table sizes are unknown");
        }
        out
    }
}
