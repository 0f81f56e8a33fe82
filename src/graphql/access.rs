//! Where the permission model meets the schema: one check for root operations, one for every
//! field that reaches another resource.

use async_graphql::{Context, Result};

use super::error::{code, coded, forbidden};
use crate::auth::{Access, OperationKind, Principal, Resource};
use crate::store::PracticeStore;
use crate::store::audit::Author;

/// What a root operation needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guard {
    /// A resource, read or write; `query:NAME` (or `mutation:NAME`) also does.
    Resource(Resource, Access),
    /// The `settings` permission.
    Settings,
    /// Any valid token.
    Token,
    /// No token at all (signIn).
    Public,
}

/// Every root field of the schema and what it needs. A test checks this list against the
/// served schema, so a new operation cannot be added without deciding who may call it.
pub const OPERATIONS: &[(OperationKind, &str, Guard)] = {
    use Access::{Read, Write};
    use Guard::{Public, Settings, Token};
    use OperationKind::{Mutation, Query};
    use Resource::{Bookings, Labels, Patients, Users};
    const fn r(resource: Resource, access: Access) -> Guard {
        Guard::Resource(resource, access)
    }
    &[
        (Query, "patient", r(Patients, Read)),
        (Query, "patients", r(Patients, Read)),
        (Query, "booking", r(Bookings, Read)),
        (Query, "bookings", r(Bookings, Read)),
        (Query, "locations", r(Bookings, Read)),
        (Query, "appointmentTypes", r(Bookings, Read)),
        (Query, "labels", r(Labels, Read)),
        (Query, "user", r(Users, Read)),
        (Query, "users", r(Users, Read)),
        (Query, "currentUser", Token),
        (Query, "currentPractice", Token),
        (Query, "apiTokens", Settings),
        (Query, "auditEvents", Settings),
        (Mutation, "signIn", Public),
        (Mutation, "signOut", Token),
        (Mutation, "createPatient", r(Patients, Write)),
        (Mutation, "updatePatient", r(Patients, Write)),
        (Mutation, "deletePatient", r(Patients, Write)),
        (Mutation, "archivePatient", r(Patients, Write)),
        (Mutation, "unarchivePatient", r(Patients, Write)),
        (Mutation, "addPatientLabel", r(Patients, Write)),
        (Mutation, "removePatientLabel", r(Patients, Write)),
        (Mutation, "createBooking", r(Bookings, Write)),
        (Mutation, "updateBooking", r(Bookings, Write)),
        (Mutation, "deleteBooking", r(Bookings, Write)),
        (Mutation, "createLocation", Settings),
        (Mutation, "createAppointmentType", Settings),
        (Mutation, "createLabel", r(Labels, Write)),
        (Mutation, "updateLabel", r(Labels, Write)),
        (Mutation, "deleteLabel", r(Labels, Write)),
        (Mutation, "createApiToken", Settings),
        (Mutation, "revokeApiToken", Settings),
    ]
};

/// The guard of a root operation, if the schema has it.
pub fn guard_of(kind: OperationKind, name: &str) -> Option<Guard> {
    OPERATIONS
        .iter()
        .find(|(k, n, _)| *k == kind && *n == name)
        .map(|(_, _, guard)| *guard)
}

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

/// Checks that the caller may run this root field, as [`OPERATIONS`] says.
pub fn authorize<'c>(ctx: &Context<'c>, kind: OperationKind) -> Result<&'c Principal> {
    let name = ctx.field().name();
    let guard = guard_of(kind, name).ok_or_else(|| {
        super::error::internal(format!(
            "{} {name} is missing from OPERATIONS",
            kind.as_str()
        ))
    })?;
    let principal = principal(ctx)?;
    let allowed = match guard {
        Guard::Public | Guard::Token => true,
        Guard::Settings => {
            principal.permissions.allows_settings()
                || principal.permissions.allows_operation(kind, name)
        }
        Guard::Resource(resource, access) => {
            principal.permissions.allows(resource, access)
                || principal.permissions.allows_operation(kind, name)
        }
    };
    if allowed {
        return Ok(principal);
    }
    let alternative = [format!("{}:{name}", kind.as_str())];
    Err(match guard {
        Guard::Resource(resource, access) => forbidden(
            format_args!("{}:{}", resource.as_str(), access.as_str()),
            &alternative,
        ),
        _ => forbidden("settings", &alternative),
    })
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
    super::store(ctx)
        .practice(&principal.practice_id)
        .by(Author {
            actor: &principal.actor,
            operation: Some(ctx.item.node.name.node.as_str()),
        })
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

/// Checks an operation permission's name against the schema.
pub fn check_operation_exists(kind: OperationKind, name: &str) -> Result<(), String> {
    if guard_of(kind, name).is_some() {
        Ok(())
    } else {
        Err(format!(
            "there is no {} named {name:?} in the schema",
            kind.as_str()
        ))
    }
}
