//! Catalog answers ([`SchemaProvider`]) at the binlog's durable end.
//!
//! Every DDL the changefeed yields carries the catalog after it (the included base tables at
//! its commit ts). The binlog writer records that catalog in [`SchemaHistory`] at the position
//! right after the DDL's event; answers use the newest version at or before the durable end, so
//! they never show a table change whose event a client cannot read yet. Statements are rendered
//! from TiDB's `TableInfo` in MySQL 8.0's style (no integer display widths).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use crate::binlog_store::{BinlogFiles, StorePos, TxnOrder};
use crate::mounter::Catalog;
use crate::server::{BinlogPosition, SchemaProvider};
use crate::sql::catalog::CatalogSnapshot;

/// One catalog version: valid from binlog position `from` on.
#[derive(Debug, Clone)]
struct Version {
    from: StorePos,
    /// `(commit_ts, start_ts, part)` of the DDL that made it (`None` for the starting catalog).
    ddl: Option<TxnOrder>,
    catalog: Catalog,
}

/// Catalog versions by the binlog position they hold from, oldest first. Versions that the
/// snapshot point (where reads stand) has passed are dropped, except the newest of them, the
/// one a session pinned at an older timestamp still reads (`@@tidb_snapshot`, a consistent
/// snapshot: the registry's oldest hold), and the newest [`KEEP_NEWEST`] (a reader that chose
/// a position a moment ago and pins it now).
#[derive(Debug)]
pub struct SchemaHistory {
    versions: Mutex<VecDeque<Version>>,
    /// The oldest TiDB timestamp an open session reads at, once the server runs.
    held: OnceLock<tokio::sync::watch::Receiver<Option<u64>>>,
    /// [`KEEP_NEWEST`] (fewer in tests).
    keep_newest: usize,
}

/// Catalog versions always kept, however far the snapshot point has moved past them.
pub const KEEP_NEWEST: usize = 64;

impl SchemaHistory {
    /// A history whose only version, `start`, holds from the beginning of the binlog.
    pub fn new(start: Catalog) -> Self {
        SchemaHistory {
            versions: Mutex::new(VecDeque::from([Version {
                from: StorePos::default(),
                ddl: None,
                catalog: start,
            }])),
            held: OnceLock::new(),
            keep_newest: KEEP_NEWEST,
        }
    }

    /// The watch of the oldest timestamp sessions read at (the server's registry): versions
    /// they read stay.
    pub fn keep_for(&self, held: tokio::sync::watch::Receiver<Option<u64>>) {
        let _ = self.held.set(held);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Version>> {
        self.versions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The catalog at binlog end `end`: the newest version starting at or before it.
    pub fn at(&self, end: StorePos) -> Catalog {
        let v = self.lock();
        let i = v.partition_point(|x| x.from <= end).saturating_sub(1);
        v[i].catalog.clone()
    }

    /// The DDL `(commit_ts, start_ts, part)` whose event ends at `from` changes the catalog to
    /// `catalog`; `oldest` is the oldest position a reader can still ask for (versions before
    /// the one that holds there are dropped).
    pub fn push(&self, from: StorePos, ddl: TxnOrder, catalog: Catalog, oldest: StorePos) {
        let held = self.held.get().and_then(|h| *h.borrow());
        let mut v = self.lock();
        let visible = v.partition_point(|x| x.from <= oldest);
        let mut dropped = visible.saturating_sub(1);
        if let Some(ts) = held {
            // The version a read at `ts` uses: the newest made by a DDL committed at or
            // before it.
            let read = v.partition_point(|x| x.ddl.is_none_or(|(commit, _, _)| commit.0 <= ts));
            dropped = dropped.min(read.saturating_sub(1));
        }
        dropped = dropped.min((v.len() + 1).saturating_sub(self.keep_newest));
        v.drain(..dropped);
        v.push_back(Version {
            from,
            ddl: Some(ddl),
            catalog,
        });
    }

    /// The catalog capture starts from, when it starts after the history was made (an HA
    /// standby that takes over): it holds from the beginning unless a DDL already moved it.
    pub fn start_from(&self, catalog: Catalog) {
        let mut v = self.lock();
        if v.len() == 1 && v[0].ddl.is_none() {
            v[0].catalog = catalog;
        }
    }

    /// A DDL already in the binlog was read again (the capture restarted behind the binlog's
    /// end): if this history does not know it, its catalog holds from now on.
    pub fn replayed(&self, ddl: TxnOrder, catalog: Catalog) {
        let mut v = self.lock();
        if v.iter().any(|x| x.ddl == Some(ddl)) {
            return;
        }
        // Everything it does not know is durable already (written before this process).
        v.clear();
        v.push_back(Version {
            from: StorePos::default(),
            ddl: Some(ddl),
            catalog,
        });
    }
}

/// [`SchemaProvider`] at the durable end of the binlog.
#[derive(Debug, Clone)]
pub struct SchemaView {
    history: Arc<SchemaHistory>,
    files: BinlogFiles,
    /// The SQL catalog of the last version asked for (versions change only at DDL).
    cache: Arc<Mutex<Option<CachedCatalog>>>,
}

/// A schema version and the SQL catalog built from it.
type CachedCatalog = (Catalog, Arc<CatalogSnapshot>);

impl SchemaView {
    pub fn new(history: Arc<SchemaHistory>, files: BinlogFiles) -> Self {
        SchemaView {
            history,
            files,
            cache: Arc::default(),
        }
    }

    fn snapshot_of(&self, catalog: Catalog) -> Arc<CatalogSnapshot> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((c, snap)) = cache.as_ref() {
            if Arc::ptr_eq(c, &catalog) {
                return snap.clone();
            }
        }
        let snap = Arc::new(crate::mounter::sql_catalog::snapshot(&catalog));
        *cache = Some((catalog, snap.clone()));
        snap
    }
}

impl SchemaProvider for SchemaView {
    fn at(&self, end: &BinlogPosition) -> Arc<dyn SchemaProvider> {
        let pos = self
            .files
            .parse_position(&end.file, end.pos)
            .unwrap_or_else(|| self.files.end_pos());
        let catalog = self.history.at(pos);
        let snap = self.snapshot_of(catalog.clone());
        Arc::new(FixedCatalog {
            catalog,
            snapshot: Arc::new(OnceLock::from(snap)),
        })
    }
    fn catalog(&self) -> Arc<CatalogSnapshot> {
        self.snapshot_of(self.history.at(self.files.end_pos()))
    }
}

/// [`SchemaProvider`] over one catalog version.
#[derive(Debug, Clone)]
pub struct FixedCatalog {
    catalog: Catalog,
    snapshot: Arc<OnceLock<Arc<CatalogSnapshot>>>,
}

impl FixedCatalog {
    pub fn new(catalog: Catalog) -> Self {
        FixedCatalog {
            catalog,
            snapshot: Arc::default(),
        }
    }
}

impl SchemaProvider for FixedCatalog {
    fn at(&self, _end: &BinlogPosition) -> Arc<dyn SchemaProvider> {
        Arc::new(self.clone())
    }

