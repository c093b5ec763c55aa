use std::collections::BTreeMap;

use uuid::Uuid;

use super::*;
use crate::image::MetadataImage;
use crate::ops::{plan_create_acls, plan_delete_acls};
use crate::record::MetadataRecord;

fn acl(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    principal: &str,
    operation: AclOperation,
    permission: Permission,
) -> AclEntry {
    AclEntry {
        resource_type,
        resource_name: name.to_owned(),
        pattern_type,
        principal: principal.to_owned(),
        host: "*".to_owned(),
        operation,
        permission,
    }
}

fn topic(name: &str, principal: &str, op: AclOperation, perm: Permission) -> AclEntry {
    acl(
        ResourceType::Topic,
        name,
        PatternType::Literal,
        principal,
        op,
        perm,
    )
}

fn index(acls: &[AclEntry], settings: AuthorizerSettings) -> AclIndex {
    let map: BTreeMap<Uuid, AclEntry> = acls
        .iter()
        .enumerate()
        .map(|(i, a)| (Uuid::from_u128(i as u128 + 1), a.clone()))
        .collect();
    AclIndex::new(&map, settings)
}

use AclOperation::*;
use Decision::{Allowed, Denied};
use Permission::{Allow, Deny};

fn check(idx: &AclIndex, principal: &str, op: AclOperation, name: &str) -> Decision {
    idx.authorize(principal, "10.0.0.1", op, ResourceType::Topic, name)
}

#[test]
fn nothing_is_allowed_without_acls_unless_everyone_is() {
    let idx = index(&[], AuthorizerSettings::default());
    assert_eq!(check(&idx, "User:alice", Read, "orders"), Denied);
    let open = index(&[], AuthorizerSettings::new("", true));
    assert_eq!(check(&open, "User:alice", Read, "orders"), Allowed);
}

#[test]
fn allow_everyone_applies_only_to_resources_without_any_acl() {
    let acls = [topic("orders", "User:bob", Read, Allow)];
    let idx = index(&acls, AuthorizerSettings::new("", true));
    // orders has an ACL (for bob): alice is not in it.
    assert_eq!(check(&idx, "User:alice", Read, "orders"), Denied);
    assert_eq!(check(&idx, "User:bob", Read, "orders"), Allowed);
    assert_eq!(check(&idx, "User:alice", Read, "payments"), Allowed);
}

#[test]
fn deny_wins_over_allow() {
    let acls = [
        topic("orders", "User:alice", Read, Allow),
        topic("*", "User:alice", Read, Deny),
    ];
    let idx = index(&acls, AuthorizerSettings::default());
    assert_eq!(check(&idx, "User:alice", Read, "orders"), Denied);
    let acls = [
        topic("*", "User:*", All, Allow),
        acl(
            ResourceType::Topic,
            "secret",
            PatternType::Prefixed,
            "User:alice",
            Write,
            Deny,
        ),
    ];
    let idx = index(&acls, AuthorizerSettings::default());
    assert_eq!(check(&idx, "User:alice", Write, "secret-1"), Denied);
    assert_eq!(check(&idx, "User:alice", Read, "secret-1"), Allowed);
    assert_eq!(check(&idx, "User:alice", Write, "public"), Allowed);
}

#[test]
fn literal_prefixed_and_wildcard_patterns() {
    let acls = [
        topic("orders", "User:alice", Write, Allow),
        acl(
            ResourceType::Topic,
            "logs-",
            PatternType::Prefixed,
            "User:alice",
            Read,
            Allow,
        ),
        topic("*", "User:alice", Describe, Allow),
    ];
    let idx = index(&acls, AuthorizerSettings::default());
    assert_eq!(check(&idx, "User:alice", Write, "orders"), Allowed);
    assert_eq!(check(&idx, "User:alice", Write, "orders2"), Denied);
    assert_eq!(check(&idx, "User:alice", Read, "logs-app"), Allowed);
    assert_eq!(check(&idx, "User:alice", Read, "logs"), Denied);
    assert_eq!(check(&idx, "User:alice", Describe, "anything"), Allowed);
    // A literal ACL named like a prefix is not a prefix.
    assert_eq!(check(&idx, "User:alice", Write, "ord"), Denied);
    // Other resource types are not touched by topic ACLs.
    let group = idx.authorize(
        "User:alice",
        "1.2.3.4",
        Describe,
        ResourceType::Group,
        "orders",
    );
    assert_eq!(group, Denied);
}

