//! PD's service GC safe points (PD ≤ 8.5 semantics, tikv/pd `server/gc_service.go`).
//!
//! Each service registers `safe_point` with a TTL; the cluster GC safe point may advance up to
//! the minimum over live services. An update below the current minimum is refused (not an
//! error): the minimum is returned unchanged. TTL ≤ 0 removes the service. Expiry is checked
//! against the injected clock on every call.

use std::collections::BTreeMap;

use super::ts::Ts;

/// One registered service.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ServiceSafePoint {
    safe_point: Ts,
    /// Wall-clock ms after which the entry is dropped; `u64::MAX` = never.
    expire_at_ms: u64,
}

/// Answer of `UpdateServiceGCSafePoint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpdateOutcome {
    /// The minimum service safe point after the call (not necessarily the caller's).
    pub min_safe_point: Ts,
    /// TTL echoed back in seconds.
    pub ttl_secs: i64,
    /// False when the update was refused because `safe_point` < the current minimum.
    pub accepted: bool,
}

/// Service safe points and the cluster GC safe point.
#[derive(Debug, Clone, Default)]
pub struct GcSafePoints {
    services: BTreeMap<Vec<u8>, ServiceSafePoint>,
    /// The cluster GC safe point last advanced by [`GcSafePoints::advance_gc_safe_point`].
    gc_safe_point: Ts,
}

impl GcSafePoints {
    /// No services, safe point zero.
    pub fn new() -> Self {
        Self::default()
    }

    fn expire(&mut self, now_ms: u64) {
        self.services.retain(|_, s| s.expire_at_ms > now_ms);
    }

    /// The safe point service `id` holds, if it holds one.
    pub fn service(&self, id: &[u8]) -> Option<Ts> {
        self.services.get(id).map(|s| s.safe_point)
    }

    /// Minimum over live services, if any.
    pub fn min_service_safe_point(&mut self, now_ms: u64) -> Option<Ts> {
        self.expire(now_ms);
        self.services.values().map(|s| s.safe_point).min()
    }

    /// `UpdateServiceGCSafePoint`.
    pub fn update_service(
        &mut self,
        service_id: &[u8],
        ttl_secs: i64,
        safe_point: Ts,
        now_ms: u64,
    ) -> UpdateOutcome {
        self.expire(now_ms);
        if ttl_secs <= 0 {
            self.services.remove(service_id);
            let min = self
                .services
                .values()
                .map(|s| s.safe_point)
                .min()
                .unwrap_or(self.gc_safe_point);
            return UpdateOutcome {
                min_safe_point: min,
                ttl_secs,
                accepted: true,
            };
        }
        let current_min = self.services.values().map(|s| s.safe_point).min();
        // With no services, refuse going below the GC safe point already reached.
        let refused = match current_min {
            Some(min) => safe_point < min,
            None => safe_point < self.gc_safe_point,
        };
        if refused {
            return UpdateOutcome {
                min_safe_point: current_min.unwrap_or(self.gc_safe_point),
                ttl_secs,
                accepted: false,
            };
        }
        let expire_at_ms = now_ms.saturating_add((ttl_secs as u64).saturating_mul(1000));
        self.services.insert(
            service_id.to_vec(),
            ServiceSafePoint {
                safe_point,
                expire_at_ms,
            },
        );
        let min = self
            .services
            .values()
            .map(|s| s.safe_point)
            .min()
            .unwrap_or(safe_point);
        UpdateOutcome {
            min_safe_point: min,
            ttl_secs,
            accepted: true,
        }
    }

    /// Advances the cluster GC safe point towards `target` (what a GC worker would choose, e.g.
    /// now − gc life time), capped by the minimum live service safe point; never moves back.
    /// Returns the new safe point; the caller runs MVCC GC at it.
    pub fn advance_gc_safe_point(&mut self, target: Ts, now_ms: u64) -> Ts {
        let cap = self.min_service_safe_point(now_ms).unwrap_or(target);
        let next = target.min(cap);
        if next > self.gc_safe_point {
            self.gc_safe_point = next;
        }
        self.gc_safe_point
    }

    /// `GetGCSafePoint`.
    pub fn gc_safe_point(&self) -> Ts {
        self.gc_safe_point
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_refusal_ttl_and_removal() {
        let mut g = GcSafePoints::new();
        let a = g.update_service(b"cdc", 10, Ts(100), 0);
        assert_eq!((a.min_safe_point, a.accepted), (Ts(100), true));
        let b = g.update_service(b"br", 5, Ts(50), 0);
        assert_eq!(
            (b.min_safe_point, b.accepted),
            (Ts(100), false),
            "below the minimum: refused"
        );
        let c = g.update_service(b"br", 5, Ts(150), 0);
        assert_eq!(c.min_safe_point, Ts(100));
        assert_eq!(
            g.advance_gc_safe_point(Ts(1000), 0),
            Ts(100),
            "capped by the slowest service"
        );
        g.update_service(b"cdc", 10, Ts(120), 1);
        assert_eq!(g.advance_gc_safe_point(Ts(1000), 1), Ts(120));
        // br expires at 5 s, cdc at 11 s.
        assert_eq!(g.min_service_safe_point(6_000), Some(Ts(120)));
        let d = g.update_service(b"cdc", 0, Ts(u64::MAX), 6_000);
        assert!(d.accepted);
        assert_eq!(g.min_service_safe_point(6_000), None);
        assert_eq!(g.advance_gc_safe_point(Ts(900), 6_000), Ts(900));
        assert_eq!(
            g.advance_gc_safe_point(Ts(800), 6_000),
            Ts(900),
            "never moves back"
        );
        assert!(!g.update_service(b"late", 10, Ts(850), 6_000).accepted);
    }
}