    fn catalog(&self) -> Arc<CatalogSnapshot> {
        self.snapshot
            .get_or_init(|| Arc::new(crate::mounter::sql_catalog::snapshot(&self.catalog)))
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Ts;

    #[test]
    fn history_answers_the_version_of_each_binlog_end() {
        let cat = || -> Catalog { Arc::new(Vec::new()) };
        let (c0, c1, c2, c3) = (cat(), cat(), cat(), cat());
        let pos = |f, o| StorePos::new(f, o);
        let key = |n: u64| (Ts(n), Ts(n - 1), 0);
        let mut h = SchemaHistory::new(c0.clone());
        h.keep_newest = 1;
        assert!(Arc::ptr_eq(&h.at(pos(1, 4)), &c0));
        // A DDL ending at (1, 500), not yet durable (durable end (1, 300)).
        h.push(pos(1, 500), key(10), c1.clone(), pos(1, 300));
        assert!(Arc::ptr_eq(&h.at(pos(1, 300)), &c0));
        assert!(Arc::ptr_eq(&h.at(pos(1, 499)), &c0));
        assert!(Arc::ptr_eq(&h.at(pos(1, 500)), &c1));
        assert!(Arc::ptr_eq(&h.at(pos(2, 4)), &c1));
        // The next one in file 2; the durable end passed the first: c0 is dropped, c1 kept.
        h.push(pos(2, 900), key(20), c2.clone(), pos(2, 120));
        assert_eq!(h.lock().len(), 2);
        assert!(Arc::ptr_eq(&h.at(pos(2, 120)), &c1));
        assert!(Arc::ptr_eq(&h.at(pos(2, 900)), &c2));
        // Read again after a capture restart: known, nothing changes.
        h.replayed(key(10), c3.clone());
        assert!(Arc::ptr_eq(&h.at(pos(2, 120)), &c1));
        // Unknown (written before this process started): holds at once.
        h.replayed(key(5), c3.clone());
        assert!(Arc::ptr_eq(&h.at(pos(1, 4)), &c3));
        assert!(Arc::ptr_eq(&h.at(pos(9, 4)), &c3));
    }

    #[test]
    fn versions_a_pinned_session_reads_stay_until_it_lets_go() {
        let cat = || -> Catalog { Arc::new(Vec::new()) };
        let pos = |o| StorePos::new(1, o);
        let key = |n: u64| (Ts(n), Ts(n - 1), 0);
        let c: Vec<Catalog> = (0..6).map(|_| cat()).collect();
        let mut h = SchemaHistory::new(c[0].clone());
        h.keep_newest = 2;
        let (tx, rx) = tokio::sync::watch::channel(Some(15));
        h.keep_for(rx);
        // DDLs at ts 10, 20, 30, 40; reads stand past each as it comes. A session reads at
        // ts 15 (the version of the DDL at 10, from position 100).
        for (i, ts) in [10, 20, 30, 40].into_iter().enumerate() {
            let from = pos(100 * (i as u64 + 1));
            h.push(from, key(ts), c[i + 1].clone(), from);
        }
        assert!(
            Arc::ptr_eq(&h.at(pos(150)), &c[1]),
            "the pinned version stays"
        );
        assert!(Arc::ptr_eq(&h.at(pos(450)), &c[4]));
        // Let go: the next DDL drops what nobody reads, keeping the newest two.
        tx.send(None).expect("watch");
        h.push(pos(500), key(50), c[5].clone(), pos(500));
        assert_eq!(h.lock().len(), 2);
        assert!(Arc::ptr_eq(&h.at(pos(450)), &c[4]));
        assert!(Arc::ptr_eq(&h.at(pos(500)), &c[5]));
    }
}