#[test]
fn principal_and_host_wildcards() {
    let mut from_host = topic("orders", "User:*", Read, Allow);
    from_host.host = "10.0.0.1".to_owned();
    let idx = index(&[from_host], AuthorizerSettings::default());
    assert_eq!(check(&idx, "User:anyone", Read, "orders"), Allowed);
    assert_eq!(
        idx.authorize(
            "User:anyone",
            "10.0.0.2",
            Read,
            ResourceType::Topic,
            "orders"
        ),
        Denied
    );
}

#[test]
fn implied_operations_follow_kafka() {
    for op in [Read, Write, Delete, Alter] {
        let idx = index(
            &[topic("t", "User:a", op, Allow)],
            AuthorizerSettings::default(),
        );
        assert_eq!(check(&idx, "User:a", Describe, "t"), Allowed, "{op:?}");
        assert_eq!(
            check(&idx, "User:a", DescribeConfigs, "t"),
            Denied,
            "{op:?}"
        );
    }
    let idx = index(
        &[topic("t", "User:a", AlterConfigs, Allow)],
        AuthorizerSettings::default(),
    );
    assert_eq!(check(&idx, "User:a", DescribeConfigs, "t"), Allowed);
    assert_eq!(check(&idx, "User:a", Describe, "t"), Denied);
    let idx = index(
        &[topic("t", "User:a", Create, Allow)],
        AuthorizerSettings::default(),
    );
    assert_eq!(check(&idx, "User:a", Describe, "t"), Denied);
    let idx = index(
        &[topic("t", "User:a", All, Allow)],
        AuthorizerSettings::default(),
    );
    for op in AclOperation::CONCRETE {
        assert_eq!(check(&idx, "User:a", op, "t"), Allowed, "{op:?}");
    }
    // A DENY of READ does not deny the DESCRIBE another ACL allows ...
    let acls = [
        topic("t", "User:a", Read, Deny),
        topic("t", "User:a", Describe, Allow),
    ];
    let idx = index(&acls, AuthorizerSettings::default());
    assert_eq!(check(&idx, "User:a", Describe, "t"), Allowed);
    assert_eq!(check(&idx, "User:a", Read, "t"), Denied);
    // ... but a DENY of ALL denies everything.
    let acls = [
        topic("t", "User:a", All, Deny),
        topic("t", "User:a", All, Allow),
    ];
    let idx = index(&acls, AuthorizerSettings::default());
    assert_eq!(check(&idx, "User:a", Describe, "t"), Denied);
}

#[test]
fn super_users_pass_deny_acls() {
    let acls = [topic("*", "User:*", All, Deny)];
    let idx = index(
        &acls,
        AuthorizerSettings::new("User:admin; User:broker", false),
    );
    assert_eq!(check(&idx, "User:admin", Write, "t"), Allowed);
    assert_eq!(check(&idx, "User:broker", Write, "t"), Allowed);
    assert_eq!(check(&idx, "User:alice", Write, "t"), Denied);
    assert!(idx.is_super_user("User:broker"));
}

#[test]
fn authorize_by_resource_type_follows_kafka() {
    let s = AuthorizerSettings::default;
    let by_type = |idx: &AclIndex| {
        idx.authorize_by_resource_type("User:a", "10.0.0.1", Write, ResourceType::Topic)
    };
    assert_eq!(by_type(&index(&[], s())), Denied);
    assert_eq!(
        by_type(&index(&[topic("x", "User:a", Write, Allow)], s())),
        Allowed
    );
    let denied_literal = [
        topic("x", "User:a", Write, Allow),
        topic("x", "User:a", Write, Deny),
    ];
    assert_eq!(by_type(&index(&denied_literal, s())), Denied);
    let denied_prefix = [
        topic("xy", "User:a", Write, Allow),
        acl(
            ResourceType::Topic,
            "x",
            PatternType::Prefixed,
            "User:a",
            Write,
            Deny,
        ),
    ];
    assert_eq!(by_type(&index(&denied_prefix, s())), Denied);
    let wildcard_deny = [
        topic("x", "User:a", Write, Allow),
        topic("*", "User:a", Write, Deny),
    ];
    assert_eq!(by_type(&index(&wildcard_deny, s())), Denied);
}

