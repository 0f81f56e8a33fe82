//! Where the permission model meets the schema: one check for root operations (by the guards
//! of `auth::OPERATIONS`), one for every field that reaches another resource.

use async_graphql::{Context, Result};

use super::error::{code, coded, forbidden};
use crate::auth::{Access, Missing, OperationKind, Permission, Principal, Resource, may_call};
use crate::store::PracticeStore;
use crate::store::audit::Author;
use crate::store::idempotency::Key;

/// The caller of this request. The HTTP layer refuses requests without a valid token before
/// they reach a resolver (signIn aside), so a missing principal here is a request that
/// should not have got this far.
pub fn principal<'c>(ctx: &Context<'c>) -> Result<&'c Principal> {
    ctx.data_opt::<Principal>().ok_or_else(|| {
        coded(
            code::UNAUTHENTICATED,
            "This operation needs a token: send it in the x-token header",
        )
    })
}

/// Checks that the caller may run this root field, as `auth::OPERATIONS` says.
pub fn authorize<'c>(ctx: &Context<'c>, kind: OperationKind) -> Result<&'c Principal> {
    let name = ctx.field().name();
    let principal = principal(ctx)?;
    match may_call(&principal.permissions, kind, name) {
        Ok(()) => Ok(principal),
        Err(Missing::Guard) => Err(super::error::internal(format!(
            "{} {name} is missing from OPERATIONS",
            kind.as_str()
        ))),
        Err(Missing::Permission(permission)) => Err(forbidden(
            permission,
            &[Permission::Operation(kind, name.to_string()).to_string()],
        )),
    }
}

/// Checks that the caller may run this mutation, and returns the store as the caller writes
/// to it (see [`writer`]).
pub fn authorize_write<'c>(ctx: &Context<'c>) -> Result<PracticeStore<'c>> {
    let principal = authorize(ctx, OperationKind::Mutation)?;
    Ok(writer(ctx, principal))
}

/// The caller's practice, as the caller writes to it through this root field: every write is
/// recorded in the audit log under the caller and the field's name.
pub fn writer<'c>(ctx: &Context<'c>, principal: &'c Principal) -> PracticeStore<'c> {
    reader(ctx, principal).by(Author {
        actor: &principal.actor,
        operation: Some(ctx.item.node.name.node.as_str()),
        key: ctx.data_opt::<Key>(),
    })
}

/// The caller's practice, as the caller sees it: a staff user kept to their access groups
/// sees no patient outside them (`PracticeStore::seen_by`).
pub fn reader<'c>(ctx: &Context<'c>, principal: &'c Principal) -> PracticeStore<'c> {
    super::store(ctx)
        .practice(&principal.practice_id)
        .seen_by(principal.patient_groups.as_deref())
}

/// Checks that the caller may read (or write) a resource reached through a field. A
/// `query:NAME` permission does not count here: it covers what its operation returns of its
/// own resource, never a relation to another.
pub fn require<'c>(ctx: &Context<'c>, resource: Resource, access: Access) -> Result<&'c Principal> {
    let principal = principal(ctx)?;
    if principal.permissions.allows(resource, access) {
        Ok(principal)
    } else {
        Err(forbidden(
            format_args!("{}:{}", resource.as_str(), access.as_str()),
            &[],
        ))
    }
}
