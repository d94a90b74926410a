//! Slots: a sandbox's /30 of the pool and the names of its pieces (host veth), and the checks
//! of sandbox keys and interface names.
use super::*;

/// Host-side veth name for a slot.
pub fn host_veth_name(slot: u32) -> String {
    format!("{HOST_VETH_PREFIX}{slot}")
}

/// Gateway (host end) and sandbox addresses of a slot's /30.
pub fn slot_addresses(pool: Ipv4Net, slot: u32) -> Result<(Ipv4Addr, Ipv4Addr), NetworkError> {
    let capacity = pool.size() / 4;
    if u64::from(slot) >= capacity {
        return Err(NetworkError::SlotOutOfRange {
            slot,
            pool,
            capacity,
        });
    }
    // The slot fits, so base + 4 * slot + 3 is still inside the pool (and a u32).
    let base = u32::from(pool.addr()) + 4 * slot;
    Ok((Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2)))
}

pub(super) fn check_key(key: &str) -> Result<(), NetworkError> {
    if key.is_empty()
        || key.len() > KEY_MAX_LEN
        || !key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return Err(NetworkError::InvalidKey(key.to_owned()));
    }
    Ok(())
}

/// A name that is safe to put in an nft script and fits IFNAMSIZ.
pub(super) fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b))
}

/// `<prefix><digits><suffix>` → the number (canonical decimal only).
pub(super) fn parse_slot(name: &str, prefix: &str, suffix: &str) -> Option<u32> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !(digits.len() > 1 && digits.starts_with('0'));
    if !canonical {
        return None;
    }
    digits.parse().ok()
}