#[test]
fn filters_match_as_kafka() {
    let lit = topic("orders", "User:a", Read, Allow);
    let wild = topic("*", "User:a", Read, Allow);
    let pre = acl(
        ResourceType::Topic,
        "ord",
        PatternType::Prefixed,
        "User:b",
        Write,
        Deny,
    );
    let filter = |pattern_type, name: Option<&str>| AclFilter {
        resource_type: ResourceType::Topic,
        resource_name: name.map(str::to_owned),
        pattern_type,
        ..AclFilter::any()
    };
    let matched = |f: &AclFilter| {
        [&lit, &wild, &pre]
            .into_iter()
            .filter(|a| f.matches(a))
            .count()
    };
    assert_eq!(matched(&AclFilter::any()), 3);
    assert_eq!(matched(&filter(PatternType::Match, Some("orders"))), 3);
    assert_eq!(matched(&filter(PatternType::Match, Some("other"))), 1);
    assert_eq!(matched(&filter(PatternType::Any, Some("orders"))), 1);
    assert_eq!(matched(&filter(PatternType::Literal, None)), 2);
    assert_eq!(matched(&filter(PatternType::Prefixed, Some("ord"))), 1);
    assert_eq!(matched(&filter(PatternType::Prefixed, Some("orders"))), 0);
    let by_principal = AclFilter {
        principal: Some("User:b".into()),
        ..AclFilter::any()
    };
    assert_eq!(matched(&by_principal), 1);
    let unknown = AclFilter {
        operation: AclOperation::Unknown,
        ..AclFilter::any()
    };
    assert!(unknown.validate().is_err());
}

#[test]
fn create_validates_like_kafka() {
    let good = topic("orders", "User:a", Read, Allow);
    assert!(good.validate().is_ok());
    let with = |f: &dyn Fn(&mut AclEntry)| {
        let mut a = good.clone();
        f(&mut a);
        a.validate()
    };
    assert!(with(&|a| a.pattern_type = PatternType::Match).is_err());
    assert!(with(&|a| a.pattern_type = PatternType::Any).is_err());
    assert!(with(&|a| a.resource_type = ResourceType::Any).is_err());
    assert!(with(&|a| a.operation = AclOperation::Any).is_err());
    assert!(with(&|a| a.permission = Permission::Any).is_err());
    assert!(with(&|a| a.principal = "alice".into()).is_err());
    assert!(with(&|a| a.resource_name = String::new()).is_err());
    assert!(with(&|a| {
        a.resource_type = ResourceType::Cluster;
        a.resource_name = "other".into();
    })
    .is_err());
    assert!(with(&|a| {
        a.resource_type = ResourceType::DelegationToken;
    })
    .is_ok());
    assert_eq!(ResourceType::from_code(99), ResourceType::Unknown);
    assert_eq!(AclOperation::from_code(12), AclOperation::IdempotentWrite);
}

#[test]
fn acl_records_replay_and_survive_a_snapshot() {
    let mut image = MetadataImage::new("c");
    let a = topic("orders", "User:a", Read, Allow);
    let b = topic("orders", "User:b", Write, Deny);
    let mut ids = (10u128..).map(Uuid::from_u128);
    let plan = plan_create_acls(&image, &[a.clone(), b.clone(), a.clone()], || {
        ids.next().unwrap_or_default()
    });
    assert_eq!(plan.response.len(), 3);
    assert_eq!(plan.records.len(), 2, "a duplicate is added once");
    for (i, r) in plan.records.iter().enumerate() {
        image.replay(i as u64, r);
    }
    assert_eq!(image.acls().len(), 2);
    // Creating an existing ACL again writes nothing.
    let again = plan_create_acls(&image, std::slice::from_ref(&a), Uuid::new_v4);
    assert!(again.records.is_empty());
    assert_eq!(again.response, vec![Ok(())]);

    let bytes = crate::snapshot::encode(&image).unwrap();
    let back = crate::snapshot::decode(std::path::Path::new("x"), &bytes, "c").unwrap();
    assert_eq!(back, image);

    let by_b = AclFilter {
        principal: Some("User:b".into()),
        ..AclFilter::any()
    };
    let plan = plan_delete_acls(&image, &[by_b.clone(), by_b]);
    assert_eq!(plan.records.len(), 1, "removed once though matched twice");
    assert_eq!(plan.response[0].as_ref().unwrap(), &vec![b]);
    image.replay(10, &plan.records[0]);
    let left: Vec<&AclEntry> = image.acls().values().collect();
    assert_eq!(left, vec![&a]);
    // The record's JSON names Kafka's values.
    let text = serde_json::to_string(&MetadataRecord::AccessControlEntry {
        id: Uuid::from_u128(1),
        acl: a,
    })
    .unwrap();
    assert!(text.contains(r#""resource_type":"TOPIC""#), "{text}");
    assert!(text.contains(r#""operation":"READ""#), "{text}");
}
