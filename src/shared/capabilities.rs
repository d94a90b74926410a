//! Linux capabilities of a sandbox from the contract's `cap_drop`/`cap_add`, and the non-root
//! ids: one rule for the daemon (which builds the runtime configuration or the Pod from it)
//! and the CLI. Names are checked against `oci-spec`'s capability list.
use std::str::FromStr;

use oci_spec::runtime::Capability;

/// UID/GID of non-root sandboxes (the contract's 65532).
pub const NON_ROOT_ID: u32 = 65532;
/// The container runtime's usual default set, what `cap_drop` (without `ALL`) subtracts from.
pub const DEFAULT_CAPS: [&str; 14] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
];

/// What a tenant's caller (a `user` key or OIDC user, an unscoped development key) may have
/// in a sandbox without an admin's say: the default set (`NET_BIND_SERVICE` among it). A
/// tenant's `limits.allowedCapabilities` adds to it; operators and admins are not limited.
/// The syscalls the seccomp profile lifts for a capability follow the granted set, so this
/// list also bounds which blocks a tenant's sandbox can have lifted.
pub const TENANT_USER_CAPS: [&str; 14] = DEFAULT_CAPS;

/// The first capability of `set` that a tenant's caller may not have: outside
/// [`TENANT_USER_CAPS`] and outside `allowed` (the tenant's `limits.allowedCapabilities`;
/// names that do not parse allow nothing).
pub fn first_not_allowed(set: &[Capability], allowed: &[String]) -> Option<Capability> {
    let allowed: Vec<Capability> = TENANT_USER_CAPS
        .iter()
        .map(|name| parse_capability(name))
        .chain(allowed.iter().map(|name| parse_capability(name)))
        .filter_map(Result::ok)
        .collect();
    set.iter().find(|cap| !allowed.contains(cap)).copied()
}

/// Every capability name `parse_capability` knows, as the API document lists them.
pub const NAMES: [&str; 41] = [
    "AUDIT_CONTROL",
    "AUDIT_READ",
    "AUDIT_WRITE",
    "BLOCK_SUSPEND",
    "BPF",
    "CHECKPOINT_RESTORE",
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "IPC_LOCK",
    "IPC_OWNER",
    "KILL",
    "LEASE",
    "LINUX_IMMUTABLE",
    "MAC_ADMIN",
    "MAC_OVERRIDE",
    "MKNOD",
    "NET_ADMIN",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_RAW",
    "PERFMON",
    "SETGID",
    "SETFCAP",
    "SETPCAP",
    "SETUID",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_CHROOT",
    "SYS_MODULE",
    "SYS_NICE",
    "SYS_PACCT",
    "SYS_PTRACE",
    "SYS_RAWIO",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "SYSLOG",
    "WAKE_ALARM",
];

/// Parses a capability name with or without `CAP_`, any case.
pub fn parse_capability(name: &str) -> Result<Capability, String> {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("CAP_").unwrap_or(&upper);
    Capability::from_str(bare).map_err(|_| format!("unknown capability '{name}'"))
}

/// The effective capability set from the contract's `cap_drop`/`cap_add`: the default policy
/// drops `ALL`; a `cap_drop` list without `ALL` subtracts from the runtime default set.
pub fn capability_set(
    cap_drop: Option<&[String]>,
    cap_add: Option<&[String]>,
) -> Result<Vec<Capability>, String> {
    let drop_all = match cap_drop {
        None => true,
        Some(list) => list.iter().any(|c| c.trim().eq_ignore_ascii_case("ALL")),
    };
    let mut set: Vec<Capability> = Vec::new();
    if !drop_all {
        let dropped = cap_drop
            .unwrap_or_default()
            .iter()
            .map(|c| parse_capability(c))
            .collect::<Result<Vec<_>, _>>()?;
        for name in DEFAULT_CAPS {
            let cap = parse_capability(name)?;
            if !dropped.contains(&cap) {
                set.push(cap);
            }
        }
    }
    for name in cap_add.unwrap_or_default() {
        if name.trim().eq_ignore_ascii_case("ALL") {
            return Err("cap_add: ALL is not allowed; name the capabilities".to_string());
        }
        let cap = parse_capability(name)?;
        if !set.contains(&cap) {
            set.push(cap);
        }
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_parses_and_the_list_is_whole() {
        for name in NAMES {
            parse_capability(name).expect(name);
        }
        // The document's enum must not miss one: oci-spec's list has this many.
        assert_eq!(NAMES.len(), 41);
    }

    fn names(set: &[Capability]) -> Vec<String> {
        let mut v: Vec<String> = set.iter().map(|c| c.to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn capability_policy() {
        assert!(capability_set(None, None).unwrap().is_empty());
        let add = vec!["NET_BIND_SERVICE".to_string(), "cap_chown".to_string()];
        assert_eq!(
            names(&capability_set(None, Some(&add)).unwrap()),
            ["CHOWN", "NET_BIND_SERVICE"]
        );
        let drop = vec!["NET_RAW".to_string()];
        let set = capability_set(Some(&drop), None).unwrap();
        assert_eq!(set.len(), DEFAULT_CAPS.len() - 1);
        assert!(!names(&set).contains(&"NET_RAW".to_string()));
        assert!(
            capability_set(Some(&["ALL".to_string()]), None)
                .unwrap()
                .is_empty()
        );
        assert!(
            capability_set(None, Some(&["FLY".to_string()]))
                .unwrap_err()
                .contains("FLY")
        );
        assert!(capability_set(None, Some(&["ALL".to_string()])).is_err());
    }

    #[test]
    fn tenant_users_get_the_defaults_and_what_their_tenant_allows() {
        let set = |names: &[&str]| -> Vec<Capability> {
            let add: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            capability_set(None, Some(&add)).unwrap()
        };
        assert_eq!(
            first_not_allowed(&set(&["NET_BIND_SERVICE", "CHOWN"]), &[]),
            None
        );
        let defaults = capability_set(Some(&[]), None).unwrap();
        assert_eq!(first_not_allowed(&defaults, &[]), None);
        assert_eq!(
            first_not_allowed(&set(&["CHOWN", "SYS_ADMIN"]), &[]),
            Some(Capability::SysAdmin)
        );
        let allowed = ["cap_sys_ptrace".to_string()];
        assert_eq!(first_not_allowed(&set(&["SYS_PTRACE"]), &allowed), None);
        assert_eq!(
            first_not_allowed(&set(&["SYS_PTRACE", "NET_ADMIN"]), &allowed),
            Some(Capability::NetAdmin)
        );
    }
}
