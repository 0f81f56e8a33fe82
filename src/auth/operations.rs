//! Every root operation of the schema and what it needs: the one list that decides who may
//! call what. `graphql` checks it against the schema it serves (a test fails when a root
//! field has no guard, or a guard no field), and permissions that name an operation
//! (`query:patient`) are checked against it when a token is made.

use super::permissions::{Access, OperationKind, Permission, Permissions, Resource};
use crate::domain::limits::MAX_PERMISSIONS;

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
    use OperationKind::{Mutation, Query, Subscription};
    use Resource::{Bookings, Labels, Patients, Users, Webhooks};
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
        (Query, "products", r(Bookings, Read)),
        (Query, "product", r(Bookings, Read)),
        // The practice's settings that every client needs to read the rest.
        (Query, "practice", Token),
        (Query, "labels", r(Labels, Read)),
        (Query, "user", r(Users, Read)),
        (Query, "users", r(Users, Read)),
        (Query, "currentUser", Token),
        (Query, "currentPractice", Token),
        // The caller's own; another user's need users:write (checked by the resolver).
        (Query, "sessions", Token),
        (Query, "apiTokens", Settings),
        (Query, "auditEvents", Settings),
        // Each event is then shown only to who may read its resource.
        (Query, "events", Token),
        (Query, "webhook", r(Webhooks, Read)),
        (Query, "webhooks", r(Webhooks, Read)),
        (Query, "webhookDeliveries", r(Webhooks, Read)),
        (Mutation, "signIn", Public),
        (Mutation, "signOut", Token),
        (Mutation, "setPassword", Public),
        (Mutation, "createFirstAdmin", Public),
        (Mutation, "changePassword", Token),
        // One's own; anyone's with users:write (checked by the resolver).
        (Mutation, "revokeSession", Token),
        (Mutation, "createUser", r(Users, Write)),
        (Mutation, "updateUser", r(Users, Write)),
        (Mutation, "disableUser", r(Users, Write)),
        (Mutation, "enableUser", r(Users, Write)),
        (Mutation, "resetUserPassword", r(Users, Write)),
        (Mutation, "updatePractice", Settings),
        (Mutation, "createPatient", r(Patients, Write)),
        (Mutation, "updatePatient", r(Patients, Write)),
        (Mutation, "deletePatient", r(Patients, Write)),
        (Mutation, "archivePatient", r(Patients, Write)),
        (Mutation, "unarchivePatient", r(Patients, Write)),
        (Mutation, "addPatientLabel", r(Patients, Write)),
        (Mutation, "removePatientLabel", r(Patients, Write)),
        (Mutation, "addPatientPhoneNumber", r(Patients, Write)),
        (Mutation, "updatePatientPhoneNumber", r(Patients, Write)),
        (Mutation, "removePatientPhoneNumber", r(Patients, Write)),
        (Mutation, "addPatientNumber", r(Patients, Write)),
        (Mutation, "updatePatientNumber", r(Patients, Write)),
        (Mutation, "removePatientNumber", r(Patients, Write)),
        (Mutation, "addPatientAttribute", r(Patients, Write)),
        (Mutation, "updatePatientAttribute", r(Patients, Write)),
        (Mutation, "removePatientAttribute", r(Patients, Write)),
        (Mutation, "addPatientRelationship", r(Patients, Write)),
        (Mutation, "updatePatientRelationship", r(Patients, Write)),
        (Mutation, "removePatientRelationship", r(Patients, Write)),
        (Mutation, "addPatientAccessGroup", r(Patients, Write)),
        (Mutation, "removePatientAccessGroup", r(Patients, Write)),
        (Mutation, "addPatientMembership", r(Patients, Write)),
        (Mutation, "removePatientMembership", r(Patients, Write)),
        (Mutation, "createBooking", r(Bookings, Write)),
        (Mutation, "updateBooking", r(Bookings, Write)),
        (Mutation, "deleteBooking", r(Bookings, Write)),
        (Mutation, "updateBookingJourney", r(Bookings, Write)),
        (Mutation, "updateBookingMetadata", r(Bookings, Write)),
        (Mutation, "deleteBookingMetadata", r(Bookings, Write)),
        (Mutation, "createLocation", Settings),
        (Mutation, "updateLocation", Settings),
        (Mutation, "createAppointmentType", Settings),
        (Mutation, "createProduct", Settings),
        (Mutation, "updateProduct", Settings),
        (Mutation, "createAccessGroup", Settings),
        (Mutation, "createPracticeNumber", Settings),
        (Mutation, "createLabel", r(Labels, Write)),
        (Mutation, "updateLabel", r(Labels, Write)),
        (Mutation, "deleteLabel", r(Labels, Write)),
        (Mutation, "createApiToken", Settings),
        (Mutation, "revokeApiToken", Settings),
        (Mutation, "createWebhook", r(Webhooks, Write)),
        (Mutation, "updateWebhook", r(Webhooks, Write)),
        (Mutation, "deleteWebhook", r(Webhooks, Write)),
        (Mutation, "rotateWebhookSecret", r(Webhooks, Write)),
        (Mutation, "redeliverWebhook", r(Webhooks, Write)),
        (Subscription, "events", Token),
    ]
};

/// The guard of a root operation, if the schema has it.
pub fn guard_of(kind: OperationKind, name: &str) -> Option<Guard> {
    OPERATIONS
        .iter()
        .find(|(k, n, _)| *k == kind && *n == name)
        .map(|(_, _, guard)| *guard)
}

/// What a caller lacks to run an operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Missing {
    /// The operation has no guard: it is not one of the schema's.
    Guard,
    /// This permission (or the operation's own, `query:NAME`).
    Permission(String),
}

/// Whether `permissions` let their holder run root field `name` of `kind`, as [`OPERATIONS`]
/// says.
pub fn may_call(permissions: &Permissions, kind: OperationKind, name: &str) -> Result<(), Missing> {
    let guard = guard_of(kind, name).ok_or(Missing::Guard)?;
    let (allowed, needed) = match guard {
        Guard::Public | Guard::Token => (true, String::new()),
        Guard::Settings => (permissions.allows_settings(), "settings".to_string()),
        Guard::Resource(resource, access) => (
            permissions.allows(resource, access),
            format!("{}:{}", resource.as_str(), access.as_str()),
        ),
    };
    if allowed || permissions.allows_operation(kind, name) {
        Ok(())
    } else {
        Err(Missing::Permission(needed))
    }
}

/// Parses permission strings and checks that every operation they name exists.
pub fn parse_permissions(list: &[String]) -> Result<Permissions, String> {
    if list.len() > MAX_PERMISSIONS {
        return Err(format!(
            "a token carries at most {MAX_PERMISSIONS} permissions, got {}",
            list.len()
        ));
    }
    let permissions = Permissions::parse(list)?;
    for p in permissions.iter() {
        if let Permission::Operation(kind, name) = p
            && guard_of(*kind, name).is_none()
        {
            return Err(format!(
                "there is no {} named {name:?} in the schema",
                kind.as_str()
            ));
        }
    }
    Ok(permissions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_name_operations_that_exist() {
        let list = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(parse_permissions(&list(&["query:patient", "patients:read"])).is_ok());
        assert_eq!(
            parse_permissions(&list(&["query:nothing"])),
            Err("there is no query named \"nothing\" in the schema".into())
        );
    }
}
