//! Point reads of many keys at one timestamp (`KvBatchGet`), as TiDB's index lookups fetch the
//! rows an index scan found: the keys are grouped by region, one request per region, each
//! retried on region errors and locks like every other snapshot read.

use bytes::Bytes;
use tibinlog_proto::kvrpcpb;

use super::snapshot::{context, key_error, raw_of, Again, At, Result, SnapshotReader};
use crate::model::Ts;

impl SnapshotReader {
    /// The values of raw `keys` (ascending) at `ts`, in key order; a key without a value is
    /// left out.
    pub async fn batch_get(&self, keys: &[Vec<u8>], ts: Ts) -> Result<Vec<(Bytes, Bytes)>> {
        let mut out = Vec::with_capacity(keys.len());
        let mut rest = keys;
        while let Some(first) = rest.first() {
            let (mut pairs, taken) = self
                .retrying(At::Key(first), ts, |r, mut c, bypass| async move {
                    // The keys of this region: those below its end.
                    let end = raw_of(&r.span.end)?;
                    let n = rest
                        .iter()
                        .take_while(|k| end.is_empty() || k.as_slice() < end.as_slice())
                        .count()
                        .max(1);
                    let req = kvrpcpb::BatchGetRequest {
                        context: context(&r, &bypass),
                        keys: rest[..n].to_vec(),
                        version: ts.0,
                        ..Default::default()
                    };
                    let resp = match c.kv_batch_get(req).await {
                        Ok(resp) => resp.into_inner(),
                        Err(s) => return Ok(Err(self.on_transport_error(&r, s))),
                    };
                    if let Some(e) = resp.region_error {
                        return Ok(Err(Again::Region(self.on_region_error(&r, &e))));
                    }
                    if let Some(e) = resp.error {
                        return key_error(&rest[0], e).map(Err);
                    }
                    let mut pairs = Vec::with_capacity(resp.pairs.len());
                    for p in resp.pairs {
                        if let Some(e) = p.error {
                            return key_error(&p.key, *e).map(Err);
                        }
                        pairs.push((p.key, p.value));
                    }
                    Ok(Ok((pairs, n)))
                })
                .await?;
            // TiKV answers in its own order.
            pairs.sort_unstable_by(|a: &(Bytes, Bytes), b| a.0.cmp(&b.0));
            out.append(&mut pairs);
            rest = &rest[taken..];
        }
        Ok(out)
    }
}
