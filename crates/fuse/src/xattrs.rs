//! Extended attribute names the FUSE mount does not support.

/// Names this mount refuses with EOPNOTSUPP, as a filesystem without them does.
/// POSIX ACLs: we do not ask for FUSE_POSIX_ACL, so the kernel would never
/// enforce a stored ACL (ZFS's acltype=off refuses them the same way).
/// security.selinux: when an LSM runs, the kernel answers it without asking us;
/// otherwise nothing would use a stored label. `ls -l` asks for both names of
/// every file it lists; after one EOPNOTSUPP it stops asking on this device, so a
/// listing costs no request per entry (ENODATA would cost two).
pub fn unsupported_xattr(name: &[u8]) -> bool {
    matches!(
        name,
        b"system.posix_acl_access" | b"system.posix_acl_default" | b"security.selinux"
    )
}

/// A listxattr reply (names each followed by NUL) without the unsupported names
/// (stored by older versions of this mount).
pub fn without_unsupported_xattrs(names: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(names.len());
    for n in names.split_inclusive(|b| *b == 0) {
        if !unsupported_xattr(n.strip_suffix(&[0]).unwrap_or(n)) {
            out.extend_from_slice(n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_names_are_dropped_from_lists() {
        assert!(unsupported_xattr(b"system.posix_acl_access"));
        assert!(unsupported_xattr(b"security.selinux"));
        assert!(!unsupported_xattr(b"security.capability"));
        assert!(!unsupported_xattr(b"user.system.posix_acl_access"));
        let list = b"user.a\0system.posix_acl_access\0security.capability\0security.selinux\0";
        assert_eq!(
            without_unsupported_xattrs(list),
            b"user.a\0security.capability\0".to_vec()
        );
        assert_eq!(without_unsupported_xattrs(b""), Vec::<u8>::new());
    }
}
