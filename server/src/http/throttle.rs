//! Failed sign-ins, counted per client address: after a handful, each further failure
//! makes that address wait before it may try again, twice as long each time, up to a
//! minute. A success clears the count. Keys are 256 random bits, so this is not what
//! keeps them secret; it keeps a guessing loop from costing the server its lookups
//! and its log.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures an address may have before it waits.
pub const FREE_FAILURES: u32 = 5;
/// The longest wait.
pub const MAX_WAIT: Duration = Duration::from_secs(60);
/// An address with no failure for this long is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);
/// Addresses remembered at once; past it the forgotten ones are dropped first, then
/// the oldest.
const MAX_ADDRESSES: usize = 10_000;

#[derive(Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
    until: Instant,
}

#[derive(Default)]
pub struct Throttle {
    addresses: Mutex<HashMap<IpAddr, Failures>>,
}

/// An IPv6 client is counted by its /64, the block one machine is usually given, so
/// it cannot dodge the count by changing the address's low bits.
fn bucket(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

impl Throttle {
    /// How long `ip` must still wait before trying again; None when it may try now.
    pub fn wait(&self, ip: IpAddr, now: Instant) -> Option<Duration> {
        let addresses = self.addresses.lock().unwrap_or_else(|e| e.into_inner());
        let failures = addresses.get(&bucket(ip))?;
        (failures.until > now).then(|| failures.until - now)
    }

    /// Counts a failure from `ip`; answers the wait it now has, if any.
    pub fn failed(&self, ip: IpAddr, now: Instant) -> Option<Duration> {
        let mut addresses = self.addresses.lock().unwrap_or_else(|e| e.into_inner());
        if addresses.len() >= MAX_ADDRESSES {
            addresses.retain(|_, f| now.saturating_duration_since(f.last) < FORGET_AFTER);
        }
        if addresses.len() >= MAX_ADDRESSES {
            if let Some(oldest) = addresses
                .iter()
                .min_by_key(|(_, f)| f.last)
                .map(|(k, _)| *k)
            {
                addresses.remove(&oldest);
            }
        }
        let entry = addresses.entry(bucket(ip)).or_insert(Failures {
            count: 0,
            last: now,
            until: now,
        });
        if now.saturating_duration_since(entry.last) >= FORGET_AFTER {
            entry.count = 0;
        }
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
        let over = entry.count.checked_sub(FREE_FAILURES)?.checked_sub(1)?;
        let wait = Duration::from_secs(1u64 << over.min(6)).min(MAX_WAIT);
        entry.until = now + wait;
        Some(wait)
    }

    /// A success from `ip` clears its count.
    pub fn succeeded(&self, ip: IpAddr) {
        let mut addresses = self.addresses.lock().unwrap_or_else(|e| e.into_inner());
        addresses.remove(&bucket(ip));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_begin_after_the_free_failures_and_double() {
        let throttle = Throttle::default();
        let ip: IpAddr = [192, 0, 2, 7].into();
        let t0 = Instant::now();
        for _ in 0..FREE_FAILURES {
            assert_eq!(throttle.failed(ip, t0), None);
        }
        assert_eq!(throttle.wait(ip, t0), None);
        assert_eq!(throttle.failed(ip, t0), Some(Duration::from_secs(1)));
        assert!(throttle.wait(ip, t0).is_some());
        assert_eq!(throttle.wait(ip, t0 + Duration::from_secs(1)), None);
        assert_eq!(throttle.failed(ip, t0), Some(Duration::from_secs(2)));
        for _ in 0..20 {
            throttle.failed(ip, t0);
        }
        assert_eq!(throttle.wait(ip, t0), Some(MAX_WAIT));
        // Another address is not held back; a success clears the count.
        assert_eq!(throttle.wait([192, 0, 2, 8].into(), t0), None);
        throttle.succeeded(ip);
        assert_eq!(throttle.wait(ip, t0), None);
    }

    #[test]
    fn an_ipv6_block_counts_as_one_client() {
        let throttle = Throttle::default();
        let t0 = Instant::now();
        for low in 0..=FREE_FAILURES {
            let ip = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, low as u16));
            throttle.failed(ip, t0);
        }
        let other = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 9, 9, 9, 9));
        assert!(throttle.wait(other, t0).is_some());
    }
}
