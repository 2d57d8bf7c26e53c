//! The typed requests live in `cachalot-api-types` (one definition, shared with the CLI
//! and the mysql crate); re-exported here so the daemon's routes keep their paths. The
//! test below stays in the daemon: it checks every field against the daemon's op table.

pub use cachalot_api_types::requests::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::replication::REPL_OPS;
    use crate::daemon::OPS;
    use serde_json::json;
    use utoipa::openapi::schema::Schema;
    use utoipa::openapi::RefOr;
    use utoipa::ToSchema;

    /// The property names of a typed request, from its schema.
    fn fields<T: ToSchema>() -> Vec<String> {
        match T::schema() {
            RefOr::T(Schema::Object(o)) => o.properties.keys().cloned().collect(),
            other => panic!(
                "{} is not an object schema: {}",
                T::name(),
                serde_json::to_string(&other).unwrap_or_default()
            ),
        }
    }

    fn check<T: Op + ToSchema>() {
        let allowed = OPS
            .iter()
            .chain(REPL_OPS)
            .find(|(n, _)| *n == T::OP)
            .unwrap_or_else(|| panic!("{} is not an op", T::OP))
            .1;
        for f in fields::<T>() {
            assert!(allowed.contains(&f.as_str()), "{}: {f} not accepted", T::OP);
        }
    }

    #[test]
    fn every_field_is_an_accepted_argument() {
        check::<PoolCreate>();
        check::<PoolImport>();
        check::<PoolExport>();
        check::<PoolDestroy>();
        check::<PoolList>();
        check::<PoolStatus>();
        check::<PoolScrub>();
        check::<PoolReplace>();
        check::<PoolAdd>();
        check::<PoolAttach>();
        check::<PoolDetach>();
        check::<PoolOffline>();
        check::<PoolOnline>();
        check::<PoolRemove>();
        check::<PoolClear>();
        check::<DsCreate>();
        check::<DsDestroy>();
        check::<DsList>();
        check::<DsGet>();
        check::<DsSet>();
        check::<DsInherit>();
        check::<SnapCreate>();
        check::<SnapDestroy>();
        check::<SnapRollback>();
        check::<SnapClone>();
        check::<SnapPromote>();
        check::<SnapDiff>();
        check::<SnapHold>();
        check::<SnapRelease>();
        check::<SnapHolds>();
        check::<ReplBreak>();
        check::<ReplResync>();
        check::<ReplReverse>();
        check::<ShareList>();
        check::<AnalyticsList>();
        check::<AnalyticsShow>();
        check::<TokenCreate>();
        check::<TokenList>();
        check::<TokenRevoke>();
        check::<ReplCreate>();
        check::<ReplDestroy>();
        check::<ReplPairToken>();
        check::<ReplPair>();
        check::<ReplPeers>();
        check::<ReplList>();
        check::<ReplRun>();
        check::<ReplPause>();
        check::<ReplResume>();
        check::<FsMount>();
        check::<FsUnmount>();
        check::<FsMounts>();
    }

    #[test]
    fn wire_form_and_strict_decoding() {
        let r = DsCreate {
            name: "tank/db".into(),
            props: Props::from_list(vec!["recordsize=16K".into()]),
            ..Default::default()
        };
        assert_eq!(
            r.request().args,
            json!({"name": "tank/db", "props": ["recordsize=16K"]})
        );
        let v: DsCreate = serde_json::from_value(
            json!({"name": "t/a", "volume_size": "1G", "props": {"a": "b"}}),
        )
        .unwrap();
        assert_eq!(v.volume_size, Some(Size::Text("1G".into())));
        for bad in [
            json!({"name": "t/a", "bogus": 1}),
            json!({"name": 5}),
            json!({}),
            json!({"name": "t/a", "parents": "yes"}),
            json!({"name": "t/a", "props": {"a": 1}}),
        ] {
            assert!(
                serde_json::from_value::<DsCreate>(bad.clone()).is_err(),
                "{bad}"
            );
        }
        let l = DsList {
            kind: Some("snapshot".into()),
            ..Default::default()
        };
        assert_eq!(l.args(), json!({"type": "snapshot"}));
    }
}
